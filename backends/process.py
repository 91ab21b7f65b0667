"""Child processes that never outlive their reason to exist.

    proc = run_group([CC, *flags, src, "-o", out], timeout=60)   # CompletedProcess
    kill_running_groups()        # an interrupted caller stops every run_group in flight
    die_with_parent(parent_pid)  # first thing in a child: it dies with its parent
    die_with(owner_pid)          # ... or with another process than its parent

Why a process group. gcc is a driver: the compiler proper (``cc1``), the assembler and
the linker are its children. Killing the driver on a timeout leaves them running, their
parent now PID 1. ``run_group`` starts the command in a session of its own, so that it and
everything it starts share one process group, and kills the whole group (``os.killpg``)
on a timeout and on any exception, Ctrl-C included.

Why a guard shell. When the caller itself is killed (SIGKILL), nothing of it runs to
kill the group. On Linux the command therefore runs under ``sh``, whose parent-death
signal (``prctl(PR_SET_PDEATHSIG)``) is SIGTERM and whose trap for it kills the group.
The driver's own parent-death signal would not do: it is not inherited by ``cc1``. The
signal is sent when the *thread* that started the command ends; ``run_group`` waits for
the command in that thread, so the two end together.

Why SIGINT is blocked while the command starts. Between the fork and ``setsid`` the child
is still in the caller's process group, and with a ``preexec_fn`` it runs Python code
there (the at-fork hooks): a Ctrl-C to the group in that moment raised KeyboardInterrupt
inside ``threading._after_fork`` and printed a traceback under the command line's
message. The starting thread blocks SIGINT around the fork, so the child begins with it
blocked (the command keeps it so: it is never sent one, its group being its own), and
unblocks it once the group is registered, so a Ctrl-C that came meanwhile is raised then
and kills the group like any other.

``die_with_parent`` is the same promise for our own long-lived children (the measuring
process): on Linux the kernel sends them SIGKILL when the parent dies; elsewhere a daemon
thread polls ``os.getppid()``. ``die_with`` is for a process whose owner is not its parent
(the feature workers, forked by a fork server): a daemon thread waits on a pidfd of the
owner (polls where there is none) and exits when the owner does.
"""
from __future__ import annotations

import ctypes
import functools
import os
import signal
import subprocess
import sys
import threading
import time

_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>

#: Runs "$@" in the background and waits for it; ``wait`` returns as soon as a trapped
#: signal arrives (POSIX), and the trap then kills the whole group, this shell included.
_GUARD_SCRIPT = 'trap "kill -s KILL 0" TERM; "$@" & wait $!'

# Process groups run_group is waiting for, by leader pid. Process-wide on purpose, like
# the children themselves: an interrupt reaches the main thread, the compiles run in others.
_running: set[int] = set()
_running_lock = threading.Lock()


@functools.lru_cache(maxsize=None)
def _prctl():
    """libc's ``prctl`` (Linux only), resolved once in the parent: a forked child must not
    load libraries before it execs."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        fn = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    fn.restype = ctypes.c_int
    return fn


def set_parent_death_signal(sig: int) -> bool:
    """Ask the kernel to send ``sig`` to this process when its parent dies; False where
    that cannot be asked (not Linux)."""
    prctl = _prctl()
    return prctl is not None and prctl(_PR_SET_PDEATHSIG, int(sig), 0, 0, 0) == 0


def die_with_parent(parent_pid: int, poll_s: float = 0.5) -> None:
    """Make this process die when ``parent_pid``, its parent, dies (even by SIGKILL).

    Call it first thing in a child. The parent may already be gone by then (its
    children were reparented): the child then exits at once.
    """
    if not set_parent_death_signal(signal.SIGKILL):
        threading.Thread(target=_watch_parent, args=(parent_pid, poll_s), name="die-with-parent",
                         daemon=True).start()
    if os.getppid() != parent_pid:
        os._exit(1)


def die_with(owner_pid: int, poll_s: float = 0.5) -> None:
    """Make this process exit when ``owner_pid`` (any process, not only its parent) exits,
    even by SIGKILL; at once if it is already gone."""
    try:
        pidfd = os.pidfd_open(owner_pid)
    except ProcessLookupError:
        os._exit(1)
    except (AttributeError, OSError):  # no pidfd here (not Linux, or a kernel before 5.3)
        pidfd = None
    threading.Thread(target=_wait_for_owner, args=(owner_pid, pidfd, poll_s), name="die-with-owner",
                     daemon=True).start()


def _wait_for_owner(owner_pid: int, pidfd: int | None, poll_s: float) -> None:
    if pidfd is not None:
        import select

        select.select([pidfd], [], [])  # a pidfd turns readable when its process exits
    else:
        while process_alive(owner_pid):
            time.sleep(poll_s)
    os._exit(1)


def process_alive(pid: int) -> bool:
    """Whether a process ``pid`` exists (a zombie counts until it is reaped)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, and someone else's
        pass
    return True


def _watch_parent(parent_pid: int, poll_s: float) -> None:
    while os.getppid() == parent_pid:
        time.sleep(poll_s)
    os._exit(1)


def _arm_guard(prctl, parent_pid: int) -> None:
    """preexec_fn of the guard shell (runs between fork and exec: nothing that takes a lock)."""
    prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    if os.getppid() != parent_pid:  # the caller died before the signal was armed
        os._exit(1)


def run_group(cmd: list[str], timeout: float | None = None, env: dict | None = None) -> subprocess.CompletedProcess:
    """Run ``cmd`` in a process group of its own, its output captured as text.

    The whole group is killed when ``timeout`` (seconds) passes (``subprocess.TimeoutExpired``
    is raised then), when waiting for it raises anything else (KeyboardInterrupt), when
    ``kill_running_groups`` is called, and on Linux when the calling thread dies.
    ``env``: the command's environment (None: this process's). Returns the command's
    ``CompletedProcess``.
    """
    prctl = _prctl()
    argv = ["/bin/sh", "-c", _GUARD_SCRIPT, "sh", *cmd] if prctl is not None else list(cmd)
    preexec = functools.partial(_arm_guard, prctl, os.getpid()) if prctl is not None else None
    mask = _block_sigint()
    try:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, start_new_session=True, preexec_fn=preexec, env=env)
    except BaseException:
        _restore_mask(mask)
        raise
    with _running_lock:
        _running.add(proc.pid)
    try:
        _restore_mask(mask)  # a Ctrl-C held back while the child started is raised here
        out, err = proc.communicate(timeout=timeout)
    except BaseException:
        _kill_group(proc.pid)  # before the leader is reaped: its pid names the group until then
        proc.communicate()
        raise
    finally:
        with _running_lock:
            _running.discard(proc.pid)
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


def _block_sigint():
    """Block SIGINT in the calling thread (see the module docstring); the old mask, or None
    where threads have no signal masks."""
    if not hasattr(signal, "pthread_sigmask"):
        return None
    return signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})


def _restore_mask(mask) -> None:
    if mask is not None:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)


def kill_running_groups() -> int:
    """Kill every process group ``run_group`` is waiting for, in any thread; returns how many.

    A caller interrupted while its worker threads compile calls this, so that the threads
    return at once instead of when their compilers finish.
    """
    with _running_lock:
        leaders = list(_running)
    for pid in leaders:
        _kill_group(pid)
    return len(leaders)


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass  # already gone
