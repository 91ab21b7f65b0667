"""Records that flow through one measurement, and the status vocabulary.

    MeasureInput(task, config) -> Builder -> BuildResult -> Runner -> MeasureResult

Every trial ends in exactly one status:

    ok             built, verified against the reference, timed
    compile_error  the compiler rejected the generated code (or lowering failed)
    runtime_error  the kernel crashed (signal) or raised while running
    wrong_answer   it ran but its outputs differ from the reference
    timeout        building or running took longer than allowed
    invalid        the config breaks a resource limit of the space (never built)

Failures are data: they are stored and scored as infinitely slow, never fatal.
"""
from __future__ import annotations

import math
import statistics
import time
from dataclasses import dataclass, field

from schedule.config import Config

OK = "ok"
COMPILE_ERROR = "compile_error"
RUNTIME_ERROR = "runtime_error"
WRONG_ANSWER = "wrong_answer"
TIMEOUT = "timeout"
INVALID = "invalid"
STATUSES = (OK, COMPILE_ERROR, RUNTIME_ERROR, WRONG_ANSWER, TIMEOUT, INVALID)


@dataclass(frozen=True)
class MeasureInput:
    task: "object"  # autotune.Task
    config: Config


@dataclass
class BuildResult:
    """Outcome of building one config: a shared object to load, or why there is none."""

    status: str
    artifact: str | None = None  # path of the compiled kernel
    source_hash: str | None = None
    error: str | None = None
    build_s: float = 0.0


@dataclass
class MeasureResult:
    """Outcome of one trial. ``costs`` are seconds per run; ``median_s`` is None unless ok.

    With several measuring rounds (``runner.TimingOptions.rounds``), ``costs`` are the
    repeats of the fastest round and ``rounds`` counts the rounds that ran.
    """

    status: str
    costs: list[float] = field(default_factory=list)
    error: str | None = None
    build_s: float = 0.0
    run_s: float = 0.0
    timestamp: float = field(default_factory=time.time)
    rounds: int = 1

    @property
    def ok(self) -> bool:
        return self.status == OK

    @property
    def median_s(self) -> float | None:
        return statistics.median(self.costs) if self.ok and self.costs else None

    @property
    def cost(self) -> float:
        """Median seconds, or +inf for any failure (how search scores it)."""
        m = self.median_s
        return math.inf if m is None else m

    @property
    def spread(self) -> float | None:
        """Relative spread of the repeats: (max - min) / median."""
        m = self.median_s
        if m is None or len(self.costs) < 2:
            return None
        return (max(self.costs) - min(self.costs)) / m

    def gflops(self, flops: int) -> float | None:
        m = self.median_s
        return None if m is None else flops / m / 1e9
