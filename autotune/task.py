"""A tuning task: one workload on one target, with its schedule space.

    task = autotune.Task("matmul", dict(M=1024, N=1024, K=1024), target="cpu")
    task = autotune.Task.from_tensors([A, B, C], name="my_op")   # any expression, registered nowhere
    task = autotune.Task.from_db(db, key, target="cpu")          # any workload the database stored
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
from schedule import lower, passes
from schedule.config import Config
from schedule.ir import LoweredFunc
from schedule.space import ConfigSpace
from schedule.targets import Target, TargetError, parse_target


#: The CPU pipeline without its last pass, the IR check (``Task.lower(verify=False)``).
UNVERIFIED_PIPELINE = tuple(p for p in passes.pipeline("cpu") if p is not passes.verify_pass)


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
    it is always a ``Target``.

    ``workload``, when given, is the task's ``te.Workload`` as it is (its name and params
    replace the first two fields); otherwise the registered workload of that name is made.
    Either way the workload travels to other processes as its JSON (``te.serialize``).
    """

    workload_name: str
    params: dict = field(default_factory=dict)
    target: Target = "cpu"  # type: ignore[assignment]  (a spec is accepted and parsed)
    workload: te.Workload | None = field(default=None, repr=False, compare=False)

    def __post_init__(self):
        try:
            self.target = parse_target(self.target)
        except TargetError as exc:
            raise TaskError(str(exc)) from None
        if self.workload is None:
            try:
                self.workload = te.create_workload(self.workload_name, **self.params)
            except te.TEError as exc:
                raise TaskError(str(exc)) from None
        self.workload_name = self.workload.name
        self.params = dict(self.workload.params)

    @classmethod
    def from_workload(cls, workload: te.Workload, target: Target | str = "cpu") -> "Task":
        """The task of an existing ``te.Workload`` (registered or from tensors)."""
        return cls(workload.name, dict(workload.params), target, workload=workload)

    @classmethod
    def from_tensors(cls, tensors, name: str, target: Target | str = "cpu") -> "Task":
        """The task of ``tensors`` (placeholders first, then outputs: the kernel's argument
        order) named ``name``, registered nowhere. Its key is the name plus the DAG's hash,
        so the same tensors built again (in another process) find the same records."""
        try:
            workload = te.Workload.from_tensors(tensors, name)
        except te.TEError as exc:
            raise TaskError(str(exc)) from None
        return cls.from_workload(workload, target)

    @classmethod
    def from_json(cls, dag_json: str, target: Target | str = "cpu") -> "Task":
        """The task of a workload's JSON (``Workload.dag_json``): how other processes get it."""
        try:
            workload = te.workload_from_json(dag_json)
        except te.TEError as exc:
            raise TaskError(str(exc)) from None
        return cls.from_workload(workload, target)

    @classmethod
    def from_db(cls, db, key: str, target: Target | str = "cpu") -> "Task":
        """The task of workload ``key`` rebuilt from the DAG ``db`` stored for it, whether or not
        its op is registered in this process (``TaskError`` if the database has no DAG for it:
        a workload stored before DAGs were, or never tuned there)."""
        dag_json = db.workload_dag(key)
        if dag_json is None:
            raise TaskError(f"{db.location}: no stored DAG for workload {key}; it was tuned before "
                            f"workloads were stored with their DAG, or not in this database")
        task = cls.from_json(dag_json, target)
        if task.key != key:
            raise TaskError(f"{db.location}: the DAG stored for {key} rebuilds as {task.key}")
        return task

    @classmethod
    def of_record(cls, record, db=None, target: Target | str | None = None) -> "Task":
        """The task a stored record was measured for (on ``target``, default the record's kind):
        the registered workload of its name and params when this process has it and it gives
        the record's key, else the DAG ``db`` stored for the key (a workload made from tensors,
        or registered only in the script that tuned it). ``TaskError`` when neither can."""
        target = record.target.kind if target is None else target
        try:
            task = cls(record.workload_name, dict(record.params), target)
            if task.key == record.workload_key:
                return task
        except TaskError:
            pass
        if db is None:
            raise TaskError(f"workload {record.workload_key} is not registered here and no database "
                            f"was given to rebuild it from")
        return cls.from_db(db, record.workload_key, target)

    @property
    def dag_json(self) -> str:
        """The workload's canonical JSON: what crosses a process boundary for this task."""
        return self.workload.dag_json

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

    def lower(self, config: Config, candidates: bool = True, verify: bool = True) -> LoweredFunc:
        """Apply ``config`` to a fresh schedule and lower it (``candidates``: see ``ConfigSpace.apply``).

        ``verify=False`` leaves out the last pass, the IR's invariant check (a tenth of the
        lowering): for a search's features of thousands of candidates, where the build of
        each measured one lowers it again with the check."""
        s, args = self.space.apply(config, candidates)
        return lower(s, args, name="kernel", pipeline="cpu" if verify else UNVERIFIED_PIPELINE)

    def __repr__(self):
        return f"Task({self.key} on {self.target})"
