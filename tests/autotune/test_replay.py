"""Replay: tuners run against recorded measurements reproduce recorded runs, handle misses, and report.

The recordings are made by ``autotune.tune`` itself into a SQLite file, with a builder
and runner that price a config from its hash instead of compiling it (milliseconds per
trial); a slow test does the same with the real compiler and measuring process.
"""
from __future__ import annotations

import itertools
import random

import json
import math
import os

import pytest

import tuning_db
from autotune.measure import BuildResult, MeasureResult, Status
from autotune.replay_report import ReplayReport, exact_random_percentiles
from autotune.replaying import (
    MISS_ERROR, RecordedBuilder, RecordedRunner, RecordedTrial, Recording, ReplayRun, replay, replay_one, retime,
    transfer_records,
)
from autotune.runner import TimingOptions
from autotune.task import Task
from autotune.tuners import RandomTuner
from autotune.tuning import tune
from schedule.config import Config

SHAPE = dict(M=16, N=16, K=16)


def priced(config: Config) -> MeasureResult:
    """A made-up but fixed measurement of ``config``: one in five fails to compile."""
    h = int(config.hash[:8], 16)
    if h % 5 == 0:
        return MeasureResult(Status.COMPILE_ERROR, error="made up", build_s=0.5)
    cost = 1e-4 * (1 + h / 2**32)
    return MeasureResult(Status.OK, costs=[cost * 1.02, cost, cost * 1.01], build_s=0.5, run_s=0.25)


class PricingBuilder:
    """Passes each config through as its "build"; ``n_workers`` sizes tune's feature pool."""

    n_workers = os.cpu_count() or 1

    def build(self, inputs):
        return [inp.config for inp in inputs]


class PricingRunner:
    def run(self, task, builds, best_cost=None):
        return [priced(c) for c in builds]

    def close(self):
        pass


@pytest.fixture(scope="module")
def task():
    return Task("matmul", SHAPE, "cpu")


def record_run(db, task, tuner: str, seed: int, trials: int, batch_size: int = 8) -> list[str]:
    """Tune with made-up measurements into ``db``; the run's configs in trial order, as read back.
    Each run starts from scratch (``share=False``), as a replay does, not from the runs before it."""
    result = tune(task, trials=trials, tuner=tuner, db=db, seed=seed, batch_size=batch_size,
                  builder=PricingBuilder(), runner=PricingRunner(), share=False)
    return [Config.from_json(r.config).to_json() for r in db.history(result.run_id)]


@pytest.fixture(scope="module")
def recorded(tmp_path_factory, task):
    """A database with a random run (seed 3) and an xgb run (seed 1) of 40 trials each, of one task."""
    db = tuning_db.Database(tmp_path_factory.mktemp("replay") / "tuning.db")
    runs = {"random": record_run(db, task, "random", 3, 40), "xgb": record_run(db, task, "xgb", 1, 40)}
    yield db, runs
    db.close()


# ---------------------------------------------------------------- reproducing recorded runs


@pytest.mark.parametrize("tuner, seed, trials", [("random", 3, 40), ("xgb", 1, 40)])
def test_replay_with_the_same_tuner_and_seed_proposes_the_recorded_sequence(recorded, task, tuner, seed, trials):
    db, runs = recorded
    recording = Recording.from_db(db, task.key, "cpu")
    run = replay_one(recording, tuner, seed, trials=trials, batch_size=8)
    assert run.configs == runs[tuner]
    assert run.misses == 0 and run.stopped == "budget"
    assert run.costs == [priced(Config.from_json(c)).cost for c in runs[tuner]]


def test_the_recorded_xgb_run_has_model_guided_batches(recorded, task):
    # until min_train (16) trials the xgb tuner measures the space's starting points, then
    # samples at random; then the model chooses the batches, so the test above compared
    # model-guided proposals too
    _, runs = recorded
    points = [c.to_json() for c in task.space.starting_points(random.Random(1))]
    assert 0 < len(points) < 16 and runs["xgb"][:len(points)] == points
    assert len(set(runs["xgb"])) == 40 and not set(runs["xgb"][len(points):]) & set(points)
    sampler = RandomTuner(task.space, seed=1)
    random_order = [c.to_json() for _ in range(5) for c in sampler.next_batch(8)]
    assert runs["xgb"][16:] != random_order[16:]


def test_simulated_seconds_are_the_recorded_build_and_run_seconds(recorded, task):
    db, runs = recorded
    run = replay_one(Recording.from_db(db, task.key), "random", 3, trials=40, batch_size=8)
    expected = [priced(Config.from_json(c)) for c in runs["random"]]
    assert run.seconds == [r.build_s + r.run_s for r in expected]
    assert run.elapsed()[-1] == pytest.approx(sum(r.build_s + r.run_s for r in expected))


# ---------------------------------------------------------------- the recording


def make_record(task, config: Config, status="ok", median=None, **kw) -> tuning_db.MeasureRecord:
    ok = Status(status) is Status.OK
    return tuning_db.MeasureRecord(
        workload_key=task.key, workload_name=task.workload_name, params=task.params,
        target=kw.pop("target", tuning_db.TargetInfo("cpu", device="test cpu")), config=config.to_dict(),
        status=status, costs=[median] if ok else [], median_s=median if ok else None, **kw)


def test_duplicates_keep_the_fastest_ok_measurement(task):
    import random

    a, b = task.space.sample(random.Random(0)), task.space.sample(random.Random(1))
    records = [make_record(task, a, "ok", 3e-3), make_record(task, a, "runtime_error"), make_record(task, a, "ok", 1e-3),
               make_record(task, a, "ok", 2e-3), make_record(task, b, "timeout"), make_record(task, b, "wrong_answer")]
    recording = Recording.from_records(records)
    assert len(recording) == 2 and recording.duplicates == 4
    assert recording.get(a).cost == 1e-3
    assert recording.get(b).status is Status.TIMEOUT  # no ok one: the first failure
    assert recording.optimum_s == 1e-3 and recording.n_ok == 1


def test_keep_newest_takes_the_last_ok_measurement_slower_or_not(task):
    import random

    a = task.space.sample(random.Random(0))
    records = [make_record(task, a, "ok", 1e-3), make_record(task, a, "ok", 3e-3), make_record(task, a, "timeout")]
    assert Recording.from_records(records).get(a).cost == 1e-3
    assert Recording.from_records(records, keep="newest").get(a).cost == 3e-3  # a failure after it does not count
    with pytest.raises(ValueError, match="keep must be one of fastest, newest"):
        Recording.from_records(records, keep="median")


def test_retime_measures_the_fastest_configs_again_into_a_run_of_its_own(tmp_path, monkeypatch):
    monkeypatch.setenv("AUTOTUNE_CACHE_DIR", str(tmp_path / "kernels"))
    task = Task("matmul", dict(M=16, N=16, K=16), "cpu")
    with tuning_db.Database(tmp_path / "tuning.db") as db:
        tune(task, trials=8, tuner="random", db=db, seed=0, batch_size=8, timing=TimingOptions(rounds=1))
        before = Recording.from_db(db, task.key, "cpu")
        fastest = sorted((t.cost, key) for key, t in before.trials.items() if t.ok)[:3]
        results = retime(before, db, 3, timing=TimingOptions(rounds=2))
        (run,) = [r for r in db.list_runs(task.key) if r.tuner == "retime"]
        stored = db.history(run.id)
        after = Recording.from_db(db, task.key, "cpu", keep="newest")
    assert [Config.from_json(r.config).to_json() for r in stored] == [key for _, key in fastest]
    assert all(r.ok and r.rounds == 2 for r in results)
    assert [after.trials[key].cost for _, key in fastest] == [r.median_s for r in results]
    assert len(after) == len(before) == 8


def test_records_of_another_space_are_left_out_and_counted(task):
    import random

    good = make_record(task, task.space.sample(random.Random(0)), "ok", 1e-3)
    stale = make_record(task, Config("no-such-sketch", {"x": 1}), "ok", 1e-4)
    recording = Recording.from_records([good, stale])
    assert len(recording) == 1 and recording.unusable == 1 and recording.optimum_s == 1e-3


def test_records_the_space_now_rejects_are_left_out_and_counted(task):
    """A config valid when it was measured that the space's rules now reject (a rule added
    since) is no candidate a tuner could propose: it is left out, and the report says so."""
    rng = random.Random(0)
    rejected = next(c for c in (task.space.knobs.sample(rng) for _ in range(2000)) if task.space.check(c))
    good = make_record(task, task.space.sample(random.Random(0)), "ok", 1e-3)
    recording = Recording.from_records([good, make_record(task, rejected, "ok", 1e-4)])
    assert len(recording) == 1 and recording.unusable == 1 and recording.optimum_s == 1e-3
    report = ReplayReport.from_runs(recording, {}, trials=1, miss="skip")
    assert report.left_out == 1 and "1 records outside the current space left out" in report.header()


def test_mixed_sources_and_empty_recordings_are_refused(task):
    import random

    config = task.space.sample(random.Random(0))
    other = make_record(task, config, "ok", 1e-3, target=tuning_db.TargetInfo("cpu", device="another cpu"))
    with pytest.raises(ValueError, match="several devices"):
        Recording.from_records([make_record(task, config, "ok", 1e-3), other])
    with pytest.raises(ValueError, match="no records"):
        Recording.from_records([])


def test_recorded_measurers_answer_with_the_record_or_a_miss(task):
    import random

    known, unknown = task.space.sample(random.Random(0)), task.space.sample(random.Random(1))
    recording = Recording(task, {known.to_json(): RecordedTrial(Status.OK, (2e-3, 1e-3, 3e-3), 0.4, 0.1)})
    from autotune.measure import MeasureInput

    builds = RecordedBuilder(recording).build([MeasureInput(task, known), MeasureInput(task, unknown)])
    assert [b.build_s for b in builds] == [0.4, 0.0]
    hit, miss = RecordedRunner(recording).run(task, builds)
    assert hit.ok and hit.cost == 2e-3 and (hit.build_s, hit.run_s) == (0.4, 0.1)
    assert miss.status is Status.INVALID and miss.error == MISS_ERROR and math.isinf(miss.cost)
    assert isinstance(builds[0], BuildResult)


# ---------------------------------------------------------------- misses


@pytest.fixture(scope="module")
def half_recording(recorded, task):
    """The random run's recording with every other config removed."""
    db, runs = recorded
    full = Recording.from_db(db, task.key)
    keep = set(runs["random"][::2])
    return Recording(task, {k: v for k, v in full.trials.items() if k in keep})


def test_skipped_misses_cost_no_trial_and_never_reach_the_history(half_recording, task):
    run = replay_one(half_recording, "random", 3, trials=12, batch_size=8, miss="skip")
    assert len(run.costs) == 12 and run.misses > 0
    assert all(c in half_recording.trials for c in run.configs)


def test_failed_misses_are_invalid_trials_within_the_budget(half_recording):
    run = replay_one(half_recording, "random", 3, trials=12, batch_size=8, miss="fail")
    missing = [c for c in run.configs if c not in half_recording.trials]
    assert len(run.costs) == 12 and len(missing) == run.misses > 0
    assert all(math.isinf(cost) for c, cost in zip(run.configs, run.costs) if c in missing)


def test_a_replay_stops_after_max_misses(half_recording):
    run = replay_one(half_recording, "random", 99, trials=200, batch_size=8, miss="skip", max_misses=5)
    assert run.stopped == "misses" and run.misses >= 5 and len(run.costs) < 200


@pytest.mark.parametrize("tuner", ["random", "ga", "grid"])
def test_restricted_replays_search_the_recorded_configs_only(half_recording, tuner):
    run = replay_one(half_recording, tuner, 7, trials=30, batch_size=8, restrict=True)
    assert run.misses == 0 and run.stopped == "space"   # 20 recorded configs, 30 trials asked
    assert sorted(run.configs) == sorted(half_recording.trials)


#: The forks of this process, counted while a test watches.
_FORKS: list | None = None


def _note_fork() -> None:
    if _FORKS is not None:
        _FORKS.append(os.getpid())


os.register_at_fork(before=_note_fork)


def test_parallel_replays_never_fork_this_process_and_give_the_report_of_one_job(recorded, task):
    """A process forked while another thread holds a lock (the feature pool's queue
    threads, an OpenMP team, a progress bar's monitor) can inherit it held and hang for
    ever: replay workers come from a fork server, and this process is never forked."""
    global _FORKS
    db, _ = recorded
    recording = Recording.from_db(db, task.key, "cpu")
    assert len(recording) >= 32   # enough new configs for the feature cache to start its pool
    alone = replay(recording, ["random", "xgb"], seeds=1, trials=8, jobs=1)
    _FORKS = []
    try:
        parallel = replay(recording, ["random", "xgb"], seeds=1, trials=8, jobs=2)
        forks = _FORKS
    finally:
        _FORKS = None
    assert forks == []
    assert [r.configs for r in parallel.runs["xgb"]] == [r.configs for r in alone.runs["xgb"]]
    assert [r.costs for r in parallel.runs["random"]] == [r.costs for r in alone.runs["random"]]


def test_bad_arguments_are_refused(half_recording):
    with pytest.raises(ValueError, match="unknown tuner 'beam'"):
        replay(half_recording, ["random", "beam"], seeds=1, trials=4)
    with pytest.raises(ValueError, match="miss must be one of"):
        replay(half_recording, ["random"], seeds=1, trials=4, miss="ignore")
    with pytest.raises(ValueError, match="at least one seed"):
        replay(half_recording, ["random"], seeds=[], trials=4)
    with pytest.raises(ValueError, match="jobs must be a positive int"):
        replay(half_recording, ["random"], seeds=1, trials=4, jobs=0)


# ---------------------------------------------------------------- the report


def fixed_report() -> ReplayReport:
    """Two tuners, two seeds each, with costs chosen by hand (optimum 1 ms)."""
    inf = math.inf
    runs = {
        "fast": [ReplayRun("fast", 0, costs=[4e-3, 1e-3, 2e-3], seconds=[1.0, 1.0, 1.0]),
                 ReplayRun("fast", 1, costs=[inf, 1.05e-3, 1e-3], seconds=[0.5, 2.0, 1.0])],
        "slow": [ReplayRun("slow", 0, costs=[inf, inf, 2e-3], seconds=[1.0, 1.0, 1.0]),
                 ReplayRun("slow", 1, costs=[5e-3], seconds=[2.0], stopped="space")],
    }
    return ReplayReport("wl", "cpu", recorded=10, recorded_ok=8, optimum_s=1e-3, trials=3, miss="skip", runs=runs)


def test_summary_counts_trials_and_simulated_seconds_to_each_fraction():
    rows = {r["tuner"]: r for r in fixed_report().summary()}
    fast, slow = rows["fast"], rows["slow"]
    assert fast["trials_1"] == 2 and fast["reached_1"] == 2       # trials 2 and 3: lower median 2
    assert fast["seconds_1"] == 2.0                               # 2.0 s and 3.5 s
    assert fast["trials_0.9"] == 2 and fast["reached_0.9"] == 2   # 1.05 ms is within 1/0.9 of 1 ms
    assert fast["final"] == 1.0
    assert slow["trials_0.9"] is None and slow["reached_0.9"] == 0 and slow["final"] == pytest.approx(0.35)


def test_trials_percentiles_count_a_run_that_never_got_there_as_never():
    report = fixed_report()
    assert report.trials_percentiles(1.0) == {"fast": [2, 2, 2], "slow": [None, None, None]}
    assert report.trials_percentiles(0.4, percents=(0, 100)) == {"fast": [2, 2], "slow": [3, None]}
    runs = [ReplayRun("t", n, costs=[2e-3] * n + [1e-3], seconds=[1.0] * (n + 1)) for n in range(9)]
    runs.append(ReplayRun("t", 9, costs=[2e-3], seconds=[1.0]))  # never
    many = ReplayReport("wl", "cpu", recorded=10, recorded_ok=10, optimum_s=1e-3, trials=10, miss="skip",
                        runs={"t": runs})
    assert many.trials_percentiles(1.0, percents=(25, 50, 75, 90)) == {"t": [3, 5, 7, 9]}
    assert many.trials_percentiles(1.0, percents=(50,))["t"] == [many.summary()[0]["trials_1"]]


def test_curves_hold_the_last_value_of_a_short_run_and_spread_over_seeds():
    report = fixed_report()
    curves = report.trial_curves()
    assert curves["slow"]["max"] == [0.2, 0.2, 0.5] and curves["slow"]["min"] == [0.0, 0.0, 0.2]
    assert curves["fast"]["median"] == pytest.approx([0.125, 1 / 1.05 / 2 + 0.5, 1.0])
    times = report.time_curves(points=5)
    assert times["seconds"] == [0.0, 0.875, 1.75, 2.625, 3.5]
    assert times["fast"]["max"] == [0.0, 0.0, 0.25, 1.0, 1.0]   # seed 0: 4 ms at 1.0 s, 1 ms at 2.0 s


def test_json_report_is_strict_json_with_every_run():
    data = fixed_report().to_json(points=4)
    text = json.dumps(data, allow_nan=False)
    assert len(json.loads(text)["runs"]) == 4 and data["runs"][1]["costs"][0] is None
    assert set(data["trial_curves"]) == {"fast", "slow"}


def test_table_has_a_line_per_tuner():
    lines = fixed_report().table()
    assert lines[0].startswith("tuner") and "trials to 0.9x" in lines[0]
    assert lines[1].startswith("fast") and lines[2].startswith("slow") and "never" in lines[2]


@pytest.mark.parametrize("suffix, magic", [(".png", b"\x89PNG"), (".svg", b"<?xml")])
def test_plot_format_follows_the_suffix(tmp_path, suffix, magic):
    path = tmp_path / f"curves{suffix}"
    fixed_report().plot(path)
    assert path.read_bytes().startswith(magic)


def test_plot_refuses_an_unknown_suffix(tmp_path):
    with pytest.raises(ValueError, match=r"\.png or \.svg"):
        fixed_report().plot(tmp_path / "curves.pdf")


def test_replay_report_over_seeds_and_tuners(half_recording):
    seen = []
    report = replay(half_recording, ["random", "ga"], seeds=2, trials=6, batch_size=4, miss="fail",
                    on_run=seen.append)
    assert [(r.tuner, r.seed) for r in seen] == [("random", 0), ("random", 1), ("ga", 0), ("ga", 1)]
    assert report.recorded == len(half_recording) and report.optimum_s == half_recording.optimum_s
    assert all(len(r.costs) == 6 for runs in report.runs.values() for r in runs)


def test_exact_random_percentiles_agree_with_every_draw_order():
    # 6 items, 2 good: over all 720 orders, the position of the first good one
    firsts = sorted(min(order.index(0), order.index(1)) + 1 for order in itertools.permutations(range(6)))
    percents = (10, 25, 50, 75, 90, 100)
    by_count = [next(t for t in range(1, 7) if sum(f <= t for f in firsts) >= p / 100 * len(firsts))
                for p in percents]
    assert exact_random_percentiles(6, 2, percents) == by_count == [1, 1, 2, 3, 4, 5]
    assert exact_random_percentiles(6, 2, percents, budget=3) == [1, 1, 2, 3, None, None]
    assert exact_random_percentiles(6, 0) == [None, None, None]
    assert exact_random_percentiles(6, 6) == [1, 1, 1]
    with pytest.raises(ValueError, match="k <= n"):
        exact_random_percentiles(3, 4)


def test_exact_random_figures_match_many_sampled_random_replays(half_recording):
    report = replay(half_recording, ["random"], seeds=300, trials=20, batch_size=4, restrict=True)
    exact = report.random_trials_percentiles(0.9)
    sampled = report.trials_percentiles(0.9)["random"]
    assert all(abs(e - s) <= 1 for e, s in zip(exact, sampled)), (exact, sampled)
    good = sum(t.cost <= half_recording.optimum_s / 0.9 for t in half_recording.trials.values())
    assert exact == exact_random_percentiles(len(half_recording), good, budget=20)
    with pytest.raises(ValueError, match="restrict"):
        replay(half_recording, ["random"], seeds=1, trials=4, batch_size=4).random_trials_percentiles(0.9)


def test_parallel_replays_give_the_runs_of_a_serial_replay_in_order(recorded, task):
    db, _ = recorded
    recording = Recording.from_db(db, task.key)
    kw = dict(seeds=[0, 5], trials=24, batch_size=8, restrict=True)
    serial = replay(recording, ["xgb", "ga"], **kw)
    seen = []
    parallel = replay(recording, ["xgb", "ga"], jobs=2, on_run=seen.append, **kw)
    assert [(r.tuner, r.seed) for r in seen] == [("xgb", 0), ("xgb", 5), ("ga", 0), ("ga", 5)]
    for tuner in ("xgb", "ga"):
        assert [r.configs for r in parallel.runs[tuner]] == [r.configs for r in serial.runs[tuner]]
        assert [r.costs for r in parallel.runs[tuner]] == [r.costs for r in serial.runs[tuner]]
    assert len({tuple(r.configs) for r in parallel.runs["xgb"]}) == 2, "the seeds really differ"


# ---------------------------------------------------------------- with real measurements


@pytest.mark.slow
def test_replay_reproduces_a_really_measured_xgb_run(tmp_path, monkeypatch):
    monkeypatch.setenv("AUTOTUNE_CACHE_DIR", str(tmp_path / "kernels"))
    task = Task("matmul", dict(M=32, N=32, K=32), "cpu")
    with tuning_db.Database(tmp_path / "tuning.db") as db:
        result = tune(task, trials=40, tuner="xgb", db=db, seed=5, batch_size=8)
        original = [Config.from_json(r.config).to_json() for r in db.history(result.run_id)]
        run = replay_one(Recording.from_db(db, task.key, "cpu"), "xgb", 5, trials=40, batch_size=8)
    assert run.configs == original


# ---------------------------------------------------------------- transfer


def _shaped_cost(config: Config) -> float:
    """A made-up cost that the loop nest decides alike in every matmul shape: kernels that
    copy an operand into a local tile are faster, more so computed at the outer loop, so
    what one shape teaches holds in another. (Both show in the features on every shape; an
    unroll budget does not on these small ones, where 64 and 256 unroll the same loops.)"""
    v = config.values
    local = v["C.pack"] in ("A", "B")
    speed = 1 + 2 * local + (v["C.at"] == "a")
    return 1e-3 / speed * (1 + (int(config.hash[:6], 16) % 7) / 100)


def _shaped_recording(shape: dict, count: int, seed: int) -> Recording:
    task = Task("matmul", shape, "cpu")
    rng = random.Random(seed)
    configs = list({c.hash: c for c in (task.space.sample(rng) for _ in range(count))}.values())
    return Recording(task, {c.to_json(): RecordedTrial(Status.OK, (_shaped_cost(c),), 0.1, 0.01) for c in configs})


@pytest.fixture(scope="module")
def shaped():
    return {"target": _shaped_recording(SHAPE, 160, 1), "other": _shaped_recording(dict(M=32, N=24, K=16), 160, 2)}


def test_transfer_warm_starts_the_model_so_its_first_batch_is_chosen(shaped):
    """Warm-started from another shape's recording (``replay(..., transfer=...)``), xgb's
    first batch comes from the model and holds the target's fast configs; cold, it is the
    starting points and random draws, as random's is."""
    target = shaped["target"]
    optimum = target.optimum_s
    fast = {k for k, t in target.trials.items() if t.cost <= optimum * 1.1}
    assert 0 < len(fast) < len(target) / 4
    warm = replay(target, ["xgb", "random"], seeds=[0, 1, 2], trials=8, batch_size=8, restrict=True,
                  transfer=[shaped["other"]])
    cold = replay(target, ["xgb"], seeds=[0, 1, 2], trials=8, batch_size=8, restrict=True)
    # about 1 in 5 of the space is fast: a batch of 8 drawn blind holds one or two, and three
    # or more on each of three seeds by chance about once in 120 tries
    for run in warm.runs["xgb"]:
        assert sum(c in fast for c in run.configs) >= 3, run.configs
    assert sum(c in fast for run in cold.runs["xgb"] for c in run.configs) <= 8
    # tuners without a model ignore the transfer: random proposes as it does cold
    assert [r.configs for r in warm.runs["random"]] == [
        r.configs for r in replay(target, ["random"], seeds=[0, 1, 2], trials=8, batch_size=8, restrict=True).runs["random"]]


def test_transfer_records_spread_over_each_recording_and_refuse_the_answers(shaped):
    from autotune.features import FeatureCache

    features = FeatureCache()
    try:
        warm = transfer_records([shaped["other"]], features, shaped["target"], limit=40)
        assert len(warm) == 40 and warm.features.shape[0] == 40 and set(warm.groups) == {shaped["other"].task.key}
        keys = list(shaped["other"].trials)
        step = len(keys) / 40
        assert warm.costs == [shaped["other"].trials[keys[int(i * step)]].cost for i in range(40)]
        with pytest.raises(ValueError, match="to itself"):
            transfer_records([shaped["target"]], features, shaped["target"])
        with pytest.raises(ValueError, match="positive"):
            transfer_records([shaped["other"]], features, shaped["target"], limit=0)
    finally:
        features.close()
