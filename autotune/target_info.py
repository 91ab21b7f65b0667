"""Describing the machine a measurement was taken on (stored with every record)."""
from __future__ import annotations

import functools
import platform


@functools.lru_cache(maxsize=None)
def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def describe(target: str):
    """The ``tuning_db.TargetInfo`` of ``target`` on this machine."""
    from tuning_db import TargetInfo

    if target == "cpu":
        from backends import cpu

        return TargetInfo("cpu", cpu_model(), cpu.compiler_version(), " ".join(cpu.CFLAGS), platform.node())
    return TargetInfo(target, "", "", "", platform.node())
