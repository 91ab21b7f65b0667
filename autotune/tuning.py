"""``tune()``: one tuning run of a task, with the database and the progress display attached.

    result = autotune.tune(task, trials=1000, tuner="xgb", db=db, seed=0)
    result.best_config, result.best_gflops, result.history, result.timings

``tune`` assembles a ``loop.TuningLoop`` (propose -> build -> run -> record -> learn,
batch after batch) and the callbacks that join it to storage:

    TransferWarmStart  transfer=True: the cost model learns from other shapes first
    ReplayStored       resume=True: runs of the task whose process is gone are closed as
                       interrupted; what the database holds for this task and target
                       joins the history and the tuner, so only the rest is measured
    DatabaseRecorder   a run row (this process's pid and host; a resumed run also the run
                       it continues and the best stored before it; the workload's DAG, stored
                       once per workload), then every batch in one
                       transaction as it arrives, which renews the run's heartbeat
    ShareMeasured      share=True: configs other runs measured on the same device (before,
                       or meanwhile in other processes) go to the tuner instead of being
                       measured again
    ProgressCallback   each of ``callbacks`` gets a ``Progress`` after every batch

A killed run loses at most the batch in flight.
"""
from __future__ import annotations

import math
import time
from typing import Callable

import numpy as np

from schedule.config import Config
from tuning_db.records import default_tool_version

from . import targets
from .builder import LocalBuilder
from .features import FeatureCache
from .final_timing import FinalTimingOptions, final_timing, pick_candidates, store_final
from .loop import Progress, ProgressCallback, Trial, TuneResult, TuningCallback, TuningLoop
from .measure import Builder, MeasureResult, Runner, Status
from .runner import TimingOptions
from .task import Task
from .tuners import Tuner, make_tuner

#: The version stamped on every run and record this process writes.
TOOL_VERSION = default_tool_version()

__all__ = ["DatabaseRecorder", "Progress", "ReplayStored", "ShareMeasured", "TOOL_VERSION", "TransferWarmStart",
           "Trial", "TuneResult", "default_measurers", "tune"]


def default_measurers(task: Task, *, timeout: float = 10.0, timing: TimingOptions | None = None, seed: int = 0):
    """The (builder, runner) a run uses when the caller passes none: a local build pool (the
    target's compiler) and the runner the target's kind registered (``autotune.targets``)."""
    runner = targets.make_runner(task.target, timeout=timeout, options=timing, seed=seed)
    return LocalBuilder(timeout=max(60.0, timeout)), runner


def tune(
    task: Task,
    trials: int = 1000,
    tuner: str = "xgb",
    db=None,
    seed: int = 0,
    callbacks: list[Callable[[Progress], None] | TuningCallback] | tuple = (),
    batch_size: int = 64,
    early_stopping: int | None = None,
    timeout: float = 10.0,
    resume: bool = False,
    builder: Builder | None = None,
    runner: Runner | None = None,
    transfer: bool = False,
    transfer_limit: int = 1000,
    timing: TimingOptions | None = None,
    executor=None,
    share: bool = True,
    final: FinalTimingOptions | None = None,
    simulate: bool = False,
) -> TuneResult:
    """Tune ``task`` for ``trials`` measurements and return the history and the best config.

    ``callbacks`` are functions of a ``Progress`` (called after every batch) or
    ``TuningCallback`` objects (which see the whole loop).

    ``transfer=True`` (xgb tuner, with a ``db``) warm-starts the cost model from the
    newest ``transfer_limit`` records of other shapes of the same operator on this
    target (AutoTVM's transfer learning): the features come from the lowered IR, so
    the model's notion of a fast loop nest carries over, and the first batch already
    follows it instead of being random.

    ``timing`` sets the measuring protocol of the runner ``tune`` makes (ignored when a
    ``runner`` is passed): the default measures each candidate in one round;
    ``TimingOptions(rounds=3)`` keeps the fastest of three, for a machine whose neighbours
    are loud (``autotune.runner``).

    Without a ``runner``, a task whose arrays cannot fit in the available memory is
    refused with ``TaskTooLarge`` before anything is allocated (``Task.check_fits_memory``).

    ``share`` (with a ``db``): configs other runs measured on the same device (earlier,
    or by other processes during this run) are not measured again; the tuner learns
    from them instead (``ShareMeasured``). ``share=False`` measures from scratch.

    ``executor`` (e.g. ``autotune.cluster.RayExecutor``) builds and measures elsewhere:
    its ``measurers`` replace the local builder and runner, and its ``describe`` is the
    target stored with the run (each record keeps the host that measured it). The
    caller closes it; one executor serves many runs.

    ``final`` (a ``FinalTimingOptions``; the command line's default) times the run's fastest
    configs again at the end, interleaved with the anchor (``autotune.final_timing``): the
    winner and its figure become ``result.best`` and ``result.best_gflops``, and with a
    ``db`` they are stored as a run of tuner "final", which ``apply_best`` prefers. A runner
    without a final timing (a cluster's, for now) leaves the search's best, saying why in
    ``result.final_note``.

    ``simulate=True`` tunes a ``cuda`` task where there is no GPU: on its simulated kind
    (``cuda_sim``, ``backends.cuda_sim``), every candidate compiled by NVRTC and checked on
    the CPU emulator, its time an analytic model's; the records are stored as simulated,
    apart from real ones (``result.task`` is the simulated task).
    """
    if not isinstance(trials, int) or trials <= 0:
        raise ValueError(f"trials must be a positive int, got {trials!r}")
    if simulate:
        task = Task.from_workload(task.workload, targets.simulated_counterpart(task.target))
    t_start = time.perf_counter()
    own_runner = runner is None
    if executor is not None:
        if builder is not None or runner is not None:
            raise ValueError("pass an executor, or a builder and a runner, not both")
        builder, runner = executor.measurers(task, timeout=timeout, timing=timing, seed=seed)
    elif own_runner:
        task.check_fits_memory()  # TaskTooLarge now, rather than a failure inside the measuring process
    if builder is None or runner is None:
        default_builder, default_runner = default_measurers(task, timeout=timeout, timing=timing, seed=seed)
        builder, runner = builder or default_builder, runner or default_runner
    features = FeatureCache(workers=builder.n_workers)
    search = make_tuner(tuner, task.space, seed=seed, feature_fn=lambda c: features.get(task, c),
                        features_many=lambda cs: features.get_many(task, cs))
    target = targets.describe(task.target) if executor is None else executor.describe(task.target)
    steps: list[TuningCallback] = []
    if db is not None:
        if transfer:
            steps.append(TransferWarmStart(db, target, features, transfer_limit))
        replayed = ReplayStored(db, target) if resume else None
        if replayed is not None:
            steps.append(replayed)
        steps.append(DatabaseRecorder(db, target, tuner, seed))
        if share:
            steps.append(ShareMeasured(db, target, replayed=replayed))
    steps += [cb if isinstance(cb, TuningCallback) else ProgressCallback(cb) for cb in callbacks]
    loop = TuningLoop(task, search, builder, runner, trials=trials, batch_size=batch_size,
                      early_stopping=early_stopping, callbacks=steps, features=features)
    try:
        loop.run()
        if final is not None and final.candidates and loop.status == "finished":
            _run_final_timing(loop.result, builder, runner, final, db, target)
    finally:
        if own_runner:
            runner.close()
        features.close()
        loop.result.timings["total_s"] = time.perf_counter() - t_start
    return loop.result


def _run_final_timing(result: TuneResult, builder, runner, options: FinalTimingOptions, db, target) -> None:
    """The final timing of ``result``'s fastest configs (``autotune.final_timing``), stored
    with ``db``; a runner that cannot, or a failure, leaves the search's best and the reason."""
    candidates = pick_candidates(result.history, options.pool_size)
    if not candidates:
        return
    t0 = time.perf_counter()
    try:
        figures = final_timing(result.task, builder, runner, candidates, options)
    except (NotImplementedError, RuntimeError) as exc:
        result.final_note = f"no final timing: {exc}"
        return
    finally:
        result.timings["final_s"] = time.perf_counter() - t0
    result.final = figures
    if figures.winner is None:
        result.final_note = "no final timing: every candidate failed in it (" + "; ".join(figures.errors.values()) + ")"
        return
    if db is not None:
        t1 = time.perf_counter()
        store_final(db, result.task, target, figures, TOOL_VERSION)
        result.timings["db_s"] = result.timings.get("db_s", 0.0) + time.perf_counter() - t1


# ---------------------------------------------------------------- the database's callbacks


class DatabaseRecorder(TuningCallback):
    """Opens a run in ``db``, writes every batch as it arrives (timed as ``db_s``), closes the run."""

    def __init__(self, db, target, tuner_name: str, seed: int):
        self.db, self.target, self.tuner_name, self.seed = db, target, tuner_name, seed
        self.run_id: int | None = None

    def on_start(self, loop: TuningLoop) -> None:
        task, result = loop.task, loop.result
        self.run_id = self.db.start_run(task.key, task.workload_name, task.params, self.target, self.tuner_name,
                                        self.seed, loop.trials, TOOL_VERSION, resumed_from=result.resumed_from,
                                        baseline_gflops=None if targets.is_simulated(task.target)
                                        else result.best_gflops,  # replayed trials' best
                                        dag_json=task.dag_json, dag_hash=task.workload.dag_hash)
        result.run_id = self.run_id

    def on_batch(self, loop: TuningLoop, trials: list[Trial]) -> None:
        t0 = time.perf_counter()
        self.db.add_records(self.run_id, [record_of(loop.task, self.target, t) for t in trials])
        loop.timings["db_s"] += time.perf_counter() - t0

    def on_finish(self, loop: TuningLoop) -> None:
        if self.run_id is not None:
            self.db.finish_run(self.run_id, loop.status)


class ReplayStored(TuningCallback):
    """``resume``: the task's stale runs (killed while "running") are closed as interrupted, and
    its stored records join the history and the tuner before the first batch.

    ``taken_over`` lists the ids of the runs closed; ``loop.result.resumed_from`` becomes
    the task's newest earlier run. Live runs of the task (another process tuning it now)
    are left alone; what they stored so far is replayed all the same.
    """

    def __init__(self, db, target):
        self.db, self.target = db, target
        self.taken_over: list[int] = []
        self.last_id: int | None = None  # the newest record replayed

    def on_start(self, loop: TuningLoop) -> None:
        task = loop.task
        self.taken_over = self.db.take_over_stale_runs(task.key, self.target)
        earlier = self.db.list_runs(task.key, self.target)
        loop.result.resumed_from = earlier[-1].id if earlier else None
        records = self.db.records_for_task(task.key, self.target)
        self.last_id = records[-1].id if records else None
        configs, measured = _usable_records(task, records)
        for config, result in zip(configs, measured):
            loop.result.history.append(Trial(len(loop.result.history), config, result))
        if configs:
            loop.tuner.update(configs, measured)


class ShareMeasured(TuningCallback):
    """What the database holds for the task on the same device, measured by other runs,
    is known to the tuner (never proposed again, learnt from by the model) without being
    measured or counted as this run's trials: first what was stored before the run, then
    after every batch what other processes tuning the task at the same time stored.

    "The same device": the run's kind, device, compiler and flags
    (``TargetInfo.same_device``; the host may differ, as on a cluster). With ``resume``
    the stored records are already in the history (``replayed``, the ``ReplayStored``
    that put them there): only those stored after them are added.
    """

    def __init__(self, db, target, replayed: "ReplayStored | None" = None):
        self.db, self.target, self.replayed = db, target, replayed
        self.last_id: int | None = None

    def on_start(self, loop: TuningLoop) -> None:
        if self.replayed is not None:
            self.last_id = self.replayed.last_id
        else:
            self._share(loop)

    def on_batch(self, loop: TuningLoop, trials: list[Trial]) -> None:
        self._share(loop)

    def _share(self, loop: TuningLoop) -> None:
        records = self.db.records_for_task(loop.task.key, self.target, after_id=self.last_id)
        if records:
            self.last_id = records[-1].id
        others = [rec for rec in records
                  if rec.run_id != loop.result.run_id and rec.target.same_device(self.target)]
        configs, measured = _usable_records(loop.task, others)
        if configs:
            loop.tuner.update(configs, measured)


class TransferWarmStart(TuningCallback):
    """``transfer``: a tuner that accepts a warm start learns from other shapes of the op first."""

    def __init__(self, db, target, features: FeatureCache, limit: int):
        self.db, self.target, self.features, self.limit = db, target, features, limit

    def on_start(self, loop: TuningLoop) -> None:
        if loop.tuner.accepts_warm_start:
            loop.result.transfer_records = _warm_start_from_similar(self.db, loop.task, self.target, loop.tuner,
                                                                    self.features, self.limit)


def record_of(task: Task, target, trial: Trial, tool_version: str = TOOL_VERSION):
    """The ``tuning_db.MeasureRecord`` of one trial of ``task`` (on ``target``, unless the
    result says which machine measured it). A simulated kind's record has no GFLOP/s: its
    time is a model's (``AutotuneParts.simulated``)."""
    from tuning_db import MeasureRecord

    r = trial.result
    speed = None if targets.is_simulated(task.target) else r.gflops(task.flops)
    return MeasureRecord(
        workload_key=task.key, workload_name=task.workload_name, params=task.params, target=r.where or target,
        config=trial.config.to_dict(), config_hash=trial.config.hash, status=r.status, costs=list(r.costs),
        median_s=r.median_s, spread=r.spread, gflops=speed, build_s=r.build_s, run_s=r.run_s,
        error=r.error, trial=trial.index, tool_version=tool_version,
    )


def _warm_start_from_similar(db, task: Task, target, search: Tuner, features: FeatureCache, limit: int) -> int:
    """Warm-start ``search``'s model from records of other workloads of ``task``'s op.

    One query group per workload (the model only learns orders within a workload).
    Records whose workload cannot be rebuilt here (neither registered in this process nor
    stored with its DAG) or whose config does not fit the current space are skipped.
    Returns how many records were used.
    """
    by_key: dict[str, tuple[Task, list]] = {}
    for rec in db.records_similar(task.workload_name, target, exclude_key=task.key, limit=limit):
        if rec.workload_key not in by_key:
            try:
                other = Task.of_record(rec, db, task.target)
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
        items.append((config, rec.median_s if rec.status == Status.OK and rec.median_s else math.inf))
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


def _usable_records(task: Task, records) -> tuple[list[Config], list[MeasureResult]]:
    """The configs and results of stored ``records`` that fit ``task``'s space (a record from
    another version of the space is left out), in order."""
    configs, measured = [], []
    for rec in records:
        try:
            config = Config.from_json(rec.config)
            task.space.knobs.check(config)
        except ValueError:
            continue
        configs.append(config)
        measured.append(MeasureResult.from_record(rec))
    return configs, measured
