"""A tuning task: one workload on one target, with its schedule space.

    task = autotune.Task("matmul", dict(M=1024, N=1024, K=1024), target="cpu")
    task.target         # a schedule.targets.Target ("cpu", "cpu:avx2", "cuda:sm_80", ...)
    task.target_kind    # its kind, the key records are stored under ("cpu")
    task.space          # ConfigSpace derived from the workload's DAG, for the target
    task.lower(config)  # the loop IR of one config
    task.check_fits_memory()   # TaskTooLarge before anything is allocated, if it cannot fit

Sizes are checked before tuning, not when a task is made: a task too large to measure
here can still be lowered, printed and built (``autotune log show``, ``--print-passes``).
Index arithmetic needs no check: the C and CUDA printers switch to 64-bit indices when
a function's indices can pass the int32 range (``backends.c_family``).
"""
from __future__ import annotations

import functools
import os
from dataclasses import dataclass, field

import te
from schedule import lower
from schedule.config import Config
from schedule.ir import LoweredFunc
from schedule.space import ConfigSpace
from schedule.targets import Target, TargetError, parse_target


class TaskError(ValueError):
    """A task that cannot be created (unknown workload, bad parameters, unknown target)."""


class TaskTooLarge(TaskError):
    """A task whose arrays (inputs, outputs, reference, anchor) do not fit in available memory."""


def available_memory(meminfo: str = "/proc/meminfo") -> int | None:
    """Bytes a new allocation can get without swapping: ``MemAvailable`` of ``meminfo`` (Linux),
    else the free physical pages (``sysconf``), else None (unknown: nothing is refused)."""
    try:
        with open(meminfo) as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024  # the figure is in kB
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, AttributeError):
        return None


@dataclass(frozen=True)
class MemoryNeed:
    """Bytes of host memory a tuning run of a task holds, by purpose (estimates)."""

    inputs: int      # the random inputs, in the measuring process
    outputs: int     # the kernel's output buffers, in the measuring process
    reference: int   # the NumPy reference's results and accumulators (te.evaluate.reference_nbytes)
    anchor: int      # the anchor's arrays, in the tuner process after the measuring process ended

    @property
    def total(self) -> int:
        """The peak: the measuring process's arrays, or the anchor's (they never coexist)."""
        return max(self.inputs + self.outputs + self.reference, self.anchor)


def format_bytes(n: int) -> str:
    """``n`` bytes in decimal units, for messages: ``8.4 MB``."""
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if n < 1000 or unit == "TB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    raise AssertionError("unreachable")


@dataclass
class Task:
    """Workload ``workload_name`` with ``params`` on ``target`` (a spec or a ``Target``; any
    registered kind, see ``schedule.targets``). ``target`` is parsed: after construction
    it is always a ``Target``."""

    workload_name: str
    params: dict = field(default_factory=dict)
    target: Target = "cpu"  # type: ignore[assignment]  (a spec is accepted and parsed)

    def __post_init__(self):
        try:
            self.target = parse_target(self.target)
        except TargetError as exc:
            raise TaskError(str(exc)) from None
        try:
            self.workload = te.create_workload(self.workload_name, **self.params)
        except te.TEError as exc:
            raise TaskError(str(exc)) from None
        self.params = dict(self.workload.params)

    @functools.cached_property
    def space(self) -> ConfigSpace:
        return ConfigSpace.from_workload(self.workload, self.target)

    @property
    def target_kind(self) -> str:
        """The target's kind: what the tuning database keys records on."""
        return self.target.kind

    @property
    def key(self) -> str:
        return self.workload.key

    @property
    def flops(self) -> int:
        return self.workload.flops

    def memory_need(self) -> MemoryNeed:
        """The host memory a tuning run of this task needs (see ``MemoryNeed``)."""
        from te.evaluate import reference_nbytes, tensor_nbytes

        from . import targets

        anchor = targets.parts_for(self.target).anchor
        workspace = getattr(anchor, "workspace_bytes", None)  # an anchor may not say: then 0
        return MemoryNeed(inputs=sum(tensor_nbytes(t) for t in self.workload.inputs),
                          outputs=sum(tensor_nbytes(t) for t in self.workload.outputs),
                          reference=reference_nbytes(self.workload.outputs),
                          anchor=workspace(self) if workspace else 0)

    def check_fits_memory(self, available: int | None = None) -> None:
        """Raise ``TaskTooLarge`` when the run's arrays need more than ``available`` bytes
        (default: ``available_memory()``; unknown there: no check). Allocates nothing."""
        if available is None:
            available = available_memory()
        need = self.memory_need()
        if available is None or need.total <= available:
            return
        shape = ", ".join(f"{k}={v}" for k, v in self.params.items() if v is not None)
        parts = [("inputs", need.inputs), ("outputs", need.outputs), ("reference", need.reference),
                 ("anchor", need.anchor)]
        detail = ", ".join(f"{name} {format_bytes(n)}" for name, n in parts if n)
        raise TaskTooLarge(
            f"{self.workload_name}({shape}) is too large to tune here: it needs about "
            f"{format_bytes(need.total)} of memory ({detail}), but only "
            f"{format_bytes(available)} is available; choose smaller sizes"
        )

    def lower(self, config: Config) -> LoweredFunc:
        """Apply ``config`` to a fresh schedule and lower it."""
        s, args = self.space.apply(config)
        return lower(s, args, name="kernel")

    def __repr__(self):
        return f"Task({self.key} on {self.target})"
