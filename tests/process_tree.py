"""The processes a test started, found by walking /proc (Linux): the descendants of a
process are collected while it runs (once it is killed, they are reparented and the ancestry
is gone), so that a test can check afterwards that each is gone, or kill what is left.

    procs = descendants(proc.pid)     # {pid: (start time, command line)}
    proc_stat(pid)                    # (parent pid, state, start time), None once gone
    alive(pid, start)                 # the same process, still running (a zombie is not)
    kill_all(procs)                   # SIGKILL those that are still the same processes
"""
from __future__ import annotations

import os
import signal
from pathlib import Path


def proc_stat(pid: int) -> tuple[int, str, int] | None:
    """(parent pid, state, start time) of ``pid``; None once it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text.rsplit(")", 1)[1].split()  # the command name in parentheses may hold spaces
    return int(fields[1]), fields[0], int(fields[19])


def cmdline(pid: int) -> str:
    """The command line of ``pid`` ("" once it is gone, and while it exits)."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return ""


def descendants(root: int) -> dict[int, tuple[int, str]]:
    """{pid: (start time, command line)} of the live processes whose ancestry leads to ``root``."""
    children: dict[int, list[tuple[int, int]]] = {}
    for entry in os.listdir("/proc") if os.path.isdir("/proc") else ():
        if entry.isdigit():
            stat = proc_stat(int(entry))
            if stat is not None and stat[1] != "Z":
                children.setdefault(stat[0], []).append((int(entry), stat[2]))
    found, stack = {}, [root]
    while stack:
        for pid, start in children.get(stack.pop(), ()):
            found[pid] = (start, cmdline(pid))
            stack.append(pid)
    return found


def alive(pid: int, start: int) -> bool:
    """Whether the process ``pid`` that started at ``start`` still runs (a zombie does not)."""
    stat = proc_stat(pid)
    return stat is not None and stat[2] == start and stat[1] != "Z"


def kill_all(procs: dict[int, tuple[int, str]]) -> None:
    """Clean-up of a failed test: SIGKILL what it collected and is still the same process."""
    for pid, (start, _) in procs.items():
        if alive(pid, start):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
