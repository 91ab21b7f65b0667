"""A third target kind, added by this one module: ``cpu_noomp``, C89-style serial CPU code.

It registers the kind's three parts and touches nothing else:

    schedule   NoOmpKind: the host's CPU facts, and a space whose parallel knobs are fixed to 1
    backends   NoOmpBackend: the CPU backend without OpenMP (no pragmas, no -fopenmp)
    autotune   the CPU kinds' runner (a measuring process) and NumPy anchor

Importing it is the whole registration; ``Task(..., target="cpu_noomp")`` then tunes.
"""
from __future__ import annotations

from dataclasses import replace

import backends
from autotune.anchor import NumpyAnchor
from autotune.targets import AutotuneParts, register_autotune_parts
from backends.cpu import CPUDialect, CpuBackend
from schedule import ir
from schedule.config import Knob
from schedule.space import ConfigSpace
from schedule.targets import TargetKind, register_target_kind
from schedule.targets.cpu import host_cpu_facts

KIND = "cpu_noomp"


class SerialSpace(ConfigSpace):
    """The CPU space with every ``<stage>.parallel`` knob fixed to one loop (run serially)."""

    @staticmethod
    def _knobs_for(plan, name, options) -> list[Knob]:
        knobs = ConfigSpace._knobs_for(plan, name, options)
        return [Knob(k.name, (1,), k.doc) if k.name.endswith(".parallel") else k for k in knobs]


class NoOmpKind(TargetKind):
    name = KIND

    def detect(self):
        return replace(host_cpu_facts(), cores=1)

    def space_class(self) -> type:
        return SerialSpace


class NoOmpDialect(CPUDialect):
    """Plain C loops: a parallel loop runs serially, a vector loop is left to gcc's vectorizer."""

    def loop_pragmas(self, loop):
        if loop.kind in (ir.PARALLEL, ir.VECTORIZED):
            return []
        return super().loop_pragmas(loop)


class NoOmpBackend(CpuBackend):
    dialect = NoOmpDialect()
    openmp = False


def _runner(timeout=10.0, options=None, seed=0):
    from autotune.runner import LocalRunner

    return LocalRunner(timeout=timeout, options=options, seed=seed)


register_target_kind(NoOmpKind())
backends.register_backend(KIND, NoOmpBackend)
register_autotune_parts(AutotuneParts(KIND, _runner, NumpyAnchor(), lambda target: None))
