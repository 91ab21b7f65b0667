"""Code generation from the loop IR, and running the result.

    f = backends.build(s, [A, B, C], target="cpu")
    f(a, b, c)          # NumPy arrays
    print(f.source)     # the generated C
"""
from __future__ import annotations

from schedule import lower
from schedule.stage import Schedule

from .cpu import BuildError, CPUModule

TARGETS = ("cpu", "cuda")


def build(s: Schedule, args, target: str = "cpu", name: str = "kernel"):
    """Lower schedule ``s`` for ``args`` and compile it for ``target``."""
    if target not in TARGETS:
        raise ValueError(f"unknown target {target!r}; use one of {', '.join(TARGETS)}")
    func = lower(s, args, name=name)
    if target == "cpu":
        from . import cpu

        return cpu.build(func)
    from . import cuda

    return cuda.build(func)
