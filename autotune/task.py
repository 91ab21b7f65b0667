"""A tuning task: one workload on one target, with its schedule space.

    task = autotune.Task("matmul", dict(M=1024, N=1024, K=1024), target="cpu")
    task.space          # ConfigSpace derived from the workload's DAG
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

TARGETS = ("cpu", "cuda")


class TaskError(ValueError):
    """A task that cannot be created (unknown workload, bad parameters, unknown target)."""


@dataclass
class Task:
    """Workload ``workload_name`` with ``params`` on ``target`` ("cpu" or "cuda")."""

    workload_name: str
    params: dict = field(default_factory=dict)
    target: str = "cpu"

    def __post_init__(self):
        if self.target not in TARGETS:
            raise TaskError(f"unknown target {self.target!r}; use one of {', '.join(TARGETS)}")
        try:
            self.workload = te.create_workload(self.workload_name, **self.params)
        except te.TEError as exc:
            raise TaskError(str(exc)) from None
        self.params = dict(self.workload.params)

    @functools.cached_property
    def space(self) -> ConfigSpace:
        return ConfigSpace.from_workload(self.workload, self.target)

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
