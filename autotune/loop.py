"""The tuning loop as an object: propose, build, run, record, learn; batch after batch.

    loop = TuningLoop(task, tuner, builder, runner, trials=1000, callbacks=[...])
    result = loop.run()                       # a TuneResult

    on_start(loop)                    each callback, in order (replay stored records,
                                      warm-start the model, open a database run, ...)
    while trials are left and tuner.has_next():
        configs  = loop.propose()             tuner.next_batch
        builds   = loop.build(configs)        builder.build           -> timings build_s
        measured = loop.measure(builds)       runner.run              -> timings run_s
        trials   = loop.record(configs, measured)
                                      the history grows; on_batch(loop, trials) for
                                      each callback (the database first, so a killed
                                      run loses at most the batch in flight)
        loop.learn(configs, measured)         tuner.update (the model retrains)
        stop after ``early_stopping`` trials without a new best
    on_finish(loop)                   each callback, also after an error or Ctrl-C;
                                      ``loop.status`` is "finished" or "interrupted"

The loop knows tuners, builders and runners only through their contracts
(``tuners.base.Tuner``, ``build(inputs)``, ``run(task, builds, best_cost=)``); the
database, the progress display and transfer learning attach as callbacks
(``autotune.tuning`` makes them).
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Callable, Sequence

from schedule.config import Config

from .measure import MeasureInput, MeasureResult
from .task import Task
from .tuners.base import Tuner


@dataclass
class Trial:
    """One measured config: its index in the run's history, the config and the result."""

    index: int
    config: Config
    result: MeasureResult


@dataclass
class Progress:
    """What progress callbacks see after each batch."""

    task: Task
    trials_done: int
    trials_total: int
    best_gflops: float | None
    errors: int
    batch: list[Trial]

    @property
    def best_cost(self) -> float | None:
        """Seconds of the best trial so far (None before one succeeds)."""
        return None if self.best_gflops is None else self.task.flops / self.best_gflops / 1e9


@dataclass
class TuneResult:
    """The history of a tuning run (replayed records first), its timings and the best trial.

    ``timings`` (seconds): ``build_s``, ``run_s``, ``db_s``, ``model_s``, ``search_s``
    (the tuner's search plus lowering and feature extraction), ``total_s``, and with a
    final timing ``final_s``.

    ``final``: the run's final timing (``autotune.final_timing.FinalFigures``), or None. With
    one, the best trial is the final winner's and ``best_cost``/``best_gflops`` are its final
    figure; ``search_best`` is the fastest reading of the search, whichever config it was.
    """

    task: Task
    history: list[Trial] = field(default_factory=list)
    timings: dict = field(default_factory=dict)
    run_id: int | None = None
    transfer_records: int = 0  # records of other workloads the cost model was warm-started from
    resumed_from: int | None = None  # resume: the newest earlier run of the task, which this one continues
    final: object = None  # autotune.final_timing.FinalFigures
    final_note: str | None = None  # why a final timing that was asked for did not happen

    @property
    def search_best(self) -> Trial | None:
        ok = [t for t in self.history if t.result.ok]
        return min(ok, key=lambda t: t.result.cost) if ok else None

    @property
    def best(self) -> Trial | None:
        winner = self._final_winner()
        if winner is None:
            return self.search_best
        config = self.final.configs[winner]
        trials = [t for t in self.history if t.result.ok and t.config.hash == config.hash]
        return min(trials, key=lambda t: t.result.cost) if trials else self.search_best

    @property
    def best_config(self) -> Config | None:
        return self.best.config if self.best else None

    @property
    def best_cost(self) -> float:
        winner = self._final_winner()
        if winner is not None:
            return self.final.costs[winner]
        return self.best.result.cost if self.best else math.inf

    def _final_winner(self) -> int | None:
        return self.final.winner if self.final is not None else None

    @property
    def best_gflops(self) -> float | None:
        return self.task.flops / self.best_cost / 1e9 if self.best else None

    def best_so_far(self) -> list[float | None]:
        """Best GFLOP/s after each trial (None until something succeeded)."""
        out, best = [], None
        for t in self.history:
            g = t.result.gflops(self.task.flops)
            if g is not None and (best is None or g > best):
                best = g
            out.append(best)
        return out


class TuningCallback:
    """Something that takes part in a tuning run; override what you need (each default does nothing).

    ``on_start(loop)``          before the first batch: may add to ``loop.result``
                                (replayed trials, ``run_id``) and prepare ``loop.tuner``
    ``on_batch(loop, trials)``  after each batch is measured and in the history,
                                before the tuner learns from it
    ``on_finish(loop)``         once at the end, also after an error (``loop.status``)
    """

    def on_start(self, loop: "TuningLoop") -> None:
        pass

    def on_batch(self, loop: "TuningLoop", trials: list[Trial]) -> None:
        pass

    def on_finish(self, loop: "TuningLoop") -> None:
        pass


class ProgressCallback(TuningCallback):
    """Hands a ``Progress`` to ``fn`` after every batch (the command line's progress bar is one)."""

    def __init__(self, fn: Callable[[Progress], None]):
        self.fn = fn

    def on_batch(self, loop: "TuningLoop", trials: list[Trial]) -> None:
        history = loop.result.history
        self.fn(Progress(loop.task, len(history), loop.trials, loop.result.best_gflops,
                         sum(not t.result.ok for t in history), list(trials)))


class TuningLoop:
    """Measures up to ``trials`` configs of ``task`` that ``tuner`` proposes (see the module docstring).

    ``features`` (optional) is the feature cache the tuner and callbacks read: its
    lowering and extraction time counts as search time. The loop closes nothing: who
    made the runner and the cache closes them.
    """

    def __init__(self, task: Task, tuner: Tuner, builder, runner, *, trials: int, batch_size: int = 64,
                 early_stopping: int | None = None, callbacks: Sequence[TuningCallback] = (), features=None):
        if not isinstance(trials, int) or trials <= 0:
            raise ValueError(f"trials must be a positive int, got {trials!r}")
        self.task = task
        self.tuner = tuner
        self.builder = builder
        self.runner = runner
        self.trials = trials
        self.batch_size = batch_size
        self.early_stopping = early_stopping
        self.callbacks = list(callbacks)
        self.features = features
        self.result = TuneResult(task)
        self.timings = self.result.timings
        self.status = "interrupted"  # until the loop ends normally
        self.best_cost = math.inf
        self.since_best = 0  # trials since the best cost last improved

    def run(self) -> TuneResult:
        """Tune until the budget, the space or the patience runs out; the result."""
        t_start = time.perf_counter()
        self.timings.update(build_s=0.0, run_s=0.0, db_s=0.0)
        self.status = "interrupted"
        try:
            for cb in self.callbacks:
                cb.on_start(self)
            self.best_cost = self.result.best_cost  # replayed trials count
            while self.trials_left() and self.tuner.has_next():
                configs = self.propose()
                if not configs:
                    break
                measured = self.measure(self.build(configs))
                self.record(configs, measured)
                self.learn(configs, measured)
                if self.early_stopping is not None and self.since_best >= self.early_stopping:
                    break
            self.status = "finished"
        finally:
            for cb in self.callbacks:
                cb.on_finish(self)
            self._sum_up(t_start)
        return self.result

    # ------------------------------------------------------------ the steps

    def trials_left(self) -> int:
        return self.trials - len(self.result.history)

    def propose(self) -> list[Config]:
        """The tuner's next batch, as long as the tuner likes (at most what the budget leaves)."""
        return self.tuner.next_batch(min(self.tuner.batch_size(self.batch_size), self.trials_left()))

    def build(self, configs: list[Config]) -> list:
        """Compile the batch (the builder works in parallel)."""
        t0 = time.perf_counter()
        builds = self.builder.build([MeasureInput(self.task, c) for c in configs])
        self.timings["build_s"] += time.perf_counter() - t0
        return builds

    def measure(self, builds: list) -> list[MeasureResult]:
        """Verify and time the builds on the device; the best cost so far lets the runner cut hopeless ones short."""
        t0 = time.perf_counter()
        measured = self.runner.run(self.task, builds,
                                   best_cost=None if math.isinf(self.best_cost) else self.best_cost)
        self.timings["run_s"] += time.perf_counter() - t0
        return measured

    def record(self, configs: list[Config], measured: list[MeasureResult]) -> list[Trial]:
        """Append the batch to the history and hand it to every callback."""
        history = self.result.history
        trials = [Trial(len(history) + n, c, r) for n, (c, r) in enumerate(zip(configs, measured))]
        history.extend(trials)
        for t in trials:
            if t.result.cost < self.best_cost:
                self.best_cost, self.since_best = t.result.cost, 0
            else:
                self.since_best += 1
        for cb in self.callbacks:
            cb.on_batch(self, trials)
        return trials

    def learn(self, configs: list[Config], measured: list[MeasureResult]) -> None:
        """The tuner (and its cost model) learns from the batch."""
        self.tuner.update(configs, measured)

    def _sum_up(self, t_start: float) -> None:
        spent = self.tuner.timings()
        self.timings["model_s"] = spent.get("model_s", 0.0)
        self.timings["search_s"] = spent.get("search_s", 0.0) + (self.features.seconds if self.features else 0.0)
        self.timings["total_s"] = time.perf_counter() - t_start
