"""Tuners: the contract (no repeats, exhaustion, determinism) and search quality on a
synthetic objective (cost a known function of the knob values, nothing compiled)."""
from __future__ import annotations

import math

import numpy as np
import pytest

from autotune.cost_model import XGBCostModel
from autotune.features import FEATURE_DIM, FeatureCache
from autotune.task import Task
from autotune.tuners import GATuner, GridTuner, KnobSpace, RandomTuner, SearchOptions, XGBTuner, make_tuner
from schedule.config import Knob, KnobSet

# ---------------------------------------------------------------- a synthetic objective

NK, NC = 6, 8
TARGET = (5, 2, 7, 3, 6, 1)
WEIGHT = (1.0, 2.0, 0.5, 1.5, 1.0, 3.0)


def _values(config) -> list[int]:
    return [config.values[f"k{n}"] for n in range(NK)]


def synthetic_cost(config) -> float:
    """A bowl with one interaction term; k2 == 0 always fails (cost inf)."""
    v = _values(config)
    if v[2] == 0:
        return math.inf
    return 1e-3 * (1 + sum(w * (x - t) ** 2 for w, x, t in zip(WEIGHT, v, TARGET)) + 0.5 * abs(v[0] - v[3] - 2))


def synthetic_space() -> KnobSpace:
    """8**6 = 262144 combinations; those with k0 + k1 > 12 are invalid."""
    knobs = KnobSet("synth", tuple(Knob(f"k{n}", tuple(range(NC))) for n in range(NK)))
    return KnobSpace(knobs, lambda c: "k0 + k1 > 12" if c.values["k0"] + c.values["k1"] > 12 else None)


def tiny_space() -> KnobSpace:
    """3 * 4 * 2 = 24 combinations, 4 of them invalid: 20 valid configs."""
    knobs = KnobSet("tiny", (Knob("a", (1, 2, 3)), Knob("b", (0, 1, 2, 3)), Knob("c", ("x", "y"))))
    return KnobSpace(knobs, lambda c: "a=3,b>1 not allowed" if c.values["a"] == 3 and c.values["b"] > 1 else None)


def index_features(space):
    """config -> the candidate index of each knob: a numeric encoding for any KnobSpace."""
    knobs = space.knobs.knobs
    return lambda config: np.array([k.index(config.values[k.name]) for k in knobs], dtype=np.float32)


def _xgb(space, seed, **options):
    """An XGBTuner on ``index_features`` with a one-thread model; keywords are SearchOptions."""
    return XGBTuner(space, index_features(space), seed=seed, options=SearchOptions(**options),
                    model=XGBCostModel(seed=seed, nthread=1))


MAKERS = {
    "random": lambda space, seed: RandomTuner(space, seed=seed),
    "grid": lambda space, seed: GridTuner(space, seed=seed),
    "ga": lambda space, seed: GATuner(space, seed=seed, pop_size=16),
    "xgb": lambda space, seed: _xgb(space, seed, plan_size=8, min_train=8, population=32, generations=2),
}


def _run(tuner, batches: int, batch_size: int, cost=synthetic_cost):
    """Drive a tuner; return its batches, checking the contract on the way."""
    seen: set[str] = set()
    out = []
    for _ in range(batches):
        if not tuner.has_next():
            break
        batch = tuner.next_batch(batch_size)
        for c in batch:
            assert tuner.space.check(c) is None, c
            assert c.to_json() not in seen, f"repeated {c}"
            seen.add(c.to_json())
        out.append([c.to_json() for c in batch])
        tuner.update(batch, [cost(c) for c in batch])
    return out


# ---------------------------------------------------------------- the contract


@pytest.mark.parametrize("name", list(MAKERS))
def test_never_repeats_and_is_deterministic(name):
    a = _run(MAKERS[name](synthetic_space(), 3), batches=4, batch_size=12)
    b = _run(MAKERS[name](synthetic_space(), 3), batches=4, batch_size=12)
    assert a == b
    assert all(len(batch) == 12 for batch in a)
    if name != "grid":
        c = _run(MAKERS[name](synthetic_space(), 4), batches=1, batch_size=12)
        assert c[0] != a[0]  # the seed matters


@pytest.mark.parametrize("name", list(MAKERS))
def test_exhausts_a_tiny_space(name):
    space = tiny_space()
    tuner = MAKERS[name](space, 0)
    cost = lambda c: 1.0 + c.values["a"] + c.values["b"]  # noqa: E731
    got: list = []
    while tuner.has_next():
        batch = tuner.next_batch(7)
        assert batch, "has_next() said yes but the batch is empty"
        assert len(batch) == 7 or not tuner.has_next()
        got += batch
        tuner.update(batch, [cost(c) for c in batch])
    assert len(got) == len({c.to_json() for c in got}) == 20
    assert tuner.next_batch(5) == []
    assert tuner.best_cost == 2.0


def test_update_with_configs_never_proposed_counts_them_as_measured():
    space = tiny_space()
    valid = list(space.enumerate())
    for name in MAKERS:
        tuner = MAKERS[name](space, 0)
        tuner.update(valid[:15], [1.0] * 15)  # e.g. replayed from the database
        rest = tuner.next_batch(10)
        assert {c.to_json() for c in rest} == {c.to_json() for c in valid[15:]}, name
        assert not tuner.has_next()


def test_grid_walks_the_enumeration_in_order():
    space = tiny_space()
    tuner = GridTuner(space)
    assert tuner.next_batch(5) == list(space.enumerate())[:5]


def test_failures_and_plain_numbers_are_accepted():
    tuner = RandomTuner(synthetic_space(), seed=0)
    batch = tuner.next_batch(3)

    class Failed:
        cost = math.inf

    tuner.update(batch, [Failed(), 2.0, float("nan")])
    assert tuner.best_cost == 2.0 and tuner.best_config == batch[1]
    with pytest.raises(ValueError, match="3 configs but 2 results"):
        tuner.update(batch, [1.0, 2.0])


def test_make_tuner():
    space = synthetic_space()
    assert isinstance(make_tuner("random", space), RandomTuner)
    assert isinstance(make_tuner("grid", space), GridTuner)
    assert isinstance(make_tuner("ga", space, seed=2, pop_size=8), GATuner)
    assert isinstance(make_tuner("xgb", space, feature_fn=index_features(space)), XGBTuner)
    with pytest.raises(ValueError, match="unknown tuner 'beam'; choose one of random, grid, ga, xgb"):
        make_tuner("beam", space)
    with pytest.raises(ValueError, match="needs feature_fn"):
        make_tuner("xgb", space)


def test_a_bare_knobset_is_a_space():
    knobs = KnobSet("k", (Knob("a", (1, 2, 3)), Knob("b", (1, 2))))
    tuner = RandomTuner(knobs, seed=0)
    assert len(tuner.next_batch(10)) == 6 and not tuner.has_next()


# ---------------------------------------------------------------- search quality


def _best_after(make, seeds, batches=8, batch_size=16) -> list[float]:
    out = []
    for seed in seeds:
        tuner = make(synthetic_space(), seed)
        _run(tuner, batches, batch_size)
        out.append(tuner.best_cost)
    return out


SEEDS = range(5)


def test_ga_beats_random_on_average():
    rand = _best_after(lambda s, seed: RandomTuner(s, seed=seed), SEEDS)
    ga = _best_after(lambda s, seed: GATuner(s, seed=seed, pop_size=32), SEEDS)
    assert np.mean(ga) < 0.85 * np.mean(rand), (ga, rand)


def test_xgb_beats_random_and_reports_its_costs():
    rand = _best_after(lambda s, seed: RandomTuner(s, seed=seed), SEEDS)
    tuners = []

    def make(space, seed):
        tuners.append(_xgb(space, seed, plan_size=16, min_train=16, population=64, generations=3))
        return tuners[-1]

    xgb = _best_after(make, SEEDS)
    assert np.mean(xgb) < 0.5 * np.mean(rand), (xgb, rand)
    t = tuners[0]
    assert t.fits == 8 and t.model.fitted
    # population * (generations + 1) evolved + local_parents * local_children neighbours
    assert 0 < t.last_scored <= 64 * 4 + 8 * 16 and t.scored >= t.last_scored
    assert t.model_s > 0 and t.search_s > 0 and t.feature_s > 0


def test_xgb_is_random_until_min_train_then_keeps_an_eps_share_random():
    tuner = _xgb(synthetic_space(), 0, plan_size=20, min_train=20, population=32, generations=1, eps_random=0.25)
    asked = []
    random_fresh = tuner._random_fresh
    tuner._random_fresh = lambda n: asked.append(n) or random_fresh(n)
    _run(tuner, batches=1, batch_size=20)
    assert asked == [20] and tuner.scored == 0  # nothing to learn from yet: all random
    batch = tuner.next_batch(20)
    assert len(batch) == 20 and tuner.scored > 0
    assert asked[1:] == [5]  # 15 from the model's plan, 5 random


def test_xgb_with_real_features_on_a_small_matmul():
    """The tune loop's wiring, without building: FeatureCache features, a cost from the knobs."""
    task = Task("matmul", dict(M=32, N=32, K=32))
    cache = FeatureCache()

    def cost(config):  # prefer wide vector tiles and a deeper unroll: any order will do
        tile_j = config.values["C.tile.j"]
        return 1e-3 / (1 + tile_j[2]) + 1e-5 * (256 - config.values["C.unroll"])

    tuner = make_tuner("xgb", task.space, seed=0, feature_fn=cache.feature_fn(task),
                       options=SearchOptions(plan_size=8, min_train=8, population=24, generations=1),
                       model=XGBCostModel(seed=0, nthread=1))
    batches = _run(tuner, batches=3, batch_size=8, cost=cost)
    assert sum(map(len, batches)) == 24
    assert tuner.model.fitted and tuner.scored > 0
    assert cache.misses >= 24 and cache.hits > 0  # measured configs were scored before
    x = cache.get(task, tuner.best_config)
    assert x.shape == (FEATURE_DIM,)


def test_xgb_warm_start_guides_the_first_batch():
    """Records of a 'similar workload' (same objective, other seed) steer the first batch."""
    space = synthetic_space()
    features = index_features(space)
    rng_tuner = RandomTuner(space, seed=11)
    history = rng_tuner.next_batch(200)
    tuner = _xgb(space, 0, plan_size=16, min_train=0, population=64, generations=2)
    tuner.warm_start(np.stack([features(c) for c in history]), [synthetic_cost(c) * 10 for c in history])
    assert tuner.model.fitted and tuner.fits == 1
    guided = [synthetic_cost(c) for c in tuner.next_batch(16)]
    blind = [synthetic_cost(c) for c in RandomTuner(space, seed=0).next_batch(16)]
    assert tuner.scored > 0 and np.median(guided) < np.median(blind)


def test_xgb_asks_for_smaller_batches_while_it_has_few_measurements():
    tuner = _xgb(synthetic_space(), 0, early_batch=8, early_trials=16)
    assert tuner.batch_size(64) == 8 and tuner.batch_size(4) == 4
    _run(tuner, batches=2, batch_size=8)
    assert len(tuner.history) == 16 and tuner.batch_size(64) == 64
    assert RandomTuner(synthetic_space()).batch_size(64) == 64


def test_xgb_plan_has_a_share_of_neighbours_of_the_fastest_measured():
    """The trust region: half of the plan are one- or two-step neighbours of measured configs."""
    space = synthetic_space()
    tuner = _xgb(space, 1, plan_size=16, min_train=16, population=32, generations=1,
                 local_share=0.5, local_parents=4, local_children=8)
    _run(tuner, batches=1, batch_size=16)
    parents = [c for c, _ in tuner.measured(finite_only=True)[:4]]

    def steps(a, b):  # knob indices changed, and by how much (candidates are 0..7 in order)
        return sum(abs(a.values[k] - b.values[k]) for k in a.values)

    plan = tuner._search(16)
    assert len(plan) == 16 and not any(tuner.visited(c) for c in plan)
    near = [c for c in plan if min(steps(c, p) for p in parents) <= 2]
    assert len(near) >= 8, [min(steps(c, p) for p in parents) for c in plan]
    # The first half of the plan alternates: neighbours are not pushed to the back.
    assert sum(min(steps(c, p) for p in parents) <= 2 for c in plan[:8]) >= 4


def test_xgb_scores_a_small_space_whole_and_plans_its_best():
    space = synthetic_space()  # 262144 combinations: searched, not scored whole
    searched = _xgb(space, 0, plan_size=16, min_train=16, population=16, generations=1, exhaustive=4096)
    _run(searched, batches=1, batch_size=16)
    searched._search(16)
    assert searched.last_scored < 1000

    small = tiny_space()  # 24 combinations, 20 valid
    tuner = _xgb(small, 0, plan_size=4, min_train=6, exhaustive=24)
    _run(tuner, batches=1, batch_size=6, cost=lambda c: 1e-3 * (c.values["a"] + c.values["b"]))
    plan = tuner._search(4)
    rest = [c for c in small.enumerate() if not tuner.visited(c)]
    assert tuner.last_scored == len(rest) == 14, "every unvisited valid config scored, nothing else"
    scores = tuner.model.predict(np.stack([index_features(small)(c) for c in rest]))
    best = [rest[i] for i in np.argsort(-scores, kind="stable")[:4]]
    assert plan == best


def test_between_full_searches_a_retrain_rescores_the_last_searchs_candidates():
    space = synthetic_space()
    features = index_features(space)
    tuner = _xgb(space, 2, plan_size=8, min_train=16, population=32, generations=2, early_batch=8,
                 early_trials=64, local_share=0.0, local_parents=0, full_search_every=24,
                 eps_random=0.0)

    def step():  # one batch proposed and measured
        batch = tuner.next_batch(8)
        tuner.update(batch, [synthetic_cost(c) for c in batch])
        return batch

    step(), step()                              # 16 random trials
    step()                                      # the first full search, at 16 trials
    full, pool = tuner.last_scored, list(tuner._pool)
    assert tuner._pool_at == 16 and full > 64
    unvisited = [c for c in pool if not tuner.visited(c)]
    scores = tuner.model.predict(np.stack([features(c) for c in unvisited]))  # the model after 24 trials
    batch = step()                              # 24 - 16 < 24: rescored, not searched
    assert tuner._pool_at == 16 and tuner.last_scored == len(unvisited) < full
    assert batch == [unvisited[i] for i in np.argsort(-scores, kind="stable")[:8]]
    step(), step()                              # 32 and 40 trials: 40 - 16 >= 24, a full search again
    assert tuner._pool_at == 40 and tuner.last_scored > len(unvisited)


def test_interleave_keeps_the_share_and_drops_duplicates():
    from autotune.tuners.model_guided import _interleave

    space = synthetic_space()
    configs = RandomTuner(space, seed=4).next_batch(12)
    local, ranked = configs[:6], configs[6:] + configs[:2]
    out = _interleave(local, ranked, 0.5, 10)
    assert len(out) == 10 and len({c.to_json() for c in out}) == 10
    assert [c in local for c in out[:6]] == [True, False, True, False, True, False]
    assert _interleave(local, ranked, 0.0, 4) == ranked[:4]
    assert _interleave(local, [], 0.0, 3) == local[:3]  # the other list ran out
