"""Nothing the tool starts outlives it: compilers on a timeout, workers when the tuner is killed.

Processes are found by walking /proc: the descendants of a process are collected while it
runs (once it is killed, they are reparented and the ancestry is gone), and afterwards
each of them must be gone or a zombie. A test that fails kills what it collected, so it
leaves nothing behind either.
"""
from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import schedule
import te
from autotune.builder import LocalBuilder, unrolled_copies
from autotune.measure import MeasureInput, Status
from autotune.task import Task
from backends import cpu
from backends.errors import BuildTimeout
from backends.process import _prctl, kill_running_groups, run_group
from process_tree import alive, descendants, kill_all, proc_stat

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="walks /proc (Linux)")
needs_pdeathsig = pytest.mark.skipif(_prctl() is None, reason="needs prctl(PR_SET_PDEATHSIG) (Linux)")

#: How long processes may take to go once their reason to exist is gone (a bound, not a speed).
GRACE_S = 10.0

# ---------------------------------------------------------------- /proc (process_tree.py walks it)


def remember(seen: dict[int, tuple[int, str]], current: dict[int, tuple[int, str]], skip=frozenset()) -> None:
    """Add ``current`` to ``seen``, keeping the latest non-empty command line each process showed.

    A child caught between fork and exec still shows its parent's command line (gcc's, not cc1's),
    so a later look must replace what an earlier one read; but a process being killed shows an empty
    command line while it exits, and that must not erase what was read before."""
    for pid, (start, cmd) in current.items():
        if pid not in skip and (pid not in seen or seen[pid][0] != start or cmd):
            seen[pid] = (start, cmd)


def survivors(procs: dict[int, tuple[int, str]], within: float = GRACE_S) -> dict[int, tuple[int, str]]:
    """Those of ``procs`` still alive after waiting up to ``within`` seconds for them to go."""
    deadline = time.monotonic() + within
    while True:
        left = {pid: info for pid, info in procs.items() if alive(pid, info[0])}
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.05)


def wait_for(predicate, what: str, within: float = 60.0, proc: subprocess.Popen | None = None):
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"exited {proc.returncode} before {what}: {proc.communicate()}")
        time.sleep(0.01)
    raise AssertionError(f"no {what} within {within} s")


def child_env(root: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("AUTOTUNE_DB", "AUTOTUNE_DEBUG")}
    env.update(AUTOTUNE_CACHE_DIR=str(root / "kernel-cache"), XDG_CACHE_HOME=str(root / "xdg-cache"),
               PYTHONPATH=os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p))
    return env


def _pid_written(path: Path) -> int | None:
    text = path.read_text() if path.exists() else ""
    return int(text) if text.endswith("\n") else None


#: A shell that starts a grandchild, writes its pid to the file $1 names, and waits.
SPAWNER = 'sleep 60 & echo $! > "$1"; wait'

# ---------------------------------------------------------------- process groups


def test_interrupted_group_takes_its_children_along(tmp_path):
    pidfile = tmp_path / "pid"
    done = {}
    worker = threading.Thread(target=lambda: done.update(proc=run_group(["sh", "-c", SPAWNER, "sh", str(pidfile)])))
    worker.start()
    grandchild = wait_for(lambda: _pid_written(pidfile), "grandchild pid")
    procs = {grandchild: (proc_stat(grandchild)[2], "sleep 60")}
    try:
        # The worker thread registers the group once Popen returns, which the grandchild can
        # beat on a busy machine: until then there is nothing to kill (and nothing is killed).
        assert wait_for(lambda: kill_running_groups() == 1, "the group registered", within=GRACE_S)
        worker.join(GRACE_S)
        assert not worker.is_alive() and done["proc"].returncode != 0
        assert not survivors(procs)
    finally:
        kill_all(procs)


def _blocked_signals(status: str) -> int:
    return int(next(line.split()[1] for line in status.splitlines() if line.startswith("SigBlk:")), 16)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc/self/status")
def test_a_group_starts_with_ctrl_c_blocked_and_the_caller_gets_it_back():
    # a Ctrl-C to the caller's group must not reach the child before it has a group of its
    # own (Python code runs in it then); the caller's own mask comes back unchanged
    before = signal.pthread_sigmask(signal.SIG_BLOCK, set())
    child = run_group(["cat", "/proc/self/status"])
    assert _blocked_signals(child.stdout) & (1 << (signal.SIGINT - 1))
    assert signal.pthread_sigmask(signal.SIG_BLOCK, set()) == before


def _group_members(pgid: int) -> list[int]:
    """Live (not zombie) processes of process group ``pgid``."""
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[2]) == pgid and fields[0] != "Z":
                out.append(int(entry))
    return out


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="signal masks")
def test_a_ctrl_c_while_the_group_starts_is_raised_after_and_kills_it(monkeypatch):
    # SIGINT sent while the child is being started (blocked then) is raised once it is
    # registered: the caller sees KeyboardInterrupt and the group is killed, not left behind
    real_popen, started = subprocess.Popen, []

    def popen_then_ctrl_c(*args, **kw):
        started.append(real_popen(*args, **kw))
        assert _group_members(started[0].pid)  # it runs, in a group of its own
        # to this thread, which blocks it, so it is held back (a signal to the process could be
        # taken by another thread of the test run and handled here at once)
        signal.pthread_kill(threading.get_ident(), signal.SIGINT)
        return started[0]

    monkeypatch.setattr(subprocess, "Popen", popen_then_ctrl_c)
    with pytest.raises(KeyboardInterrupt):
        run_group(["sleep", "60"])
    wait_for(lambda: not _group_members(started[0].pid), "the group killed")


#: C that keeps cc1 busy for far longer than any test waits: a full unroll of 60000 iterations.
SLOW_SOURCE = ("float kernel(const float *restrict a) {\n  float s = 0.0f;\n#pragma GCC unroll 65534\n"
               "  for (int i = 0; i < 60000; ++i) s += a[i] * a[i + 1] / (a[i + 2] + 1.0f);\n  return s;\n}\n")


def test_build_timeout_leaves_no_compiler_behind(tmp_path, monkeypatch):
    monkeypatch.setenv("AUTOTUNE_CACHE_DIR", str(tmp_path))
    before = set(descendants(os.getpid()))
    outcome = {}

    def compile_it():
        try:
            cpu.compile_source(SLOW_SOURCE, timeout=4.0)  # long enough for cc1 to start on a busy machine
        except BuildTimeout as exc:
            outcome["timeout"] = str(exc)

    worker = threading.Thread(target=compile_it)
    worker.start()
    seen: dict[int, tuple[int, str]] = {}
    try:
        while worker.is_alive():
            remember(seen, descendants(os.getpid()), skip=before)
            time.sleep(0.01)
        assert "timed out" in outcome.get("timeout", ""), outcome
        assert any("cc1" in cmd for _, cmd in seen.values()), f"cc1 never seen: {seen}"
        assert not survivors(seen), "a compiler process outlived its build's timeout"
    finally:
        worker.join()
        kill_all(seen)


class Interrupted(Exception):
    """What this test's SIGINT handler raises (a KeyboardInterrupt astray would stop pytest)."""


def test_interrupted_build_kills_its_compiles_instead_of_waiting(tmp_path, monkeypatch):
    monkeypatch.setenv("AUTOTUNE_CACHE_DIR", str(tmp_path))

    class SlowBuilder(LocalBuilder):
        def source(self, inp):
            return SLOW_SOURCE

    task = Task("matmul", dict(M=16, N=16, K=16))
    config = task.space.sample(random.Random(0))
    before = set(descendants(os.getpid()))
    seen: dict[int, tuple[int, str]] = {}

    def interrupt_once_compiling():
        def compiling():
            remember(seen, descendants(os.getpid()), skip=before)
            return any("cc1" in cmd for _, cmd in seen.values())

        wait_for(compiling, "cc1")
        os.kill(os.getpid(), signal.SIGINT)  # like Ctrl-C: the main thread is waiting for the build

    def handler(signum, frame):
        raise Interrupted

    previous = signal.signal(signal.SIGINT, handler)
    helper = threading.Thread(target=interrupt_once_compiling)
    try:
        helper.start()
        with pytest.raises(Interrupted):
            SlowBuilder(n_workers=1, timeout=600).build([MeasureInput(task, config)])
        assert not survivors(seen), "an interrupted build left its compiler running"
    finally:
        helper.join()
        signal.signal(signal.SIGINT, previous)
        kill_all(seen)


@needs_pdeathsig
def test_a_group_dies_with_the_process_that_started_it(tmp_path):
    pidfile = tmp_path / "pid"
    code = ("import sys; from backends.process import run_group; "
            f"run_group(['sh', '-c', {SPAWNER!r}, 'sh', sys.argv[1]])")
    starter = subprocess.Popen([sys.executable, "-c", code, str(pidfile)], env=child_env(tmp_path),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    procs: dict[int, tuple[int, str]] = {}
    try:
        wait_for(lambda: _pid_written(pidfile), "grandchild pid", proc=starter)
        procs = descendants(starter.pid)
        starter.kill()
        starter.communicate(timeout=GRACE_S)
        assert procs and not survivors(procs), "the command outlived the process that started it"
    finally:
        starter.kill()
        kill_all(procs)


# ---------------------------------------------------------------- dying with the parent

CHILD = ("import sys, time; from backends.process import die_with_parent; "
         "die_with_parent(int(sys.argv[1])); print('armed', flush=True); time.sleep(60)")


def test_a_child_dies_with_its_parent_even_on_sigkill(tmp_path):
    parent_code = ("import os, subprocess, sys, time; "
                   f"subprocess.Popen([sys.executable, '-c', {CHILD!r}, str(os.getpid())]); time.sleep(60)")
    parent = subprocess.Popen([sys.executable, "-c", parent_code], env=child_env(tmp_path),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    procs: dict[int, tuple[int, str]] = {}
    try:
        assert parent.stdout.readline() == "armed\n"
        procs = descendants(parent.pid)
        assert len(procs) == 1
        parent.kill()
        parent.communicate(timeout=GRACE_S)  # returns only once nobody holds its stdout
        assert not survivors(procs)
    finally:
        parent.kill()
        kill_all(procs)


def test_a_child_whose_parent_is_already_gone_exits_at_once(tmp_path):
    code = "from backends.process import die_with_parent; die_with_parent(1); print('alive')"
    proc = subprocess.run([sys.executable, "-c", code], env=child_env(tmp_path), capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 1 and proc.stdout == ""


OWNED = ("import sys, time; from backends.process import die_with; "
         "die_with(int(sys.argv[1])); print('armed', flush=True); time.sleep(60)")


def test_a_process_dies_with_an_owner_that_is_not_its_parent_even_on_sigkill(tmp_path):
    # The owner starts a middleman that starts the owned process and stays: the owned
    # process's parent outlives the owner, as a fork server outlives a killed tuner.
    middleman = f"import subprocess, sys; subprocess.run([sys.executable, '-c', {OWNED!r}, sys.argv[1]])"
    owner_code = ("import os, subprocess, sys, time; "
                  f"subprocess.Popen([sys.executable, '-c', {middleman!r}, str(os.getpid())], start_new_session=True); "
                  "time.sleep(60)")
    owner = subprocess.Popen([sys.executable, "-c", owner_code], env=child_env(tmp_path),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    procs: dict[int, tuple[int, str]] = {}
    try:
        assert owner.stdout.readline() == "armed\n"
        procs = descendants(owner.pid)
        (owned,) = [pid for pid, (_, cmd) in procs.items() if "die_with(" in cmd and "subprocess.run" not in cmd]
        owner.kill()
        owner.communicate(timeout=GRACE_S)  # returns only once nobody holds its stdout
        assert not survivors({owned: procs[owned]})
    finally:
        owner.kill()
        kill_all(procs)


def test_a_process_whose_owner_is_already_gone_exits_at_once(tmp_path):
    code = "from backends.process import die_with; die_with(2 ** 22 + 1); print('alive')"  # above any pid_max
    proc = subprocess.run([sys.executable, "-c", code], env=child_env(tmp_path), capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 1 and proc.stdout == ""


# ---------------------------------------------------------------- the tuner killed


def test_killed_tuner_leaves_no_process_behind(tmp_path):
    # xgb (the default) starts a pool of feature workers once its model scores many configs:
    # a fork server and the workers forked from it, which must die with the tuner too.
    args = ["matmul", "-M", "16", "-N", "16", "-K", "16", "--batch-size", "4", "--trials", "1000", "--no-anchor",
            "--db", str(tmp_path / "t.db")]
    tuner = subprocess.Popen([sys.executable, "-m", "autotune.cli", *args], cwd=tmp_path, env=child_env(tmp_path),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    seen: dict[int, tuple[int, str]] = {}
    forked_at: dict[int, float] = {}

    def pool_measuring_and_compiling():
        now, current = time.monotonic(), descendants(tuner.pid)
        remember(seen, current)
        commands = [cmd for _, cmd in current.values()]
        # The workers keep the fork server's command line: the server and one worker at least.
        pool = [pid for pid, (_, cmd) in current.items() if "multiprocessing.forkserver" in cmd]
        return (sum(now - forked_at.setdefault(pid, now) > 0.5 for pid in pool) >= 2
                and any("autotune.runner_worker" in c for c in commands)
                and any(c.split(" ", 1)[0].endswith(("gcc", "cc1")) for c in commands))

    try:
        wait_for(pool_measuring_and_compiling, "feature pool, measuring process and compile at once", within=120,
                 proc=tuner)
        remember(seen, descendants(tuner.pid))
        tuner.kill()
        tuner.communicate(timeout=GRACE_S)  # hangs while anything holds the tuner's stdout or stderr
        left = survivors(seen)
        assert not left, f"outlived the tuner: {sorted(cmd for _, cmd in left.values())}"
    finally:
        tuner.kill()
        kill_all(seen)


# ---------------------------------------------------------------- caps on what is compiled


def test_unrolled_copies_multiply_along_a_nest():
    A = te.placeholder((8, 8), name="A")
    B = te.placeholder((8, 8), name="B")
    k = te.reduce_axis((0, 8), name="k")
    C = te.compute((8, 8), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    s = schedule.create_schedule(C)
    s[C].unroll(C.op.axis[1])
    s[C].unroll(k)
    assert unrolled_copies(schedule.lower(s, [A, B, C])) == 64


def test_candidates_over_a_cap_are_invalid_without_compiling():
    task = Task("matmul", dict(M=32, N=32, K=32))
    rng = random.Random(0)
    unrolled = next(c for c in (task.space.sample(rng) for _ in range(500)) if unrolled_copies(task.lower(c)) > 1)
    copies = unrolled_copies(task.lower(unrolled))
    (result,) = LocalBuilder(max_unrolled=copies - 1).build([MeasureInput(task, unrolled)])
    assert result.status == Status.INVALID and result.artifact is None
    assert f"{copies} copies" in result.error and f"cap of {copies - 1} (LocalBuilder max_unrolled)" in result.error
    (result,) = LocalBuilder(max_source_chars=100).build([MeasureInput(task, unrolled)])
    assert result.status == Status.INVALID
    assert "cap of 100 (LocalBuilder max_source_chars)" in result.error
