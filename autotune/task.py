"""A tuning task: one workload on one target, with its schedule space.

    task = autotune.Task("matmul", dict(M=1024, N=1024, K=1024), target="cpu")
    task.target         # a schedule.targets.Target ("cpu", "cpu:avx2", "cuda:sm_80", ...)
    task.target_kind    # its kind, the key records are stored under ("cpu")
    task.space          # ConfigSpace derived from the workload's DAG, for the target
    task.lower(config)  # the loop IR of one config
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, field

import te
from schedule import lower
from schedule.config import Config
from schedule.ir import LoweredFunc
from schedule.space import ConfigSpace
from schedule.targets import Target, TargetError, parse_target


class TaskError(ValueError):
    """A task that cannot be created (unknown workload, bad parameters, unknown target)."""


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

    def lower(self, config: Config) -> LoweredFunc:
        """Apply ``config`` to a fresh schedule and lower it."""
        s, args = self.space.apply(config)
        return lower(s, args, name="kernel")

    def __repr__(self):
        return f"Task({self.key} on {self.target})"
