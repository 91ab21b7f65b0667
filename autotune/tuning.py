"""The tuning loop: propose, build, run, record, learn; batch after batch.

    result = autotune.tune(task, trials=1000, tuner="xgb", db=db, seed=0)
    result.best_config, result.best_gflops, result.history, result.timings

Each batch: the tuner proposes configs -> the builder compiles them in parallel ->
the runner verifies and times them one by one in its own process -> the batch is
written to the database in one transaction -> the tuner (and its cost model) learns
from it. A killed run loses at most the batch in flight; ``resume=True`` reloads
what the database holds for this task and target and measures only the rest.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from schedule.config import Config

from . import target_info
from .builder import LocalBuilder
from .features import FeatureCache
from .measure import OK, MeasureInput, MeasureResult
from .runner import LocalRunner, TimingOptions
from .task import Task
from .tuners import make_tuner

TOOL_VERSION = "0.1.0"


@dataclass
class Trial:
    index: int
    config: Config
    result: MeasureResult


@dataclass
class Progress:
    """What callbacks see after each batch."""

    task: Task
    trials_done: int
    trials_total: int
    best_gflops: float | None
    errors: int
    batch: list[Trial]


@dataclass
class TuneResult:
    task: Task
    history: list[Trial] = field(default_factory=list)
    timings: dict = field(default_factory=dict)
    run_id: int | None = None
    transfer_records: int = 0  # records of other workloads the cost model was warm-started from

    @property
    def best(self) -> Trial | None:
        ok = [t for t in self.history if t.result.ok]
        return min(ok, key=lambda t: t.result.cost) if ok else None

    @property
    def best_config(self) -> Config | None:
        return self.best.config if self.best else None

    @property
    def best_cost(self) -> float:
        return self.best.result.cost if self.best else math.inf

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


def tune(
    task: Task,
    trials: int = 1000,
    tuner: str = "xgb",
    db=None,
    seed: int = 0,
    callbacks: list[Callable[[Progress], None]] | tuple = (),
    batch_size: int = 64,
    early_stopping: int | None = None,
    timeout: float = 10.0,
    resume: bool = False,
    builder: LocalBuilder | None = None,
    runner: LocalRunner | None = None,
    transfer: bool = False,
    transfer_limit: int = 1000,
    timing: TimingOptions | None = None,
) -> TuneResult:
    """Tune ``task`` for ``trials`` measurements and return the history and the best config.

    ``transfer=True`` (xgb tuner, with a ``db``) warm-starts the cost model from the
    newest ``transfer_limit`` records of other shapes of the same operator on this
    target (AutoTVM's transfer learning): the features come from the lowered IR, so
    the model's notion of a fast loop nest carries over, and the first batch already
    follows it instead of being random.

    ``timing`` sets the measuring protocol of the runner ``tune`` makes (ignored when a
    ``runner`` is passed): ``TimingOptions(rounds=1)`` measures each candidate once,
    faster on a quiet machine; the default keeps the fastest of three rounds.
    """
    if not isinstance(trials, int) or trials <= 0:
        raise ValueError(f"trials must be a positive int, got {trials!r}")
    t_start = time.perf_counter()
    builder = builder or LocalBuilder(timeout=max(60.0, timeout))
    features = FeatureCache(workers=builder.n_workers)
    search = make_tuner(tuner, task.space, seed=seed, feature_fn=lambda c: features.get(task, c),
                        features_many=lambda cs: features.get_many(task, cs))
    own_runner = runner is None
    runner = runner or LocalRunner(timeout=timeout, options=timing, seed=seed)
    result = TuneResult(task)
    timings = dict(build_s=0.0, run_s=0.0, db_s=0.0)
    target = target_info.describe(task.target)
    if transfer and db is not None and hasattr(search, "warm_start"):
        result.transfer_records = _warm_start_from_similar(db, task, target, search, features, transfer_limit)
    if resume and db is not None:
        _replay_stored(db, task, target, search, result)
    run_id = None
    if db is not None:
        run_id = db.start_run(task.key, task.workload_name, task.params, target, tuner, seed, trials, TOOL_VERSION)
    result.run_id = run_id
    status = "interrupted"
    try:
        since_best, best = 0, result.best_cost
        while len(result.history) < trials and search.has_next():
            configs = search.next_batch(min(search.batch_size(batch_size), trials - len(result.history)))
            if not configs:
                break
            t0 = time.perf_counter()
            builds = builder.build([MeasureInput(task, c) for c in configs])
            t1 = time.perf_counter()
            measured = runner.run(task, builds, best_cost=None if math.isinf(best) else best)
            t2 = time.perf_counter()
            timings["build_s"] += t1 - t0
            timings["run_s"] += t2 - t1
            batch = [Trial(len(result.history) + n, c, r) for n, (c, r) in enumerate(zip(configs, measured))]
            result.history.extend(batch)
            if db is not None:
                t3 = time.perf_counter()
                db.add_records(run_id, [_record(task, target, t) for t in batch])
                timings["db_s"] += time.perf_counter() - t3
            search.update(configs, measured)
            for t in batch:
                if t.result.cost < best:
                    best, since_best = t.result.cost, 0
                else:
                    since_best += 1
            progress = Progress(task, len(result.history), trials, result.best_gflops,
                                sum(not t.result.ok for t in result.history), batch)
            for cb in callbacks:
                cb(progress)
            if early_stopping is not None and since_best >= early_stopping:
                break
        status = "finished"
    finally:
        if db is not None and run_id is not None:
            db.finish_run(run_id, status)
        if own_runner:
            runner.close()
        features.close()
        timings["model_s"] = getattr(search, "model_s", 0.0)
        timings["search_s"] = getattr(search, "search_s", 0.0) + features.seconds
        timings["total_s"] = time.perf_counter() - t_start
        result.timings = timings
    return result


def _record(task: Task, target, trial: Trial):
    from tuning_db import MeasureRecord

    r = trial.result
    return MeasureRecord(
        workload_key=task.key, workload_name=task.workload_name, params=task.params, target=target,
        config=trial.config.to_dict(), config_hash=trial.config.hash, status=r.status, costs=list(r.costs),
        median_s=r.median_s, spread=r.spread, gflops=r.gflops(task.flops), build_s=r.build_s, run_s=r.run_s,
        error=r.error, trial=trial.index, tool_version=TOOL_VERSION,
    )


def _warm_start_from_similar(db, task: Task, target, search, features: FeatureCache, limit: int) -> int:
    """Warm-start ``search``'s model from records of other workloads of ``task``'s op.

    One query group per workload (the model only learns orders within a workload).
    Records whose workload cannot be rebuilt here (a user workload not registered in
    this process) or whose config does not fit the current space are skipped.
    Returns how many records were used.
    """
    by_key: dict[str, tuple[Task, list]] = {}
    for rec in db.records_similar(task.workload_name, target, exclude_key=task.key, limit=limit):
        if rec.workload_key not in by_key:
            try:
                other = Task(rec.workload_name, dict(rec.params), task.target)
            except ValueError:
                other = None
            by_key[rec.workload_key] = (other, [])
        other, items = by_key[rec.workload_key]
        if other is None:
            continue
        try:
            config = Config.from_json(rec.config)
            if other.space.check(config) is not None:
                continue
        except ValueError:
            continue
        items.append((config, rec.median_s if rec.status == OK and rec.median_s else math.inf))
    xs, costs, groups = [], [], []
    for key, (other, items) in by_key.items():
        if other is None or not items:
            continue
        xs.append(features.get_many(other, [c for c, _ in items]))
        costs += [cost for _, cost in items]
        groups += [key] * len(items)
    if not costs:
        return 0
    search.warm_start(np.concatenate(xs), costs, groups)
    return len(costs)


def _replay_stored(db, task: Task, target, search, result: TuneResult) -> None:
    """Feed what the database holds for this task to the tuner and the history."""
    configs, measured = [], []
    for rec in db.records_for_task(task.key, target):
        try:
            config = Config.from_json(rec.config)
            task.space.knobs.check(config)
        except ValueError:
            continue  # a record from another version of the space
        res = MeasureResult(rec.status, costs=list(rec.costs) if rec.status == OK else [], error=rec.error,
                            build_s=rec.build_s, run_s=rec.run_s)
        configs.append(config)
        measured.append(res)
        result.history.append(Trial(len(result.history), config, res))
    if configs:
        search.update(configs, measured)
