"""The tuning loop's steps and callbacks, and the model-guided search with a stand-in cost model.

Nothing is compiled here: the builder and runner are fakes that price a config from
its knob values, so every test runs in milliseconds.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

from autotune.loop import Progress, ProgressCallback, TuneResult, TuningCallback, TuningLoop
from autotune.measure import MeasureResult, Status
from autotune.task import Task
from autotune.tuners import KnobSpace, ModelGuidedSearch, RandomTuner, SearchOptions, Tuner
from autotune.tuning import TransferWarmStart
from schedule.config import Knob, KnobSet

from test_tuners import index_features, synthetic_cost, synthetic_space, tiny_space


class FakeBuilder:
    """Passes the inputs through as "builds"; logs the step."""

    def __init__(self, log: list):
        self.log = log

    def build(self, inputs):
        self.log.append(("build", len(inputs)))
        return [inp.config for inp in inputs]


class FakeRunner:
    """Prices each config with ``cost`` (inf -> a runtime error); logs the step and the best cost it was told."""

    def __init__(self, log: list, cost=synthetic_cost):
        self.log, self.cost = log, cost
        self.best_costs: list = []

    def run(self, task, builds, best_cost=None):
        self.log.append(("run", len(builds)))
        self.best_costs.append(best_cost)
        out = []
        for config in builds:
            c = self.cost(config)
            out.append(MeasureResult(Status.OK, costs=[c]) if math.isfinite(c) else MeasureResult(Status.RUNTIME_ERROR, error="x"))
        return out


class LoggingTuner(RandomTuner):
    """A random tuner that logs when the loop asks it for a batch and when it learns."""

    def __init__(self, space, log: list, seed: int = 0):
        super().__init__(space, seed=seed)
        self.log = log

    def next_batch(self, n):
        self.log.append(("propose", n))
        return super().next_batch(n)

    def update(self, configs, results):
        self.log.append(("learn", len(configs)))
        super().update(configs, results)


class Recorder(TuningCallback):
    def __init__(self, log: list):
        self.log = log
        self.batches: list = []

    def on_start(self, loop):
        self.log.append(("on_start", len(loop.result.history)))

    def on_batch(self, loop, trials):
        self.log.append(("on_batch", len(trials)))
        self.batches.append([t.index for t in trials])

    def on_finish(self, loop):
        self.log.append(("on_finish", loop.status))


@pytest.fixture(scope="module")
def task():
    return Task("matmul", dict(M=8, N=8, K=8))  # only its identity is used: the fakes never build


def _loop(task, log, trials=10, batch_size=4, callbacks=(), tuner=None, cost=synthetic_cost, **kw):
    tuner = tuner if tuner is not None else LoggingTuner(synthetic_space(), log)
    return TuningLoop(task, tuner, FakeBuilder(log), FakeRunner(log, cost), trials=trials, batch_size=batch_size,
                      callbacks=callbacks, **kw)


def test_steps_run_in_order_and_callbacks_see_every_batch(task):
    log: list = []
    rec = Recorder(log)
    loop = _loop(task, log, trials=10, batch_size=4, callbacks=[rec])
    result = loop.run()
    batch = lambda n: [("propose", n), ("build", n), ("run", n), ("on_batch", n), ("learn", n)]  # noqa: E731
    assert log == [("on_start", 0), *batch(4), *batch(4), *batch(2), ("on_finish", "finished")]
    assert rec.batches == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    assert isinstance(result, TuneResult) and [t.index for t in result.history] == list(range(10))
    assert result.best_cost == min(synthetic_cost(t.config) for t in result.history)
    parts = ("build_s", "run_s", "db_s", "model_s", "search_s")
    assert set(result.timings) >= {*parts, "total_s"}
    assert 0.0 < sum(result.timings[k] for k in parts) <= result.timings["total_s"]  # parts of the wall time
    # the runner is told the best cost measured before each batch
    runner = loop.runner
    assert runner.best_costs[0] is None
    assert runner.best_costs[2] == min(synthetic_cost(t.config) for t in result.history[:8])


def test_on_finish_runs_after_an_error_with_status_interrupted(task):
    log: list = []

    class Boom(TuningCallback):
        def on_batch(self, loop, trials):
            raise KeyboardInterrupt

    rec = Recorder(log)
    with pytest.raises(KeyboardInterrupt):
        _loop(task, log, callbacks=[rec, Boom()]).run()
    assert log[-1] == ("on_finish", "interrupted") and rec.batches == [[0, 1, 2, 3]]


def test_progress_callback_and_early_stopping(task):
    seen: list[Progress] = []
    loop = _loop(task, [], trials=40, batch_size=4, callbacks=[ProgressCallback(seen.append)],
                 cost=lambda c: 1.0 + c.values["k0"], early_stopping=6)  # only k0 == 0 is best
    result = loop.run()
    assert [p.trials_done for p in seen] == list(range(4, len(result.history) + 1, 4))
    assert all(p.trials_total == 40 and p.errors == 0 and len(p.batch) == 4 for p in seen)
    assert seen[-1].best_gflops == result.best_gflops
    assert len(result.history) < 40 and loop.since_best >= 6  # it stopped for lack of progress


def test_the_loop_stops_when_the_space_is_exhausted(task):
    log: list = []
    result = _loop(task, log, trials=100, batch_size=8, tuner=LoggingTuner(tiny_space(), log),
                   cost=lambda c: 1.0).run()
    assert len(result.history) == 20  # every valid config of the tiny space, once


class PlainTuner(Tuner):
    """A tuner with only the required methods: the space's configs in order."""

    def next_batch(self, n):
        return self._fresh(self.space.enumerate(), n)


def test_a_tuner_without_optional_capabilities_works_in_the_loop(task):
    tuner = PlainTuner(tiny_space())
    assert not tuner.accepts_warm_start and tuner.warm_start(np.zeros((1, 2)), [1.0]) is False
    assert tuner.timings() == {"model_s": 0.0, "search_s": 0.0}

    class NoQueries:
        def records_similar(self, *a, **kw):
            raise AssertionError("transfer must not query the database for a tuner without warm_start")

    transfer = TransferWarmStart(NoQueries(), target=None, features=None, limit=10)
    result = _loop(task, [], trials=6, batch_size=3, tuner=tuner, callbacks=[transfer],
                   cost=lambda c: 1.0 + c.values["b"]).run()
    assert [t.config for t in result.history] == list(tiny_space().enumerate())[:6]
    assert result.transfer_records == 0
    assert result.timings["model_s"] == 0.0 and result.timings["search_s"] == 0.0


def test_trials_must_be_positive(task):
    with pytest.raises(ValueError, match="positive int"):
        _loop(task, [], trials=0)


# ---------------------------------------------------------------- ModelGuidedSearch with a fake model


class FakeModel:
    """A CostModel whose score is a fixed function of the features: no learning at all."""

    def __init__(self, score):
        self.score = score
        self.fitted = False
        self.fits: list[tuple[int, int]] = []
        self.warm = None

    def fit(self, features, costs, groups=None):
        self.fits.append((len(features), len(costs)))
        self.fitted = True
        return self

    def predict(self, features):
        return np.array([self.score(x) for x in np.asarray(features)], dtype=np.float64)

    def warm_start(self, features, costs, groups=None):
        self.warm = (len(features), list(costs))


def _small_space():
    """5 * 5 * 4 = 100 configs, all valid."""
    knobs = KnobSet("small", (Knob("a", tuple(range(5))), Knob("b", tuple(range(5))), Knob("c", tuple(range(4)))))
    return KnobSpace(knobs)


def _unique_score(x) -> float:
    """Highest at a=4, b=0, c=3; every config a different score."""
    return 100.0 * x[0] - 10.0 * x[1] + x[2]


def test_model_guided_search_proposes_the_best_scored_unseen_configs():
    space = _small_space()
    features = index_features(space)
    model = FakeModel(_unique_score)
    options = SearchOptions(min_train=0, eps_random=0.0, local_share=0.0, population=256, generations=1)
    search = ModelGuidedSearch(space, features, model, options=options, seed=3)
    first = search.next_batch(6)  # not fitted yet: random
    assert search.scored == 0 and len(first) == 6
    search.update(first, [1.0] * 6)
    assert model.fits == [(6, 6)]

    batch = search.next_batch(5)
    ranked = sorted((c for c in space.enumerate() if c not in first), key=lambda c: -_unique_score(features(c)))
    assert batch == ranked[:5]
    assert search.scored > 0 and search.timings()["model_s"] > 0.0
    search.update(batch, [1.0] * 5)
    assert search.next_batch(5) == ranked[5:10]  # refit, search again: the next best, never a repeat


def test_model_guided_search_keeps_an_eps_share_random_and_warm_starts():
    space = _small_space()
    features = index_features(space)
    model = FakeModel(_unique_score)
    search = ModelGuidedSearch(space, features, model, seed=0,
                               options=SearchOptions(min_train=50, eps_random=0.5, local_share=0.0))
    assert search.accepts_warm_start
    steers = search.warm_start(np.stack([features(c) for c in space.enumerate()][:10]), [1.0] * 10, ["g"] * 10)
    assert steers and model.warm == (10, [1.0] * 10) and model.fits == [(0, 0)]
    batch = search.next_batch(10)  # min_train does not apply after a warm start
    ranked = sorted(space.enumerate(), key=lambda c: -_unique_score(features(c)))
    assert batch[:5] == ranked[:5]  # the model's half; the other half is random
    assert len({c.to_json() for c in batch}) == 10


@pytest.mark.parametrize("field, value", [("eps_random", 1.5), ("local_share", -0.1), ("population", 1),
                                          ("early_batch", 0)])
def test_search_options_are_checked(field, value):
    with pytest.raises(ValueError, match=field):
        SearchOptions(**{field: value})
