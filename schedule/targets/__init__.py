"""Target kinds and their facts: the registry every package reaches targets through.

    from schedule.targets import parse_target, target_kinds, register_target_kind
    parse_target("cpu"), parse_target("cpu:avx512"), parse_target("cuda:h200")

``base`` holds ``Target``, ``TargetKind`` and the registry; ``cpu`` and ``cuda`` register
the two built-in kinds (importing this package registers them). See ``base`` for how a
new kind plugs in.
"""
from .base import (
    KindTable, Target, TargetError, TargetKind, known_targets, parse_target, register_target_kind, target_kind,
    target_kinds,
)
from .cpu import CpuFacts, CpuKind, detect_cpu_facts
from .cuda import CudaFacts, CudaKind

__all__ = [
    "KindTable", "Target", "TargetError", "TargetKind", "parse_target", "register_target_kind", "target_kind",
    "target_kinds", "known_targets", "CpuFacts", "CpuKind", "detect_cpu_facts", "CudaFacts", "CudaKind",
]
