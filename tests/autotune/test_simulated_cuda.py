"""The cuda tuning loop without a GPU: the ``cuda_sim`` kind (NVRTC builds, the emulator as
the device, an analytic model's times) through the runner, ``tune`` and the command line.

Each kernel here is really compiled by NVRTC and really executed by the emulator; the
broken ones are real builds edited in their emulated part, so the runner's statuses come
from the emulator's own checks.
"""
from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import te
import tuning_db
from autotune import Task, targets, tune
from autotune.builder import LocalBuilder
from autotune.measure import MeasureInput, Status
from autotune.runner import TimingOptions
from backends import backend_for, nvrtc
from backends.cuda_sim import EMULATOR_SEPARATOR, SimulatedKernels

from test_measure import distinct_configs

pytestmark = pytest.mark.skipif(not nvrtc.available(), reason="NVRTC is not installed (pip install -e '.[cuda]')")

REPO = Path(__file__).resolve().parents[2]
SIZE = 32


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("AUTOTUNE_CACHE_DIR", str(tmp_path / "cache"))


def _task(target: str = "cuda_sim") -> Task:
    return Task.from_workload(te.create_workload("matmul", M=SIZE, N=SIZE, K=SIZE), target=target)


def _edited_build(task: Task, config, edit) -> object:
    """A build of ``config`` whose emulated C went through ``edit`` (its CUDA part unchanged)."""
    backend = backend_for(task.target)
    cuda_part, sep, emulated = backend.generate_source(task.lower(config)).partition(EMULATOR_SEPARATOR + "\n")
    edited = edit(emulated)
    assert edited != emulated, "the edit changed nothing"
    from autotune.builder import compile_with_status

    status, artifact, error, seconds = compile_with_status(backend, cuda_part + sep + edited, 60.0)
    assert status is Status.OK, error
    from autotune.measure import BuildResult

    return BuildResult(Status.OK, artifact)


def test_the_simulated_kind_stands_for_cuda_and_says_so():
    target = targets.simulated_counterpart("cuda:sm_80")
    assert str(target) == "cuda_sim:sm_80" and target.facts.arch == "sm_80"
    assert targets.is_simulated(target) and not targets.is_simulated("cuda") and not targets.is_simulated("cpu")
    info = targets.describe(target)
    assert info.kind == "cuda_sim" and info.device.startswith("simulated ")
    assert "analytic model" in info.flags
    with pytest.raises(ValueError, match="no simulated counterpart"):
        targets.simulated_counterpart("cpu")
    assert targets.measure_problem("cuda_sim") is None  # no GPU needed


def test_runner_checks_on_the_emulator_and_reports_the_model_deterministically():
    task = _task()
    configs = distinct_configs(task, 6)
    builds = LocalBuilder(n_workers=2).build([MeasureInput(task, c) for c in configs])
    assert all(b.status is Status.OK for b in builds), [b.error for b in builds]
    with targets.make_runner(task.target, options=TimingOptions(rounds=2)) as runner:
        first = runner.run(task, builds)
        again = runner.run(task, builds)
    assert all(r.ok for r in first), [r.error for r in first]
    assert [r.costs for r in first] == [r.costs for r in again]
    models = [SimulatedKernels.read_beside(b.artifact).seconds for b in builds]
    assert [r.median_s for r in first] == models
    assert len(set(models)) > 1, "the model gives every config the same time"


def test_a_wrong_or_out_of_bounds_kernel_costs_one_trial():
    task = _task()
    config = distinct_configs(task, 1)[0]
    good = LocalBuilder(n_workers=1).build([MeasureInput(task, config)])[0]

    def scale_output(c: str) -> str:  # every element of C written twice as large
        return re.sub(r"(\n\s*C\[.*\] = )", r"\g<1>2.0f * ", c, count=1)

    def shrink_bound(c: str) -> str:  # C's first dimension checked against 1: an out-of-bounds row
        return c.replace(f'{SIZE}, "C", 0)', '1, "C", 0)')

    wrong = _edited_build(task, config, scale_output)
    fault = _edited_build(task, config, shrink_bound)
    with targets.make_runner(task.target, options=TimingOptions(rounds=1)) as runner:
        results = runner.run(task, [good, wrong, fault, good])
    assert [r.status for r in results] == [Status.OK, Status.WRONG_ANSWER, Status.RUNTIME_ERROR, Status.OK], \
        [r.error for r in results]
    assert "element(s) off" in results[1].error
    assert "out-of-bounds" in results[2].error


def test_tune_simulate_stores_simulated_records_and_apply_best_reuses_them(tmp_path):
    import autotune

    db_path = tmp_path / "sim.db"
    with tuning_db.Database(db_path) as db:
        result = tune(_task("cuda"), trials=12, tuner="random", batch_size=6, db=db, simulate=True)
    assert result.task.target.kind == "cuda_sim"
    assert result.best is not None and len(result.history) == 12
    with tuning_db.Database(db_path) as db:
        records = db.records_for_task(result.task.key, None)
        assert len(records) == 12
        assert {r.target.kind for r in records} == {"cuda_sim"}
    with tuning_db.Database(db_path) as db:
        module = autotune.build(_task(), db=db)
    assert module.record is not None and module.config == result.best.config
    a, b = result.task.workload.random_inputs(3)
    c = np.full((SIZE, SIZE), np.nan, dtype="float32")
    module(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)


def _cli(tmp_path, *args, **kw):
    env = {"PATH": "/usr/bin:/bin", "AUTOTUNE_CACHE_DIR": str(tmp_path / "cache"), "PYTHONPATH": str(REPO),
           "COLUMNS": "200", "HOME": str(tmp_path)}
    return subprocess.run([sys.executable, "-m", "autotune.cli", *args], env=env, cwd=tmp_path, capture_output=True,
                          text=True, timeout=300, **kw)


SIM_MATMUL = ["matmul", "-M", str(SIZE), "-N", str(SIZE), "-K", str(SIZE), "--target", "cuda", "--simulate",
              "--tuner", "random", "--batch-size", "4"]


def test_cli_simulate_runs_the_loop_and_never_reports_a_speed(tmp_path):
    db = tmp_path / "sim.db"
    first = _cli(tmp_path, *SIM_MATMUL, "--trials", "8", "--db", str(db))
    assert first.returncode == 0, first.stderr
    assert "SIMULATED" in first.stdout and "cuda_sim" in first.stdout
    assert "GFLOP/s" not in first.stdout
    resumed = _cli(tmp_path, *SIM_MATMUL, "--trials", "12", "--resume", "--db", str(db))
    assert resumed.returncode == 0, resumed.stderr
    assert ": 4 new, 8 stored before" in resumed.stdout
    exported = _cli(tmp_path, "log", "export", "-", "--db", str(db))
    rows = [json.loads(line) for line in exported.stdout.splitlines() if line.startswith("{")]
    assert len(rows) >= 12
    assert all(r["target"]["kind"] == "cuda_sim" and r["target"]["device"].startswith("simulated") for r in rows)
    assert all(r["gflops"] is None for r in rows), "a simulated time became a speed"
    runs = _cli(tmp_path, "log", "runs", "--json", "--db", str(db))
    assert all(run["best_gflops"] is None for run in json.loads(runs.stdout)), runs.stdout


def test_cli_simulate_refuses_what_it_cannot_simulate(tmp_path):
    not_gpu = _cli(tmp_path, "matmul", "-M", "8", "-N", "8", "-K", "8", "--target", "cpu", "--simulate",
                   "--db", str(tmp_path / "x.db"))
    assert not_gpu.returncode == 2 and "no simulated counterpart" in not_gpu.stderr
    too_big = _cli(tmp_path, "matmul", "-M", "4096", "-N", "4096", "-K", "4096", "--target", "cuda",
                   "--simulate", "--db", str(tmp_path / "x.db"))
    assert too_big.returncode == 1 and "simulate a smaller shape" in too_big.stderr
    assert not (tmp_path / "x.db").exists()


def test_cli_simulate_interrupted_keeps_its_batches(tmp_path):
    db = tmp_path / "sim.db"
    env = {"PATH": "/usr/bin:/bin", "AUTOTUNE_CACHE_DIR": str(tmp_path / "cache"), "PYTHONPATH": str(REPO),
           "HOME": str(tmp_path)}
    proc = subprocess.Popen([sys.executable, "-m", "autotune.cli", *SIM_MATMUL, "--trials", "400", "--db", str(db)],
                            env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    sys.path.insert(0, str(REPO / "tests" / "cli"))
    from cli_helpers import wait_for_records

    wait_for_records(db, 4, proc, timeout=180)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130 and "--resume" in err, err
    with tuning_db.Database(db) as opened:
        (run,) = opened.list_runs()
        assert run.status == "interrupted" and run.n_records >= 4
