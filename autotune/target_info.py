"""Describing the machine a measurement was taken on (stored with every record)."""
from __future__ import annotations

import platform


def describe(target: str):
    """The ``tuning_db.TargetInfo`` of ``target`` on this machine."""
    from tuning_db import TargetInfo

    if target == "cpu":
        from backends import cpu

        return TargetInfo("cpu", cpu.cpu_model(), cpu.compiler_version(), " ".join(cpu.CFLAGS), platform.node())
    return TargetInfo(target, "", "", "", platform.node())
