"""Worker pools: forked from a fork server, not from the owner; a dead worker is an error,
not a hang; Ctrl-C is the owner's; an interrupted owner kills running jobs."""
from __future__ import annotations

import os
import signal
import time
from concurrent.futures.process import BrokenProcessPool

import pytest

from autotune.worker_pool import start_pool, stop_pool
from backends.process import process_alive

pytestmark = pytest.mark.timeout(120)


def _wait_gone(pid: int, within: float = 10.0) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if not process_alive(pid):
            return True
        time.sleep(0.05)
    return False


def test_workers_are_not_children_of_the_owner():
    pool = start_pool(1, preload=[])
    try:
        assert pool.submit(os.getppid).result(timeout=60) != os.getpid()
    finally:
        stop_pool(pool)


def test_a_worker_that_dies_in_a_job_breaks_the_pool_instead_of_hanging():
    pool = start_pool(2, preload=[])
    try:
        with pytest.raises(BrokenProcessPool):
            list(pool.map(os._exit, [3, 3]))
    finally:
        stop_pool(pool, kill=True)


def test_a_worker_ignores_ctrl_c_which_is_the_owners():
    pool = start_pool(1, preload=[])
    try:
        pid = pool.submit(os.getpid).result(timeout=60)
        os.kill(pid, signal.SIGINT)
        time.sleep(0.2)
        assert pool.submit(os.getpid).result(timeout=60) == pid
    finally:
        stop_pool(pool)


def test_stopping_with_kill_ends_a_running_job_at_once():
    pool = start_pool(1, preload=[])
    pid = pool.submit(os.getpid).result(timeout=60)
    pool.submit(time.sleep, 60)
    time.sleep(0.2)
    t0 = time.monotonic()
    stop_pool(pool, kill=True)
    assert time.monotonic() - t0 < 10
    assert _wait_gone(pid)


def test_a_script_without_a_main_guard_runs_once_with_a_pool_started_at_its_top_level(tmp_path):
    """Multiprocessing would run the main script again in every worker (an unguarded
    ``tune()`` at its top level would tune again there); the workers leave it alone."""
    import subprocess
    import sys
    from pathlib import Path

    repo = Path(__file__).resolve().parents[2]
    script = tmp_path / "script.py"
    script.write_text(
        "from autotune.worker_pool import start_pool, stop_pool\n"
        "print('top level ran', flush=True)\n"
        "pool = start_pool(2, preload=[])\n"
        "print('jobs', sum(pool.map(abs, range(-4, 4))), flush=True)\n"
        "stop_pool(pool)\n"
    )
    env = dict(os.environ, PYTHONPATH=str(repo))
    proc = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=100)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["top level ran", "jobs 16"]
