"""The anchor is measured like a candidate, before and after tuning, and a disagreement
between the two figures is reported instead of a ratio taken on faith."""
from __future__ import annotations

import re

import pytest
from click.testing import CliRunner

from autotune import anchor
from autotune.anchor import AnchorFigure, NumpyAnchor, disagreement
from autotune.cli import cli as autotune_cli
from autotune.cli import tune_cmd
from autotune.runner import TimingOptions
from autotune.task import Task

# No final timing: it would time the anchor after tuning in the measuring process instead.
TINY = ["matmul", "-M", "16", "-N", "16", "-K", "16", "--tuner", "random", "--batch-size", "4", "--trials", "4",
        "--final", "0"]


def test_the_figure_is_the_fastest_round():
    fig = AnchorFigure("NumPy", (90.0, 120.0, 100.0))
    assert fig.gflops == 120.0


@pytest.mark.parametrize("before, after, warns", [
    (100.0, 100.0, False),
    (100.0, 90.0, False),      # 10 % apart: within the allowance
    (100.0, 80.0, True),       # 20 % apart
    (10.0, 117.0, True),       # the kind of figure a busy machine gave once
])
def test_disagreement_beyond_the_noise_allowance(before, after, warns):
    problem = disagreement(AnchorFigure("NumPy", (before,)), AnchorFigure("NumPy", (after,)), allowance=0.15)
    assert (problem is not None) == warns
    if warns:
        assert "before tuning" in problem and "noise allowance" in problem


def test_numpy_anchor_measures_one_figure_per_round():
    task = Task("matmul", dict(M=32, N=32, K=32), "cpu")
    timing = TimingOptions(rounds=2, min_time=0.0, min_repeats=2, max_repeats=2)
    fig = NumpyAnchor().measure(task, timing)
    assert isinstance(fig, AnchorFigure)
    assert len(fig.round_gflops) == 2 and all(g > 0 for g in fig.round_gflops)
    assert fig.gflops == max(fig.round_gflops)
    assert "kernel=" in fig.blas


def test_an_op_without_an_equivalent_gives_the_reason():
    task = Task("elementwise", dict(op="sigmoid", shape=[4, 4]), "cpu")  # pool2d has PyTorch's, where installed
    assert NumpyAnchor().measure(task).startswith("no anchor: ")


def _scripted_anchor(monkeypatch, figures):
    """The CLI's anchor measurements answer ``figures`` in order; returns the calls seen."""
    calls = []

    def measure(task, timing):
        calls.append(timing)
        return AnchorFigure("NumPy", (figures[len(calls) - 1],), "openblas kernel=Scripted")

    monkeypatch.setattr(tune_cmd, "measure_anchor", measure)
    return calls


def test_the_cli_measures_the_anchor_before_and_after_and_warns_when_they_disagree(tmp_path, monkeypatch):
    calls = _scripted_anchor(monkeypatch, [10.0, 117.0])
    result = CliRunner().invoke(autotune_cli, [*TINY, "--rounds", "2", "--db", str(tmp_path / "t.db"),
                                              "--no-progress"])
    assert result.exit_code == 0, result.output
    assert len(calls) == 2 and all(t.rounds == 2 for t in calls), "both with the candidates' protocol"
    assert re.search(r"^warning: NumPy ran at 10 GFLOP/s before tuning and 117 after", result.stderr, re.M)
    assert re.search(r"^anchor: +NumPy 117 GFLOP/s; ratio", result.stdout, re.M), "the faster figure"
    assert re.search(r"before tuning 10, after 117 GFLOP/s", result.stdout)


def test_no_warning_when_the_figures_agree(tmp_path, monkeypatch):
    calls = _scripted_anchor(monkeypatch, [100.0, 104.0])
    result = CliRunner().invoke(autotune_cli, [*TINY, "--db", str(tmp_path / "t.db"), "--no-progress"])
    assert result.exit_code == 0, result.output
    assert [t.rounds for t in calls] == [1, 1], "one round unless --rounds asks for more"
    assert "warning" not in result.stderr
    assert re.search(r"^anchor: +NumPy 104 GFLOP/s; ratio", result.stdout, re.M)


def test_no_anchor_measures_nothing(tmp_path, monkeypatch):
    calls = _scripted_anchor(monkeypatch, [])
    result = CliRunner().invoke(autotune_cli, [*TINY, "--no-anchor", "--db", str(tmp_path / "t.db"),
                                              "--no-progress"])
    assert result.exit_code == 0, result.output
    assert calls == []
    assert re.search(r"^anchor: +no anchor: --no-anchor$", result.stdout, re.M)
