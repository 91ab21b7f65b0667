"""Helpers of the command-line tests: run the real ``autotune`` program in a subprocess.

Every run gets a kernel cache in a temporary directory and an environment in which no
default location points at the user's own database.
"""
from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from process_tree import descendants, kill_all

REPO = Path(__file__).resolve().parents[2]
#: The smallest tuning run worth the name: tiny shapes, a few small batches, random search,
#: no final timing (which stores a run of its own; tests/cli/test_cli_final.py covers it).
MATMUL_KEY = 'matmul{"K":16,"M":16,"N":16,"dtype":"float32","out_dtype":null,"transpose_a":false,"transpose_b":false}'
TINY_MATMUL = ["matmul", "-M", "16", "-N", "16", "-K", "16", "--tuner", "random", "--batch-size", "4", "--final", "0"]


def cli_env(root: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("AUTOTUNE_DB", "AUTOTUNE_DEBUG")}
    env.update(
        AUTOTUNE_CACHE_DIR=str(root / "kernel-cache"),
        XDG_CACHE_HOME=str(root / "xdg-cache"),
        PYTHONPATH=os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p),
        COLUMNS="200",
        PYTHONFAULTHANDLER="1",   # a run stuck past a test's patience dumps its threads (finish_or_explain)
    )
    env.update(extra)
    return env


@dataclass
class CLI:
    """Runs ``python -m autotune.cli`` in ``root`` against ``db`` (a SQLite file)."""

    root: Path
    db: Path

    def command(self, *args: str) -> list[str]:
        return [sys.executable, "-m", "autotune.cli", *args]

    def run(self, *args: str, db: bool = True, env: dict | None = None, timeout: float = 180,
            expect: int | None = 0) -> subprocess.CompletedProcess:
        """Run and check the exit status (``expect=None``: any)."""
        full = [*args, "--db", str(self.db)] if db else list(args)
        proc = subprocess.run(self.command(*full), cwd=self.root, env=env or cli_env(self.root),
                              capture_output=True, text=True, timeout=timeout)
        if expect is not None:
            assert proc.returncode == expect, (
                f"autotune {' '.join(full)} exited {proc.returncode}, expected {expect}\n"
                f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}")
        return proc

    def start(self, *args: str) -> subprocess.Popen:
        return subprocess.Popen(self.command(*args, "--db", str(self.db)), cwd=self.root, env=cli_env(self.root),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def tune(self, *extra: str, trials: int = 8, **kw) -> subprocess.CompletedProcess:
        return self.run(*TINY_MATMUL, "--trials", str(trials), "--no-anchor", *extra, **kw)


def count_records(db: Path, where: str = "1") -> int:
    """Records in ``db`` read with plain sqlite3 (0 while the file or table does not exist yet)."""
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5) as con:
            return con.execute(f"SELECT count(*) FROM records WHERE {where}").fetchone()[0]
    except sqlite3.OperationalError:
        return 0


def finish_or_explain(proc: subprocess.Popen, timeout: float = 60) -> tuple[str, str]:
    """``proc.communicate(timeout)``; a run still going after ``timeout`` fails the test with
    what it was doing: the processes it started and its Python threads' stacks
    (faulthandler, on SIGABRT); all of those processes are then killed."""
    try:
        return proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        tree = descendants(proc.pid)
        proc.send_signal(signal.SIGABRT)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        kill_all(tree)   # they hold its pipes open: the output ends when they are gone
        _, err = proc.communicate(timeout=10)
        processes = "\n".join(f"{pid} {command}" for pid, (_, command) in tree.items())
        raise AssertionError(f"autotune still running {timeout} s later; its processes:\n{processes}\n"
                             f"stderr (the threads' stacks at the end):\n{err[-6000:]}") from None


def wait_for_records(db: Path, n: int, proc: subprocess.Popen, timeout: float = 90) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = count_records(db)
        if found >= n:
            return found
        if proc.poll() is not None:
            raise AssertionError(f"autotune exited {proc.returncode} before storing {n} records: "
                                 f"{proc.communicate()}")
        time.sleep(0.1)
    proc.kill()
    raise AssertionError(f"no {n} records in {db} after {timeout} s")
