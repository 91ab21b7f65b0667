"""Replay: run a tuner against recorded measurements instead of the device (Kernel Tuner's simulation mode).

    recording = Recording.from_db(db, workload_key, "cpu")      # what was measured, once
    report = replay(recording, ["xgb", "ga", "random"], seeds=20, trials=1000)
    report.summary(), report.to_json(), report.plot("strategies.png")   # autotune.replay_report

Questions about search quality (does one tuner beat another at N trials, how many trials
until 0.9x of the best) cost a full tuning run per seed when answered on the device.
Here the real ``TuningLoop``, tuners and cost model run unchanged; only the two
measuring steps are replaced:

    tuner.next_batch -> RecordedBuilder (no compiler) -> RecordedRunner (no device)
                     -> the recorded MeasureResult: status, costs, build_s, run_s
                     -> history, tuner.update (the model retrains for real)

A *recording* is what a database holds for one workload on one target kind: every
config with its status, costs and build/run seconds. A config measured more than once
(several runs, or ``autotune sample`` on top of tuning runs) keeps its fastest ``ok``
measurement; with no ``ok`` one, its first failure. With ``keep="newest"`` it keeps its
newest ``ok`` measurement instead: after ``retime`` measured a recording's fastest configs
again with the full protocol, those measurements replace the earlier single ones, whether
faster or slower (a lucky fast reading of a one-round sample would otherwise stand). Records whose config no longer
fits the space, or that the space's rules now reject (another version of the space), are left out and counted.

A config the tuner proposes that the recording lacks is a *miss*, handled by ``miss``:

    "skip" (default)  dropped: not a trial, not counted against the budget, not shown to
                      the tuner (which has marked it proposed and never proposes it
                      again); after ``max_misses`` misses the replay stops
                      (``ReplayRun.stopped == "misses"``)
    "fail"            a trial with status ``invalid`` and the error ``MISS_ERROR``: the
                      tuner scores it infinitely slow, and it costs a trial of the budget

A recording of a tuning run is dense around that run's path; a sample of random configs
(``sample``, ``autotune sample``) is sparse in a space of millions, so nearly every
proposal would miss. ``restrict=True`` searches the recorded configs only
(``RecordedSpace``: sampling and enumeration draw from them, anything else is invalid), so
nothing misses; mutations then find fewer neighbours than on the device, which a
comparison of local searches over a sample has to keep in mind.

Replaying a recorded run with its tuner and seed proposes exactly the run's configs:
tuners are deterministic under their seed and see the same costs. Simulated time is
accounted per trial as the recorded ``build_s + run_s`` (one candidate at a time, so
an upper bound of a run whose builds overlap); a miss costs nothing. The real time of
the model and the search is reported apart (``ReplayRun.model_s``, ``search_s``).
The space is rebuilt here, for this machine's target facts: replay on the machine
(or target preset) that recorded, or the proposals may differ.
"""
from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass, field, replace
from typing import Iterable, Sequence

from schedule.config import Config, SearchSpace

from .loop import Trial, TuningLoop
from .measure import BuildResult, Builder, MeasureInput, MeasureResult, Runner, Status
from .runner import TimingOptions
from .task import Task

MISS_MODES = ("skip", "fail")
#: Which of a config's several measurements a recording keeps (``Recording.add``).
KEEP_RULES = ("fastest", "newest")
#: The error of a "fail"-mode miss (status ``invalid``), so reports can tell it from a recorded failure.
MISS_ERROR = "replay: config not in the recording"
#: Default limit of skipped misses, per trial of the budget.
MISSES_PER_TRIAL = 4

__all__ = ["MISS_ERROR", "MISS_MODES", "Miss", "RecordedBuilder", "RecordedRunner", "RecordedSpace", "RecordedTrial",
           "Recording", "ReplayLoop", "ReplayRun", "WarmStart", "replay", "replay_one", "sample", "transfer_records"]


# ---------------------------------------------------------------- the recording


@dataclass(frozen=True)
class RecordedTrial:
    """One recorded measurement of a config: what ``RecordedRunner`` answers for it."""

    status: Status
    costs: tuple[float, ...] = ()
    build_s: float = 0.0
    run_s: float = 0.0
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.status is Status.OK

    @property
    def seconds(self) -> float:
        """Simulated time of measuring it again: the recorded build and run seconds."""
        return self.build_s + self.run_s

    def result(self) -> MeasureResult:
        """A fresh ``MeasureResult`` with the recorded status, costs and seconds."""
        return MeasureResult(self.status, costs=list(self.costs) if self.ok else [], error=self.error,
                             build_s=self.build_s, run_s=self.run_s)

    @property
    def cost(self) -> float:
        return self.result().cost

    @classmethod
    def from_record(cls, rec) -> "RecordedTrial":
        """From a ``tuning_db.MeasureRecord`` (as ``MeasureResult.from_record`` reads it)."""
        r = MeasureResult.from_record(rec)
        return cls(r.status, tuple(r.costs), r.build_s, r.run_s, r.error)


class Recording:
    """Recorded measurements of one task: config (canonical JSON) -> ``RecordedTrial``.

    ``unusable`` counts records left out: their config does not fit ``task.space`` or the
    space now rejects it (a tuner could not propose it, and its features would not describe
    what was measured),
    ``duplicates`` records of a config already recorded (see the module docstring for
    which one is kept). ``source`` says where it came from, for reports.
    """

    def __init__(self, task: Task, trials: dict[str, RecordedTrial], *, source: str = "", duplicates: int = 0,
                 unusable: int = 0, keep: str = "fastest"):
        if keep not in KEEP_RULES:
            raise ValueError(f"keep must be one of {', '.join(KEEP_RULES)}, got {keep!r}")
        self.keep = keep
        self.task = task
        self.trials = dict(trials)
        self.source = source
        self.duplicates = duplicates
        self.unusable = unusable

    def __len__(self) -> int:
        return len(self.trials)

    def __contains__(self, config: Config) -> bool:
        return config.to_json() in self.trials

    def get(self, config: Config) -> RecordedTrial | None:
        return self.trials.get(config.to_json())

    def configs(self) -> list[Config]:
        """The recorded configs, in recording order."""
        return [Config.from_json(key) for key in self.trials]

    @property
    def n_ok(self) -> int:
        return sum(t.ok for t in self.trials.values())

    @property
    def optimum_s(self) -> float:
        """The fastest recorded cost (seconds; inf when nothing succeeded)."""
        return min((t.cost for t in self.trials.values()), default=math.inf)

    def add(self, config: Config, trial: RecordedTrial) -> None:
        """Record ``trial`` for ``config`` (added oldest first); of a config seen before, the
        fastest ok measurement stays, or with ``keep="newest"`` the newest ok one."""
        key = config.to_json()
        old = self.trials.get(key)
        if old is None:
            self.trials[key] = trial
            return
        self.duplicates += 1
        if trial.ok and (trial.cost < old.cost or self.keep == "newest"):
            self.trials[key] = trial

    @classmethod
    def from_records(cls, records: Iterable, task: Task | None = None, source: str = "", db=None,
                     keep: str = "fastest") -> "Recording":
        """From ``tuning_db.MeasureRecord``s of one workload on one device (oldest first).

        ``task`` defaults to one rebuilt from the records (``Task.of_record``: the registered
        workload, or the DAG ``db`` stored for it); records of several workloads, target
        kinds or devices are refused. ``keep``: which measurement of a config measured
        more than once counts (the module docstring).
        """
        records = list(records)
        if not records:
            raise ValueError(f"no records to replay{' in ' + source if source else ''}")
        _check_one_source(records)
        first = records[0]
        if task is None:
            task = Task.of_record(first, db)
        elif (task.key, task.target_kind) != (first.workload_key, first.target.kind):
            raise ValueError(f"records of {first.workload_key} on {first.target.kind} do not belong to {task}")
        recording = cls(task, {}, source=source, keep=keep)
        for rec in records:
            try:
                config = Config.from_json(rec.config)
                task.space.knobs.check(config)
            except ValueError:
                recording.unusable += 1
                continue
            if task.space.check(config) is not None:  # valid when recorded; the space's rules changed since
                recording.unusable += 1
                continue
            recording.add(config, RecordedTrial.from_record(rec))
        if not recording.trials:
            raise ValueError(f"none of the {len(records)} records of {task.key} fits the current schedule space")
        return recording

    @classmethod
    def from_db(cls, db, workload_key: str, target: str | None = None, task: Task | None = None,
                keep: str = "fastest") -> "Recording":
        """Every record of ``workload_key`` (on target kind ``target``, or the only one stored) in ``db``.

        ``task`` as in ``from_records``: pass one with the recording's target preset
        (``Task(..., target="cpu:avx2")``) when it was not this machine's own.
        """
        records = db.records_for_task(workload_key, target)
        if not records:
            where = f" on {target}" if target else ""
            raise ValueError(f"no records of {workload_key}{where} in {db.location}")
        return cls.from_records(records, task=task, source=db.location, db=db, keep=keep)

    def __repr__(self) -> str:
        return f"Recording({self.task.key} on {self.task.target_kind}: {len(self)} configs, {self.n_ok} ok)"


def _check_one_source(records: list) -> None:
    """One workload, one target kind, one device: costs measured elsewhere do not compare."""
    for what, values in (("workloads", {r.workload_key for r in records}),
                         ("target kinds", {r.target.kind for r in records}),
                         ("devices", {r.target.describe() for r in records})):
        if len(values) > 1:
            shown = ", ".join(sorted(values)[:4])
            raise ValueError(f"records of several {what} ({shown}); replay one at a time (--workload, --target)")


class RecordedSpace(SearchSpace):
    """``space`` cut down to the configs of ``recording`` (``restrict=True``): those are the
    valid ones; mutation and crossover are ``space``'s (their children are checked)."""

    def __init__(self, space, recording: Recording):
        self.inner = space
        self.knobs = space.knobs
        self._keys = set(recording.trials)
        self._configs = [Config.from_json(key) for key in sorted(self._keys)]

    @property
    def size(self) -> int:
        return len(self._configs)

    def check(self, config: Config) -> str | None:
        return None if config.to_json() in self._keys else "not in the recording"

    def sample(self, rng, max_tries: int = 1000) -> Config:
        return rng.choice(self._configs)

    def starting_points(self, rng) -> list[Config]:
        return [c for c in self.inner.starting_points(rng) if self.check(c) is None]

    def mutate(self, config: Config, rng, local: float = 0.0) -> Config:
        return self.inner.mutate(config, rng, local)

    def crossover(self, a: Config, b: Config, rng) -> Config:
        return self.inner.crossover(a, b, rng)

    def enumerate(self):
        return iter(self._configs)


# ---------------------------------------------------------------- the measurers


class Miss(MeasureResult):
    """The result of a config the recording lacks (status ``invalid``, error ``MISS_ERROR``)."""

    def __init__(self):
        super().__init__(Status.INVALID, error=MISS_ERROR)


class RecordedBuilder(Builder):
    """Builds nothing: each input becomes a ``BuildResult`` whose artifact is the config's
    canonical JSON, with the recorded build seconds. Every status comes from the runner
    (``RecordedRunner``), which answers for the whole trial."""

    n_workers = 1

    def __init__(self, recording: Recording):
        self.recording = recording

    def build(self, inputs: list[MeasureInput]) -> list[BuildResult]:
        out = []
        for inp in inputs:
            trial = self.recording.get(inp.config)
            out.append(BuildResult(Status.OK, artifact=inp.config.to_json(),
                                   build_s=trial.build_s if trial is not None else 0.0))
        return out


class RecordedRunner(Runner):
    """Runs nothing: the recorded ``MeasureResult`` of each build's config, or a ``Miss``."""

    def __init__(self, recording: Recording):
        self.recording = recording

    def run(self, task, builds: list[BuildResult], best_cost: float | None = None) -> list[MeasureResult]:
        out: list[MeasureResult] = []
        for build in builds:
            trial = self.recording.trials.get(build.artifact)
            out.append(Miss() if trial is None else trial.result())
        return out


class ReplayLoop(TuningLoop):
    """``TuningLoop`` that counts misses and, with ``miss="skip"``, keeps them out of the
    history and away from the tuner (so they cost no trial); stops after ``max_misses``."""

    def __init__(self, *args, miss: str = "skip", max_misses: int | None = None, **kw):
        super().__init__(*args, **kw)
        if miss not in MISS_MODES:
            raise ValueError(f"miss must be one of {', '.join(MISS_MODES)}, got {miss!r}")
        self.miss = miss
        self.max_misses = MISSES_PER_TRIAL * self.trials if max_misses is None else max_misses
        self.misses = 0
        self.stopped = "budget"

    def propose(self) -> list[Config]:
        if self.miss == "skip" and self.misses >= self.max_misses:
            self.stopped = "misses"
            return []
        return super().propose()

    def measure(self, builds: list) -> list[MeasureResult]:
        measured = super().measure(builds)
        self.misses += sum(isinstance(r, Miss) for r in measured)
        return measured

    def record(self, configs, measured):
        return super().record(*self._kept(configs, measured))

    def learn(self, configs, measured) -> None:
        configs, measured = self._kept(configs, measured)
        if configs:
            super().learn(configs, measured)

    def why_stopped(self) -> str:
        """"budget", "misses", or "space" (the tuner had nothing more to propose)."""
        return "space" if self.stopped == "budget" and self.trials_left() > 0 else self.stopped

    def _kept(self, configs, measured):
        if self.miss != "skip":
            return list(configs), list(measured)
        pairs = [(c, r) for c, r in zip(configs, measured) if not isinstance(r, Miss)]
        return [c for c, _ in pairs], [r for _, r in pairs]


# ---------------------------------------------------------------- one replayed run


@dataclass
class ReplayRun:
    """One tuner and seed replayed: per trial its config (canonical JSON), its cost
    (seconds, inf for a failure) and its simulated seconds, in trial order.

    ``stopped``: "budget" (all trials done), "space" (the tuner ran out of configs) or
    "misses" (``max_misses`` skipped); ``model_s``/``search_s``/``wall_s``: real seconds
    spent in the model, the search (lowering and features included) and in all.
    """

    tuner: str
    seed: int
    configs: list[str] = field(default_factory=list)
    costs: list[float] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)
    misses: int = 0
    stopped: str = "budget"
    model_s: float = 0.0
    search_s: float = 0.0
    wall_s: float = 0.0

    def best_so_far(self) -> list[float]:
        """The best cost after each trial (inf until one succeeded)."""
        out, best = [], math.inf
        for cost in self.costs:
            best = min(best, cost)
            out.append(best)
        return out

    def elapsed(self) -> list[float]:
        """Simulated seconds at the end of each trial."""
        out, total = [], 0.0
        for s in self.seconds:
            total += s
            out.append(total)
        return out

    def trials_to(self, cost: float) -> int | None:
        """Trials until the best cost was ``cost`` or less (None: never)."""
        for n, best in enumerate(self.best_so_far(), start=1):
            if best <= cost:
                return n
        return None

    def seconds_to(self, cost: float) -> float | None:
        """Simulated seconds until the best cost was ``cost`` or less (None: never)."""
        n = self.trials_to(cost)
        return None if n is None else self.elapsed()[n - 1]


def replay_one(recording: Recording, tuner: str, seed: int = 0, *, trials: int = 1000, batch_size: int = 64,
               miss: str = "skip", max_misses: int | None = None, restrict: bool = False,
               features=None, warm_start: "WarmStart | None" = None) -> ReplayRun:
    """Replay ``tuner`` with ``seed`` for up to ``trials`` trials against ``recording``
    (over the recorded configs only with ``restrict``, see the module docstring).
    ``warm_start`` (from ``transfer_records``): records of other workloads a tuner that
    accepts a warm start learns from before its first batch, as ``tune(transfer=True)``
    warm-starts from a database's other workloads.

    The tuner is made exactly as ``autotune.tune`` makes it, so a recorded run replays
    config for config. ``features`` (a ``FeatureCache``) may be shared between replays
    of one recording: features depend on the config alone, and lowering is the search's
    main cost. Without one, a cache is made and closed here.
    """
    from .features import FeatureCache
    from .tuners import make_tuner

    own_cache = features is None
    if own_cache:
        features = FeatureCache(workers=os.cpu_count() or 1)
    task = recording.task
    t0, features_s0 = time.perf_counter(), features.seconds
    try:
        space = RecordedSpace(task.space, recording) if restrict else task.space
        search = make_tuner(tuner, space, seed=seed, feature_fn=lambda c: features.get(task, c),
                            features_many=lambda cs: features.get_many(task, cs))
        if warm_start is not None and search.accepts_warm_start:
            search.warm_start(warm_start.features, warm_start.costs, warm_start.groups)
        loop = ReplayLoop(task, search, RecordedBuilder(recording), RecordedRunner(recording), trials=trials,
                          batch_size=batch_size, miss=miss, max_misses=max_misses)
        result = loop.run()
    finally:
        if own_cache:
            features.close()
    spent = search.timings()
    history = result.history
    return ReplayRun(
        tuner=tuner, seed=seed, configs=[t.config.to_json() for t in history],
        costs=[t.result.cost for t in history], seconds=[t.result.build_s + t.result.run_s for t in history],
        misses=loop.misses, stopped=loop.why_stopped(), model_s=spent.get("model_s", 0.0),
        search_s=spent.get("search_s", 0.0) + features.seconds - features_s0, wall_s=time.perf_counter() - t0)


def replay(recording: Recording, tuners: Sequence[str], seeds: int | Sequence[int] = 20, *, trials: int = 1000,
           batch_size: int = 64, miss: str = "skip", max_misses: int | None = None, restrict: bool = False,
           on_run=None, jobs: int = 1, transfer: Sequence[Recording] = (), transfer_limit: int = 1000):
    """Replay every tuner with every seed against ``recording``; a ``replay_report.ReplayReport``.

    ``seeds``: a count (seeds 0 .. n-1) or the seeds themselves. ``on_run(run)`` is
    called after each replayed run, in order (for progress). One feature cache serves
    every run. ``jobs`` > 1 replays that many runs at a time in worker processes: each
    run is deterministic under its seed, so the report is the same as with ``jobs=1``.
    ``transfer``: recordings of other workloads (on the same target kind) whose records,
    up to ``transfer_limit`` of each (``transfer_records``), warm-start every tuner that
    accepts a warm start, as a database holding their tuning history would.
    """
    from .features import FeatureCache
    from .replay_report import ReplayReport
    from .tuners import TUNERS

    tuners = list(dict.fromkeys(tuners))
    unknown = [t for t in tuners if t not in TUNERS]
    if not tuners or unknown:
        raise ValueError(f"unknown tuner {unknown[0]!r}; choose from {', '.join(TUNERS)}" if unknown
                         else "replay needs at least one tuner")
    seeds = list(range(seeds)) if isinstance(seeds, int) else list(seeds)
    if not seeds:
        raise ValueError("replay needs at least one seed")
    if not isinstance(trials, int) or trials <= 0:
        raise ValueError(f"trials must be a positive int, got {trials!r}")
    if miss not in MISS_MODES:
        raise ValueError(f"miss must be one of {', '.join(MISS_MODES)}, got {miss!r}")
    if not isinstance(jobs, int) or jobs < 1:
        raise ValueError(f"jobs must be a positive int, got {jobs!r}")
    runs: dict[str, list[ReplayRun]] = {t: [] for t in tuners}
    pairs = [(tuner, seed) for tuner in tuners for seed in seeds]
    options = dict(trials=trials, batch_size=batch_size, miss=miss, max_misses=max_misses, restrict=restrict)
    features = FeatureCache(workers=os.cpu_count() or 1)
    try:
        if transfer:
            options["warm_start"] = transfer_records(transfer, features, recording, transfer_limit)
        for run in _replay_pairs(recording, pairs, options, features, jobs):
            runs[run.tuner].append(run)
            if on_run is not None:
                on_run(run)
    finally:
        features.close()
    return ReplayReport.from_runs(recording, runs, trials=trials, miss=miss, restrict=restrict)


def _replay_pairs(recording: Recording, pairs: list[tuple[str, int]], options: dict, features, jobs: int):
    """The ``ReplayRun`` of each (tuner, seed) in ``pairs``, in order; ``jobs`` at a time."""
    if jobs == 1 or len(pairs) == 1:
        for tuner, seed in pairs:
            yield replay_one(recording, tuner, seed, features=features, **options)
        return
    from .worker_pool import start_pool, stop_pool

    # Lower every recorded config once, here, and hand the features to every worker
    # instead of each lowering them again; the cache's own pool is not needed meanwhile.
    features.get_many(recording.task, recording.configs())
    features.close()
    pool = start_pool(min(jobs, len(pairs)), preload=[__name__], initializer=_start_replay_worker,
                      initargs=(recording, options, features))
    finished = False
    try:
        yield from pool.map(_replay_in_worker, pairs)
        finished = True
    finally:
        stop_pool(pool, kill=not finished)


#: What a replay worker was given: (recording, options, feature cache).
_WORKER_STATE = None


def _start_replay_worker(recording: Recording, options: dict, features) -> None:
    global _WORKER_STATE
    features.work_alone()
    _WORKER_STATE = (recording, options, features)


def _replay_in_worker(pair: tuple[str, int]) -> ReplayRun:
    recording, options, features = _WORKER_STATE
    tuner, seed = pair
    return replay_one(recording, tuner, seed, features=features, **options)


# ---------------------------------------------------------------- transfer


@dataclass(frozen=True)
class WarmStart:
    """Records of other workloads for a cost model: features, costs (seconds, inf for a
    failure) and one query group per workload (``CostModel.warm_start``'s arguments)."""

    features: "object"   # (n, d) float32 array
    costs: list
    groups: list

    def __len__(self) -> int:
        return len(self.costs)


def transfer_records(recordings: Sequence[Recording], features, target: Recording, limit: int = 1000) -> WarmStart:
    """The ``WarmStart`` of ``recordings`` for a replay of ``target``: up to ``limit`` records
    of each (an even spread over its configs in their recorded order, so the choice does
    not depend on a seed), one group per workload; ``features`` a ``FeatureCache``.

    Recordings of ``target``'s own workload, or of another target kind, are refused: their
    records would tell the model the answers it is being tested on, or describe another
    machine.
    """
    import numpy as np

    if not isinstance(limit, int) or limit <= 0:
        raise ValueError(f"transfer_limit must be a positive int, got {limit!r}")
    xs, costs, groups = [], [], []
    for other in recordings:
        if other.task.key == target.task.key:
            raise ValueError(f"cannot transfer from {other.task.key} to itself: its records are the answers")
        if other.task.target_kind != target.task.target_kind:
            raise ValueError(f"cannot transfer from {other.task.target_kind} records to a replay on "
                             f"{target.task.target_kind}")
        keys = list(other.trials)
        step = max(1, len(keys) / limit)
        chosen = [keys[int(i * step)] for i in range(min(limit, len(keys)))]
        configs = [Config.from_json(k) for k in chosen]
        xs.append(np.asarray(features.get_many(other.task, configs), dtype=np.float32))
        costs += [other.trials[k].cost for k in chosen]
        groups += [other.task.key] * len(chosen)
    if not costs:
        raise ValueError("transfer needs at least one recording")
    return WarmStart(np.concatenate(xs), costs, groups)


# ---------------------------------------------------------------- making a recording


def retime(recording: Recording, db, count: int, *, timing: TimingOptions | None = None, timeout: float = 10.0,
           seed: int = 0):
    """Measure the ``count`` fastest configs of ``recording`` again with ``timing`` (default:
    the full protocol, fastest of three rounds) and store them in ``db`` as a run of tuner
    "retime"; a recording then read with ``keep="newest"`` uses these measurements.

    A sample measured with one round while the machine was not quiet can hold a lucky
    reading; the configs near the optimum are the ones whose order matters to a replay's
    "trials to 0.95x", so they are the ones measured again. Returns the new results, in
    the order of the configs (fastest recorded first).
    """
    from .builder import LocalBuilder
    from .runner import LocalRunner
    from .targets import describe
    from .tuning import TOOL_VERSION, record_of

    task = recording.task
    ranked = sorted((t.cost, key) for key, t in recording.trials.items() if t.ok)[:count]
    configs = [Config.from_json(key) for _, key in ranked]
    target = describe(task.target)
    builds = LocalBuilder(timeout=max(60.0, timeout)).build([MeasureInput(task, c) for c in configs])
    # Every config gets every round and its full repeats, however far from the best it is.
    options = replace(timing or TimingOptions(rounds=3), recheck_within=math.inf, slow_factor=math.inf)
    with LocalRunner(timeout=timeout, options=options, seed=seed) as runner:
        results = runner.run(task, builds)
    run_id = db.start_run(task.key, task.workload_name, task.params, target, "retime", seed, len(configs),
                          TOOL_VERSION, dag_json=task.dag_json, dag_hash=task.workload.dag_hash)
    db.add_records(run_id, [record_of(task, target, Trial(n, c, r))
                            for n, (c, r) in enumerate(zip(configs, results))])
    db.finish_run(run_id, "finished")
    return results


def sample(task: Task, trials: int, db, *, seed: int = 0, **tune_kw):
    """Measure ``trials`` distinct random configs of ``task`` into ``db`` (a run with the
    random tuner): a recording spread over the whole space, to replay with ``restrict=True``.
    Other keywords go to ``autotune.tune`` (``resume=True``: ``trials`` in all, stored ones
    included, none measured twice)."""
    from .tuning import tune

    return tune(task, trials=trials, tuner="random", db=db, seed=seed, **tune_kw)
