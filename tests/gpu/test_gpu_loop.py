"""On a real GPU: the tuning loop's CUDA runner and the command line, end to end.

Marked ``gpu`` and skipped where no GPU is visible. The runner is driven with kernels
built by the real builder (NVRTC) and with hand-written broken ones: a wrong answer, an
illegal address, a kernel that never ends; each costs its trial and the next candidate
measures on a fresh measuring process.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import te
from autotune import Task
from autotune.builder import LocalBuilder
from autotune.measure import MeasureInput, Status
from autotune.runner import TimingOptions
from autotune.runner_cuda import CudaRunner
from backends import backend_for, cuda
from backends.cuda_launch import ArrayShape, KernelLaunch, LaunchManifest

from gpu_helpers import sample_configs

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not cuda.gpu_available(), reason="no CUDA GPU visible (needs CuPy and a driver)"),
]

REPO = Path(__file__).resolve().parents[2]
N = 64


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("AUTOTUNE_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path


def _task() -> Task:
    return Task.from_workload(te.create_workload("matmul", M=N, N=N, K=N), target="cuda")


def _hand_kernel(task: Task, body: str) -> str:
    """A CUBIN of a one-block kernel over the matmul's A, B, C with ``body`` (its artifact path)."""
    arrays = tuple(ArrayShape(name, (N, N), "float32") for name in ("A", "B", "C"))
    manifest = LaunchManifest((KernelLaunch("kernel", (1, 1, 1), (32, 1, 1)),), arrays, ())
    source = (manifest.header() + 'extern "C" __global__ void kernel(const float* A, const float* B, float* C) {\n'
              + body + "\n}\n")
    return str(backend_for(task.target).compile_source(source))


def _built(task: Task, count: int, seed: int = 0):
    configs = sample_configs(task.space, count, seed)
    builds = LocalBuilder(n_workers=2).build([MeasureInput(task, c) for c in configs])
    return [b for b in builds if b.status is Status.OK]


def test_runner_times_real_builds_and_each_broken_kernel_costs_one_trial(cache):
    task = _task()
    good = _built(task, 4)
    assert good, "no sampled config built"
    wrong = _hand_kernel(task, "for (int i = threadIdx.x; i < 64 * 64; i += 32) C[i] = 1.0f;")
    fault = _hand_kernel(task, "C[(long long)1 << 40] = 1.0f;")
    # A volatile local was compiled away on an H200 (the kernel returned); a volatile read
    # of global memory may not be: A[0] == A[0] holds for the finite inputs, for ever.
    hang = _hand_kernel(task, "volatile const float* a = A; while (a[0] == a[0]) {}")
    builds = [good[0], _with_artifact(good[0], wrong), _with_artifact(good[0], fault), good[-1],
              _with_artifact(good[0], hang), good[0]]
    with CudaRunner(timeout=20.0, options=TimingOptions(rounds=1)) as runner:
        results = runner.run(task, builds)
    statuses = [r.status for r in results]
    assert statuses == [Status.OK, Status.WRONG_ANSWER, Status.RUNTIME_ERROR, Status.OK, Status.TIMEOUT,
                        Status.OK], [(r.status, r.error) for r in results]
    assert all(c > 0 for r in results if r.ok for c in r.costs)
    assert "element(s) off" in results[1].error


def _with_artifact(build, artifact: str):
    from dataclasses import replace

    return replace(build, artifact=artifact)


def test_final_timing_has_cublas_beside_the_candidates(cache):
    from autotune.final_timing import FinalTimingOptions

    task = _task()
    good = _built(task, 2)
    with CudaRunner(timeout=20.0) as runner:
        times = runner.time_final(task, good, FinalTimingOptions(rounds=2, min_time=0.01, pause=0.0, max_rounds=2))
    assert len(times.anchor) == 2 and all(t > 0 for t in times.anchor)
    assert all(len(rounds) == 2 for rounds in times.candidates), times.errors


def test_cli_tunes_on_the_gpu_stores_the_device_and_apply_best_reuses_it(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "AUTOTUNE_DB"}
    env.update(AUTOTUNE_CACHE_DIR=str(tmp_path / "cache"), COLUMNS="200",
               PYTHONPATH=os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p))
    db = tmp_path / "gpu.db"
    def run(*args):
        return subprocess.run([sys.executable, "-m", "autotune.cli", *args], env=env, cwd=tmp_path,
                              capture_output=True, text=True, timeout=600)

    tuned = run("matmul", "-M", "256", "-N", "256", "-K", "256", "--target", "cuda", "--trials", "24",
                "--batch-size", "8", "--db", str(db), "--final", "2")
    assert tuned.returncode == 0, tuned.stdout + tuned.stderr
    assert "cuBLAS" in tuned.stdout
    log = run("log", "export", "-", "--db", str(db))
    assert log.returncode == 0, log.stderr
    rows = [json.loads(line) for line in log.stdout.splitlines() if line.strip().startswith("{")]
    assert rows and all(r["target"]["kind"] == "cuda" for r in rows)
    assert all("NVIDIA" in r["target"]["device"] for r in rows), rows[0]["target"]
    assert all("CuPy" in r["target"]["compiler"] for r in rows)
    check = (
        "import numpy as np, te, autotune, tuning_db, cupy\n"
        "task = autotune.Task.from_workload(te.create_workload('matmul', M=256, N=256, K=256), target='cuda')\n"
        f"f = autotune.build(task, db=tuning_db.Database({str(db)!r}))\n"
        "assert f.record is not None, 'no tuned record found'\n"
        "a, b = task.workload.random_inputs(1)\n"
        "c = np.full((256, 256), np.nan, dtype='float32')\n"
        "f(a, b, c)\n"
        "np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)\n"
        "print('apply_best ok', f.record.median_s)\n")
    applied = subprocess.run([sys.executable, "-c", check], env=env, cwd=tmp_path, capture_output=True, text=True,
                             timeout=300)
    assert applied.returncode == 0 and "apply_best ok" in applied.stdout, applied.stdout + applied.stderr
