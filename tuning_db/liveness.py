"""Is a run that says "running" still running? Telling a live run from a killed one.

A run whose process was killed (SIGKILL, a crash, a power cut) never reaches
``finish_run`` and keeps the status "running" in the database. Each run stores the pid
and host of its tuning process and a heartbeat (``heartbeat_at``, renewed with every
stored batch), and ``run_state`` reads them:

    not "running"                     its stored status ("finished", "interrupted")
    on this host, with a pid          "running" while that process lives, else "stale"
                                      (the pid held by a process that started after the
                                      run did, after a reboot or pid reuse, counts as gone)
    on another host, or no pid        "stale" once the last heartbeat (else the start) is
    (older runs, imported runs)       older than ``STALE_AFTER``; "running" before that

Another host's processes cannot be looked at, so there only the heartbeat's age counts;
``STALE_AFTER`` is far longer than any batch takes. ``now`` and the process check are
parameters, so the rules are tested without waiting and without real processes.
"""
from __future__ import annotations

import os
import platform
from datetime import datetime, timedelta, timezone
from typing import Callable, Protocol

#: A run on another host with no heartbeat for this long is taken for dead.
STALE_AFTER = timedelta(hours=1)
#: How far a process's start time (whole seconds of boot time plus clock ticks) may lie
#: after the run's start and still be the process that started the run.
_START_SLACK = timedelta(seconds=2)

#: (pid, the run's start) -> whether the process that started the run still lives.
AliveCheck = Callable[[int, datetime], bool]


class RunLike(Protocol):
    status: str
    pid: int | None
    host: str | None
    started_at: datetime
    heartbeat_at: datetime | None


def this_host() -> str:
    """The name runs store as their host (the same as ``TargetInfo.host`` of this machine)."""
    return platform.node()


def process_started_at(pid: int) -> datetime | None:
    """When process ``pid`` started (UTC), from ``/proc``; None where that cannot be read."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rpartition(")")[2].split()
        with open("/proc/stat") as f:
            boot = next(int(line.split()[1]) for line in f if line.startswith("btime "))
        ticks = int(fields[19])  # field 22 of stat(5); fields[0] is field 3, the state
    except (OSError, ValueError, IndexError, StopIteration):
        return None
    return datetime.fromtimestamp(boot + ticks / os.sysconf("SC_CLK_TCK"), timezone.utc)


def _is_zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rpartition(")")[2].split()[0] == "Z"
    except (OSError, IndexError):
        return False


def process_alive(pid: int, started_before: datetime) -> bool:
    """Whether ``pid`` is a live process of this host that started no later than ``started_before``
    (so that the same pid handed to a newer process, after the run's died, does not count)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # another user's process: it exists
    except (OSError, OverflowError, ValueError):
        return False
    if _is_zombie(pid):
        return False
    started = process_started_at(pid)
    return started is None or started <= started_before + _START_SLACK


def run_state(run: RunLike, *, now: datetime | None = None, host: str | None = None,
              alive: AliveCheck = process_alive, stale_after: timedelta = STALE_AFTER) -> str:
    """"stale" for a run that says "running" but whose process is gone; else its status.

    ``run`` is anything with the run's fields (a ``RunInfo``); ``now`` (default: the
    current UTC time) and ``host`` (default: this machine) are for tests.
    """
    if run.status != "running":
        return run.status
    if run.pid is not None and run.host == (this_host() if host is None else host):
        return "running" if alive(run.pid, run.started_at) else "stale"
    last = run.heartbeat_at or run.started_at
    now = now or datetime.now(timezone.utc)
    return "stale" if now - last > stale_after else "running"
