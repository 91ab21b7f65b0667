"""Records that flow through one measurement, the Builder/Runner interfaces, and the statuses.

    MeasureInput(task, config) -> Builder -> BuildResult -> Runner -> MeasureResult

``Builder`` and ``Runner`` are the two interfaces (AutoTVM's measure API); which ones
measure a task is the target's choice (``autotune.targets``): ``builder.LocalBuilder``
builds for any target through its backend, ``runner.LocalRunner`` runs CPU kernels in a
measuring process. Every trial ends in exactly one ``Status`` (``tuning_db.Status``, so
the database stores the same words):

    ok             built, verified against the reference, timed
    compile_error  the compiler rejected the generated code (or lowering failed)
    runtime_error  the kernel crashed (signal) or raised while running
    wrong_answer   it ran but its outputs differ from the reference
    timeout        building or running took longer than allowed
    invalid        the config breaks a resource limit of the space (never built)
    worker_lost    the machine building or measuring it went away, and again on the
                   one retry elsewhere (a cluster, ``autotune.cluster``)

Failures are data: they are stored and scored as infinitely slow, never fatal.
"""
from __future__ import annotations

import math
import statistics
import time
from dataclasses import dataclass, field

from schedule.config import Config
from tuning_db.records import STATUSES, Status

__all__ = ["Status", "STATUSES", "MeasureInput", "BuildResult", "MeasureResult", "Builder", "Runner"]


@dataclass(frozen=True)
class MeasureInput:
    task: "object"  # autotune.Task
    config: Config


@dataclass
class BuildResult:
    """Outcome of building one config: a shared object to load, or why there is none."""

    status: Status
    artifact: str | None = None  # path of the compiled kernel (a shared object, a CUBIN, ...)
    source_hash: str | None = None
    error: str | None = None
    build_s: float = 0.0
    #: The compiled kernel's bytes, or a handle to them (a Ray object reference), for a
    #: runner on another machine than the one that built it; None for local builds.
    blob: object = None

    def __post_init__(self):
        self.status = Status(self.status)


@dataclass
class MeasureResult:
    """Outcome of one trial. ``costs`` are seconds per run; ``median_s`` is None unless ok.

    With several measuring rounds (``runner.TimingOptions.rounds``), ``costs`` are the
    repeats of the fastest round and ``rounds`` counts the rounds that ran.
    """

    status: Status
    costs: list[float] = field(default_factory=list)
    error: str | None = None
    build_s: float = 0.0
    run_s: float = 0.0
    timestamp: float = field(default_factory=time.time)
    rounds: int = 1
    #: The ``tuning_db.TargetInfo`` of the machine that measured it, when a runner measures
    #: on other machines (a cluster); None: this machine, the run's target.
    where: object = None

    def __post_init__(self):
        self.status = Status(self.status)

    @property
    def ok(self) -> bool:
        return self.status is Status.OK

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

    @classmethod
    def from_record(cls, rec) -> "MeasureResult":
        """The result a stored ``tuning_db.MeasureRecord`` holds (for resuming and replaying);
        an ok record stored without its repeats keeps its median as the one cost."""
        status = Status(rec.status)
        costs = list(rec.costs) if rec.costs else ([rec.median_s] if rec.median_s else [])
        return cls(status, costs=costs if status is Status.OK else [], error=rec.error,
                   build_s=rec.build_s, run_s=rec.run_s)


class Builder:
    """Turns measure inputs into compiled kernels: ``build(inputs)`` returns one
    ``BuildResult`` per input, in order. A failure is a result (its status and error),
    never an exception; only a broken environment (no compiler at all) raises."""

    def build(self, inputs: list[MeasureInput]) -> list[BuildResult]:
        raise NotImplementedError


class Runner:
    """Verifies and times built kernels on the device: ``run(task, builds, best_cost)``
    returns one ``MeasureResult`` per build of ``task``'s inputs, in order. A build that
    failed passes its status through; a kernel that crashes, hangs or gives a wrong answer
    is a result with that status. ``best_cost`` (seconds, the best measured before the
    batch, or None) lets a runner stop timing hopeless candidates early.

    Runners hold processes or devices: ``close()`` releases them (also ``with runner:``).
    """

    def run(self, task, builds: list[BuildResult], best_cost: float | None = None) -> list[MeasureResult]:
        raise NotImplementedError

    def time_final(self, task, builds: list[BuildResult], options):
        """The final timing of ``builds`` (all built ok) with the target's anchor, in
        interleaved rounds (``autotune.final_timing``; ``options`` a ``FinalTimingOptions``):
        an ``InterleavedTimes``. A runner that cannot raises NotImplementedError."""
        raise NotImplementedError(f"{type(self).__name__} has no final timing")

    def close(self) -> None:
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
