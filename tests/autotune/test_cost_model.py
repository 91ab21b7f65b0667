"""The XGBoost cost model and TenSet's ranking metrics."""
from __future__ import annotations

import math

import numpy as np
import pytest

from autotune.cost_model import (
    XGBCostModel, depth_for, evaluate_holdout, learning_curve, pairwise_accuracy, relevance, top_k_recall,
    top_k_score,
)


def _synthetic(n: int, seed: int = 0, d: int = 20):
    """Costs a known (non-linear) function of three of ``d`` features."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(0, 8, size=(n, d)).astype(np.float32)
    cost = 1e-3 * (1 + (x[:, 0] - 3) ** 2 + 0.5 * x[:, 1] + np.sqrt(x[:, 2]))
    return x, cost


# ---------------------------------------------------------------- metrics


def test_pairwise_accuracy_perfect_reversed_and_ties():
    costs = np.array([1.0, 2.0, 3.0, 4.0])
    assert pairwise_accuracy(-costs, costs) == 1.0
    assert pairwise_accuracy(costs, costs) == 0.0
    assert pairwise_accuracy(np.zeros(4), costs) == 0.5  # score ties count half
    # failures are the slowest; two failures tie and are not a pair
    costs = np.array([1.0, math.inf, math.inf])
    assert pairwise_accuracy([3.0, 2.0, 1.0], costs) == 1.0
    assert pairwise_accuracy([1.0, 2.0, 3.0], costs) == 0.0
    assert math.isnan(pairwise_accuracy([1.0, 2.0], [1.0, 1.0]))


def test_top_k_recall_counts_the_fastest_the_model_puts_at_its_top():
    costs = np.array([1.0, 2.0, 3.0, 4.0, 5.0, math.inf])
    assert top_k_recall(-costs[:5], costs[:5], 2) == 1.0
    assert top_k_recall(costs[:5], costs[:5], 2) == 0.0            # the two slowest picked
    assert top_k_recall([5, 1, 4, 0, 0, 9], costs, 3) == pytest.approx(2 / 3)   # picks 5 (failed), 0, 2
    assert top_k_recall([0, 0, 0, 0, 0, 1], costs, 10) == 4 / 5   # k capped at the 5 successes
    assert math.isnan(top_k_recall([1.0, 2.0], [math.inf, math.inf], 1))
    with pytest.raises(ValueError, match="length"):
        top_k_recall([1.0], [1.0, 2.0], 1)


def test_pairwise_accuracy_counts_only_pairs_apart_when_asked():
    costs = np.array([1.0, 1.02, 2.0])
    scores = np.array([1.0, 2.0, 0.0])  # the close pair misordered, both pairs with 2.0 right
    assert pairwise_accuracy(scores, costs) == pytest.approx(2 / 3)
    assert pairwise_accuracy(scores, costs, apart=0.03) == 1.0
    assert math.isnan(pairwise_accuracy(scores, costs, apart=1.5))


def test_pairwise_accuracy_chunked_equals_plain():
    rng = np.random.default_rng(0)
    s, c = rng.normal(size=300), rng.uniform(1, 2, size=300)
    assert pairwise_accuracy(s, c, chunk=7) == pytest.approx(pairwise_accuracy(s, c))


def test_top_k_score():
    costs = np.array([4.0, 1.0, 2.0, math.inf])
    assert top_k_score([0, 9, 5, 1], costs, 1) == 1.0        # top-1 is the fastest
    assert top_k_score([9, 0, 5, 1], costs, 1) == 0.25       # picked 4 s, best is 1 s
    assert top_k_score([9, 0, 5, 1], costs, 2) == 0.5        # best of top-2 is 2 s
    assert top_k_score([0, 1, 2, 9], costs, 1) == 0.0        # picked a failure
    assert top_k_score([9, 0, 5, 1], costs, 10) == 1.0
    assert math.isnan(top_k_score([1, 2], [math.inf, math.inf], 1))


def test_relevance_is_normalized_throughput_per_group():
    rel = relevance([2.0, 4.0, math.inf, 10.0, 5.0], groups=[0, 0, 0, 1, 1])
    assert rel == pytest.approx([1.0, 0.5, 0.0, 0.5, 1.0])


# ---------------------------------------------------------------- the model


def test_the_regression_fits_the_square_root_of_the_normalized_throughput():
    """Costs 1, 4 and 16 s: relevance 1, 0.25, 0.0625; the regression's labels 1, 0.5, 0.25
    (the square root spreads the slow configs apart, ``XGBCostModel``), which a model that
    fits its records exactly predicts back."""
    x = np.array([[0.0], [1.0], [2.0]] * 8, dtype=np.float32)
    model = XGBCostModel(num_rounds=200, max_depth=2, learning_rate=0.3, nthread=1).fit(x, np.array([1.0, 4.0, 16.0] * 8))
    assert model.predict(x[:3]) == pytest.approx([1.0, 0.5, 0.25], abs=0.01)


@pytest.mark.parametrize("objective,min_accuracy", [
    ("rank:pairwise", 0.9),
    ("reg:squarederror", 0.9),
    ("rank:ndcg", 0.5),  # ndcg cares about the top only: integer labels tie the slow majority
])
def test_model_learns_a_known_ranking(objective, min_accuracy):
    x, cost = _synthetic(600, seed=1)
    xt, ct = _synthetic(300, seed=2)
    model = XGBCostModel(seed=0, objective=objective, nthread=1).fit(x, cost)
    assert model.fitted
    scores = model.predict(xt)
    assert pairwise_accuracy(scores, ct) > min_accuracy
    assert top_k_score(scores, ct, 10) > 0.9


def test_holdout_accuracy_above_0_9_with_failures():
    x, cost = _synthetic(800, seed=3)
    cost[x[:, 4] > 7] = math.inf  # failures the features can explain (an 8th of them)
    out = evaluate_holdout(x, cost, test_fraction=0.25, seed=0, nthread=1)
    assert out["n_test"] == 200 and out["n_train"] == 600
    assert out["pairwise_accuracy"] > 0.9, out
    assert out["top1"] > 0.5 and out["top5"] > 0.8 and out["top5"] >= out["top1"]
    assert 0.3 < out["recall10"] <= 1.0, out


def test_learning_curve_rises_with_records_and_skips_sizes_beyond_the_training_part():
    x, cost = _synthetic(1000, seed=6)
    rng = np.random.default_rng(7)
    cost *= rng.lognormal(0.0, 0.1, len(cost))  # noise, so that a few records do not suffice
    curve = learning_curve(x, cost, [20, 800, 60, 801, 5000], test_fraction=0.2, splits=2, nthread=1)
    assert list(curve) == [20, 60, 800]  # sorted; 801 and 5000 exceed the 800 records left to train on
    assert curve[20] < curve[60] < curve[800], curve
    assert curve[800] > 0.8, curve
    with pytest.raises(ValueError, match="test_fraction"):
        learning_curve(x, cost, [20], test_fraction=1.0)


def test_failures_rank_last():
    x, cost = _synthetic(400, seed=4)
    bad = x[:, 3] > 6  # a feature that marks failures
    cost[bad] = math.inf
    model = XGBCostModel(seed=0, nthread=1).fit(x, cost)
    xt, ct = _synthetic(200, seed=5)
    ct[xt[:, 3] > 6] = math.inf
    scores = model.predict(xt)
    assert scores[np.isinf(ct)].mean() < scores[np.isfinite(ct)].mean()


def test_deterministic():
    x, cost = _synthetic(1000, seed=6, d=280)
    a = XGBCostModel(seed=0, nthread=1).fit(x, cost).predict(x[:50])
    b = XGBCostModel(seed=0, nthread=1).fit(x, cost).predict(x[:50])
    assert np.array_equal(a, b)


def test_unfitted_until_there_is_an_order_to_learn():
    x, _ = _synthetic(10)
    model = XGBCostModel()
    assert not model.fitted
    with pytest.raises(RuntimeError, match="before a successful fit"):
        model.predict(x)
    model.fit(x, np.full(10, math.inf))  # all failed: nothing to rank
    assert not model.fitted
    model.fit(x[:2], [1.0, 2.0])
    assert model.fitted and model.predict(x).shape == (10,)


def test_groups_and_warm_start():
    x1, c1 = _synthetic(300, seed=7)
    x2, c2 = _synthetic(300, seed=8)
    c2 = c2 * 1000  # another workload: a thousand times slower, same order
    model = XGBCostModel(seed=0, nthread=1)
    model.warm_start(x2, c2)
    model.fit(x1[:20], c1[:20])  # few own records; the warm-start ones carry the model
    xt, ct = _synthetic(200, seed=9)
    assert pairwise_accuracy(model.predict(xt), ct) > 0.8
    grouped = XGBCostModel(seed=0, nthread=1).fit(np.vstack([x1, x2]), np.concatenate([c1, c2]),
                                                  groups=["a"] * 300 + ["b"] * 300)
    assert pairwise_accuracy(grouped.predict(xt), ct) > 0.9


def test_warm_weight_caps_what_the_warm_start_records_weigh():
    """Warm-start records that teach the opposite order: uncapped, 600 of them outweigh 200
    own records; capped at a weight of 2 in all, the own records decide."""
    x_own, c_own = _synthetic(200, seed=3)
    x_warm, c_warm = _synthetic(600, seed=4)
    xt, ct = _synthetic(200, seed=5)
    accuracy = {}
    for cap in (None, 2.0):
        model = XGBCostModel(seed=0, nthread=1, warm_weight=cap)
        model.warm_start(x_warm, 1.0 / c_warm)  # the slowest there are the fastest here
        model.fit(x_own, c_own)
        accuracy[cap] = pairwise_accuracy(model.predict(xt), ct)
    assert accuracy[2.0] > 0.8 > accuracy[None]
    with pytest.raises(ValueError, match="warm_weight must be positive"):
        XGBCostModel(warm_weight=0)


def _tree_depth(model: XGBCostModel) -> int:
    """The deepest split of the fitted booster (a leaf one level below its deepest split)."""
    depths = [line.count("\t") for tree in model.booster.get_dump() for line in tree.splitlines()
              if "[" in line]  # split lines name a feature test; leaves do not
    return max(depths) + 1


def test_depth_grows_with_the_records_a_fit_sees():
    assert [depth_for(n) for n in (1, 16, 63, 64, 255, 256, 1023, 1024, 10**6)] == [2, 2, 2, 3, 3, 4, 4, 5, 5]
    x, cost = _synthetic(2000)
    for n, most in ((32, 2), (128, 3), (2000, 5)):
        model = XGBCostModel(seed=0).fit(x[:n], cost[:n])
        assert 1 <= _tree_depth(model) <= most
    assert _tree_depth(XGBCostModel(seed=0).fit(x, cost)) == 5  # enough records fill depth 5
    assert _tree_depth(XGBCostModel(seed=0, max_depth=4).fit(x[:32], cost[:32])) >= 3  # a fixed depth holds
    # warm-start records count: 32 own and 900 warm records train depth 4, not 2
    warm = XGBCostModel(seed=0)
    warm.warm_start(x[1100:], cost[1100:])
    assert _tree_depth(warm.fit(x[:32], cost[:32])) == 4


def test_bad_inputs():
    with pytest.raises(ValueError, match="unknown objective"):
        XGBCostModel(objective="rank:map")
    with pytest.raises(ValueError, match="max_depth"):
        XGBCostModel(max_depth=0)
    with pytest.raises(ValueError, match="one cost per row"):
        XGBCostModel().fit(np.zeros((3, 2)), [1.0, 2.0])
