"""``autotune <op>``: a small tuning run end to end, its report, and the stored records."""
from __future__ import annotations

import re

import pytest
from click.testing import CliRunner

import tuning_db
from autotune.cli import cli as autotune_cli

from schedule import passes

from cli_helpers import MATMUL_KEY, TINY_MATMUL, cli_env


def test_small_run_prints_summary_and_stores_every_trial(tuned):
    cli, proc = tuned
    out = proc.stdout
    assert f"workload: {MATMUL_KEY}" in out
    assert re.search(r"^trials: +12 \(\d+ failed\), run 1$", out, re.M)
    assert re.search(r"^best: +[\d.e+-]+ GFLOP/s \(.* ms\), trial \d+, config [0-9a-f]{16}$", out, re.M)
    assert re.search(r"^ +C: tiles", out, re.M), "the best config is explained with describe_config"
    assert re.search(r"^anchor: +NumPy [\d.e+-]+ GFLOP/s; ratio [\d.e+-]+x$", out, re.M)
    assert re.search(r"^ +BLAS .*kernel=", out, re.M), "the BLAS kernel the anchor ran is on record"
    assert f"database: {cli.db}" in out
    assert re.search(r"^time: +build [\d.]+ s, run [\d.]+ s, model [\d.]+ s, search [\d.]+ s", out, re.M)
    with tuning_db.Database(cli.db) as db:
        (run,) = db.list_runs()
        assert (run.status, run.n_records, run.trials_requested, run.tuner) == ("finished", 12, 12, "random")
        assert len(db.history(run.id)) == 12
        assert db.best(MATMUL_KEY) is not None


def test_print_passes_shows_the_stored_best_after_each_pass_and_tunes_nothing(tuned):
    cli, _ = tuned
    proc = cli.run(*TINY_MATMUL, "--print-passes")
    assert re.search(r"^# matmul.* on cpu, record \d+: cpu-v1: C\.at=", proc.stdout, re.M)
    sections = re.findall(r"^# ---- after (\w+)$", proc.stdout, re.M)
    assert sections == ["build"] + [p.name for p in passes.pipeline("cpu")]
    assert "def kernel(A: float32" in proc.stdout and "Warning" not in proc.stderr
    with tuning_db.Database(cli.db) as db:
        assert len(db.list_runs()) == 1


def test_print_passes_needs_no_device_and_shows_the_gpu_pipeline(cli):
    proc = cli.run(*TINY_MATMUL, "--target", "cuda:a100", "--print-passes")
    assert re.search(r"^# matmul.* on cuda:a100, the default schedule \(no record stored\): cuda-v1", proc.stdout, re.M)
    sections = re.findall(r"^# ---- after (\w+)$", proc.stdout, re.M)
    assert sections == ["build"] + [p.name for p in passes.pipeline("gpu")]
    assert not cli.db.exists()  # printing reads the database only: a missing one stays missing


def test_anchor_run_restarts_once_without_openblas_overrides(tuned):
    _, proc = tuned
    assert proc.stderr.count("note: restarting without OPENBLAS_L2_SIZE") == 1


def test_progress_bar_goes_to_stderr(tuned):
    _, proc = tuned
    assert "12/12" in proc.stderr
    assert re.search(r"best [\d.e+-]+ GFLOP/s, errors \d+", proc.stderr)
    assert "Traceback" not in proc.stderr
    assert "12/12" not in proc.stdout


def test_op_without_a_fair_numpy_equivalent_says_no_anchor(cli):
    proc = cli.run("elementwise", "--op", "sigmoid", "--shape", "8,8", "--trials", "4", "--batch-size", "4",
                   "--tuner", "random", "--final", "0")
    assert re.search(r"^anchor: +no anchor: NumPy has no fair equivalent of elementwise$", proc.stdout, re.M)
    # pooling's fair equivalent is PyTorch's: without it (or told to use NumPy) there is none
    proc = cli.run("pool2d", "-C", "4", "-H", "8", "-W", "8", "--trials", "4", "--batch-size", "4", "--tuner",
                   "random", "--final", "0", env=cli_env(cli.root, AUTOTUNE_CONV2D_ANCHOR="numpy"))
    assert re.search(r"^anchor: +no anchor: NumPy has no fair equivalent of pool2d \(with PyTorch installed, "
                     r"oneDNN's is the anchor\)$", proc.stdout, re.M), proc.stdout
    with tuning_db.Database(cli.db) as db:
        counts = {w.name: w.n_records for w in db.list_workloads()}
        assert counts == {"elementwise": 4, "pool2d": 4}


def test_database_location_follows_env_then_xdg(cli):
    (cli.root / "none.jsonl").write_text("")  # `log import` writes, so it creates the database
    env = cli_env(cli.root, AUTOTUNE_DB=str(cli.root / "from-env.db"))
    cli.run("log", "import", "none.jsonl", db=False, env=env)
    proc = cli.run("log", "workloads", db=False, env=env)
    assert (cli.root / "from-env.db").exists() and proc.stdout.startswith("key")
    cli.run("log", "import", "none.jsonl", db=False)
    assert (cli.root / "xdg-cache" / "autotune" / "tuning.db").exists()


def test_transfer_warm_starts_from_another_shape(cli):
    cli.run("matmul", "-M", "24", "-N", "24", "-K", "24", "--trials", "8", "--batch-size", "8",
            "--tuner", "random", "--no-anchor", "--final", "0")
    proc = cli.run("matmul", "-M", "16", "-N", "16", "-K", "16", "--trials", "8", "--batch-size", "8",
                   "--transfer", "--no-anchor", "--final", "0")
    assert re.search(r"^model: +warm-started from 8 records of other matmul shapes$", proc.stdout, re.M)
    assert re.search(r"^trials: +8 \(\d+ failed\), run 2$", proc.stdout, re.M)


@pytest.mark.parametrize("args, rounds", [([], 1), (["--rounds", "3"], 3)])
def test_rounds_option_sets_the_measuring_rounds(tmp_path, monkeypatch, args, rounds):
    seen = {}

    class Stop(Exception):
        pass

    def fake_tune(task, **kwargs):
        seen.update(kwargs)
        raise Stop

    monkeypatch.setattr("autotune.tuning.tune", fake_tune)
    result = CliRunner().invoke(autotune_cli, ["matmul", "-M", "8", "-N", "8", "-K", "8", "--no-anchor",
                                               "--db", str(tmp_path / "t.db"), *args])
    assert isinstance(result.exception, Stop), result.output
    assert seen["timing"].rounds == rounds
