"""The XGBoost cost model: rank schedules by predicted speed, and measure how well it ranks.

    model = XGBCostModel(seed=0)         # a CostModel (the protocol a search reads)
    model.fit(features, costs)           # costs in seconds, inf for failed trials
    scores = model.predict(candidates)   # higher = predicted faster
    evaluate_holdout(features, costs)    # {"pairwise_accuracy": ..., "top1": ..., "top5": ..., "recall10": ...}
    learning_curve(features, costs, [250, 500, 1000])   # {records trained on: pairwise accuracy}

The model learns an order, not a time: the search only asks "which of these is
faster", and a ranking target is free of the scale of each workload's times, so one
model can train on records of several workloads (one query group per workload). The
quality metrics are TenSet's, pairwise ranking accuracy and top-k score on held-out
records, and top-k recall: how many of the truly fastest the model ranks at its top.
"""
from __future__ import annotations

import math
import os
from typing import Protocol

import numpy as np


def _xgboost():
    """Import XGBoost on first use (it takes seconds; the measuring process never needs it)."""
    import xgboost as xgb

    if tuple(int(p) for p in xgb.__version__.split(".")[:2] if p.isdigit()) < (2, 0):
        raise ImportError(
            f"autotune.cost_model needs xgboost >= 2.0 (its learning-to-rank objectives were rewritten "
            f"in 2.0 and the parameters used here do not exist before); found {xgb.__version__}"
        )
    return xgb


#: Objectives the model accepts: two ranking objectives and plain regression.
OBJECTIVES = ("rank:pairwise", "rank:ndcg", "reg:squarederror")
#: Largest integer relevance for rank:ndcg (xgboost's exponential gain needs labels < 32).
NDCG_LEVELS = 31


def default_nthread() -> int:
    """2 threads, but at most half of the CPUs available to this process (at least 1)."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    return max(1, min(2, cpus // 2))


def regression_label(rel: np.ndarray) -> np.ndarray:
    """What the regression objective fits: the square root of the relevance (see
    ``XGBCostModel``; monotonic, so the order of the records is the relevance's)."""
    return np.sqrt(rel)


def relevance(costs, groups=None) -> np.ndarray:
    """Normalized throughput per record: ``min_cost_of_its_group / cost`` in (0, 1]; failures 0."""
    costs = np.asarray(costs, dtype=np.float64)
    groups = np.zeros(len(costs), dtype=np.int64) if groups is None else np.asarray(groups)
    rel = np.zeros(len(costs))
    ok = np.isfinite(costs) & (costs > 0)
    for g in np.unique(groups):
        m = (groups == g) & ok
        if m.any():
            rel[m] = costs[m].min() / costs[m]
    return rel


class CostModel(Protocol):
    """What a model-guided search needs of a cost model (AutoTVM's ``CostModel``).

    ``fit(features, costs, groups=None)``
        Train from scratch on ``features`` (n, d) and ``costs`` (seconds; ``inf`` for
        failed trials), plus any warm-start records. ``groups`` (one id per record)
        splits them into query groups whose costs are never compared with each other.
        A fit with nothing to learn (one distinct cost) leaves the model unfitted.
    ``predict(features) -> np.ndarray``
        One score per row, higher = predicted faster; only when ``fitted``.
    ``warm_start(features, costs, groups=None)``
        Records of other workloads that join every later ``fit`` as extra groups.
    ``fitted``
        Whether ``predict`` may be called.

    Scores only order candidates: a search never reads them as times.
    """

    @property
    def fitted(self) -> bool: ...

    def fit(self, features, costs, groups=None) -> "CostModel": ...

    def predict(self, features) -> np.ndarray: ...

    def warm_start(self, features, costs, groups=None) -> None: ...


class XGBCostModel:
    """Gradient-boosted trees that score loop-nest features; higher score = faster (a ``CostModel``).

    Objective (chosen deliberately, checked against xgboost 3.2):

    - ``reg:squarederror`` (default): regression on the square root of the relevance,
      the normalized throughput ``min_cost / cost`` of the query group (failures 0;
      ``regression_label``). On the relevance itself slow configs all sit near 0 and the
      fast ones spread over the top of the range, so the squared error is spent where
      the search looks: replayed over four recorded spaces, the tuner reached 0.95x of
      the optimum in fewer trials with it than with ``rank:pairwise`` on three of them,
      and on dense+bias+relu (whose fastest configs pairwise ranking placed among the
      middle) in about half as many (``bench/RESULTS.md``, "Search strategies on
      recorded spaces"). The square root keeps that order and spreads the middle of the
      range a little: held-out pairwise accuracy rose by 0.01-0.02 on all five
      recordings, and replayed with 20 seeds the tuner reached 0.95x of the optimum in
      15-25 % fewer trials on each recorded space (``bench/RESULTS.md``, "The model's
      label"); a logarithm spreads the slow configs further and lost the fast ones on
      matmul.
    - ``rank:pairwise``: LambdaMART with the RankNet loss on pairs of records
      of the same query group. It only compares labels, so the label can be the
      continuous normalized throughput ``min_cost / cost`` (failures 0) with no
      rounding. xgboost >= 2.0 samples pairs per document; ``lambdarank_pair_method
      ="mean"`` with ``pairs_per_sample`` random partners each keeps the cost linear in
      the number of records (the default "topk" method only pairs the currently
      top-ranked few with the rest and, with one big group, orders the rest poorly).
      32 partners rank held-out records better than 8 for a modestly longer fit
      (``bench/RESULTS.md``).
      It orders the whole population well (held-out pairwise accuracy) but spends as
      much on pairs of slow configs as on the few fast ones.
    - ``rank:ndcg``: its gain ``2**label - 1`` needs integer labels (and < 32), so the
      throughput is quantized to 0..31; coarser, and failures/slow records tie.

    Ranking hessians are small (a sigmoid's slope summed over sampled pairs), so
    ``min_child_weight`` defaults to 0 for the ranking objectives; xgboost's default
    of 1 blocks most splits and leaves shallow, useless trees.

    Depth grows with the records (``max_depth=None``, the default; ``depth_for``): 2
    levels below 64 records, 3 below 256, 4 below 1024, then 5. A deep tree fitted on
    the 16-32 records of a run's first batches splits on noise, and its top-scored
    configs are a random corner of the space; shallow trees generalize from few
    records, deep ones order many better (held-out pairwise accuracy on 2400 records
    of a recording: depth 5 above depth 2 on every recorded workload). Replayed over
    the recordings, the adaptive depth reached 0.95x of the optimum in fewer trials
    than a fixed depth 5 on each workload (``bench/RESULTS.md``). A given
    ``max_depth`` fixes the depth.

    Speed: depth 5 at most, 64 histogram bins and ``num_rounds=50`` keep a fit on a
    thousand records well under a second, small next to one batch's measurements.
    Threads: ``nthread`` defaults to 2, but never more than half the CPUs this process
    may use (so 1 on a 2-core machine): the tuner fits while builders and the runner
    keep cores busy, and xgboost's OpenMP threads spin-wait, so an oversubscribed fit
    is many times slower than a one-thread fit (``bench/RESULTS.md``).
    Training is deterministic for a given seed and thread count.
    """

    def __init__(self, seed: int = 0, objective: str = "reg:squarederror", num_rounds: int = 50,
                 max_depth: int | None = None, learning_rate: float = 0.2, nthread: int | None = None,
                 pairs_per_sample: int = 32, min_child_weight: float | None = None, max_bin: int = 64,
                 warm_weight: float | None = None):
        if objective not in OBJECTIVES:
            raise ValueError(f"unknown objective {objective!r}; use one of {', '.join(OBJECTIVES)}")
        self.seed = seed
        self.objective = objective
        self.num_rounds = num_rounds
        if max_depth is not None and not (isinstance(max_depth, int) and max_depth >= 1):
            raise ValueError(f"max_depth must be a positive integer (or None: by the records), got {max_depth!r}")
        self.max_depth = max_depth
        ranking = objective.startswith("rank:")
        self.params = {
            "objective": objective,
            "eta": learning_rate,
            "nthread": default_nthread() if nthread is None else nthread,
            "seed": seed,
            "tree_method": "hist",
            "max_bin": max_bin,
            "min_child_weight": (0.0 if ranking else 1.0) if min_child_weight is None else min_child_weight,
            "verbosity": 0,
        }
        if ranking:
            self.params.update(lambdarank_pair_method="mean", lambdarank_num_pair_per_sample=pairs_per_sample)
        if warm_weight is not None and not warm_weight > 0:
            raise ValueError(f"warm_weight must be positive (or None), got {warm_weight!r}")
        self.warm_weight = warm_weight
        self.booster = None  # an xgboost.Booster once fitted
        self._warm_x: np.ndarray | None = None
        self._warm_costs: np.ndarray | None = None
        self._warm_groups: np.ndarray | None = None

    @property
    def fitted(self) -> bool:
        return self.booster is not None

    # ------------------------------------------------------------ training

    def warm_start(self, features, costs, groups=None) -> None:
        """Records of other workloads to train on too (each group is normalized alone).

        They join every later ``fit`` as extra query groups, so they shape the
        ranking without their times being compared with this task's.
        """
        x, c = _check_xy(features, costs)
        g = np.zeros(len(c), dtype=np.int64) if groups is None else _dense_groups(groups)
        self._warm_x, self._warm_costs, self._warm_groups = x, c, g

    def fit(self, features, costs, groups=None) -> "XGBCostModel":
        """Train from scratch on (features, costs) plus any warm-start records.

        ``costs`` are seconds, ``inf`` (or nan) for failed trials. ``groups`` (optional,
        one id per record) splits the records into query groups, e.g. one per task;
        by default all records form one group. With fewer than two distinct
        relevances there is nothing to rank and the model stays (or becomes) unfitted.
        """
        x, c = _check_xy(features, costs)
        g = np.zeros(len(c), dtype=np.int64) if groups is None else _dense_groups(groups)
        w = np.ones(len(c))
        if self._warm_x is not None:
            x = np.concatenate([x, self._warm_x])
            c = np.concatenate([c, self._warm_costs])
            g = np.concatenate([g, self._warm_groups + g.max(initial=-1) + 1])
            w = np.concatenate([w, np.full(len(self._warm_costs), self._warm_record_weight())])
        rel = relevance(c, g)
        if len(np.unique(rel)) < 2:
            self.booster = None
            return self
        order = np.argsort(g, kind="stable")  # xgboost wants each query group contiguous
        x, rel, g, w = x[order], rel[order], g[order], w[order]
        ranking = self.objective.startswith("rank:")  # xgboost weighs ranking groups, not records
        if self.objective == "rank:ndcg":
            label = np.round(rel * NDCG_LEVELS)
        else:
            label = rel if ranking else regression_label(rel)
        xgb = _xgboost()
        dtrain = xgb.DMatrix(x, label=label, weight=None if ranking else w, nthread=self.params["nthread"])
        if ranking:
            dtrain.set_group(np.unique(g, return_counts=True)[1])
        params = dict(self.params, max_depth=self.max_depth or depth_for(len(rel)))
        self.booster = xgb.train(params, dtrain, num_boost_round=self.num_rounds)
        return self

    def _warm_record_weight(self) -> float:
        """Each warm-start record's weight: 1, or with ``warm_weight`` that total shared
        among them (at most 1 each), so the task's own records outweigh them once more
        than ``warm_weight`` were measured."""
        if self.warm_weight is None:
            return 1.0
        return min(1.0, self.warm_weight / max(1, len(self._warm_costs)))

    # ------------------------------------------------------------ inference

    def predict(self, features) -> np.ndarray:
        """Scores, one per row of ``features``; higher means predicted faster."""
        if self.booster is None:
            raise RuntimeError("XGBCostModel.predict before a successful fit (check .fitted)")
        x = np.asarray(features, dtype=np.float32)
        if x.ndim != 2:
            raise ValueError(f"features must be a 2-d array (n, d), got shape {x.shape}")
        if len(x) == 0:
            return np.zeros(0)
        return np.asarray(self.booster.inplace_predict(x), dtype=np.float64)


def depth_for(n_records: int) -> int:
    """The tree depth for a fit on ``n_records`` (warm-start records included): one level
    per factor of 4 in records, 2 to 5 (2 below 64, 3 below 256, 4 below 1024, then 5)."""
    return int(min(5, max(2, math.floor(math.log2(max(1, n_records)) / 2))))


def _check_xy(features, costs) -> tuple[np.ndarray, np.ndarray]:
    x = np.asarray(features, dtype=np.float32)
    c = np.asarray(costs, dtype=np.float64).copy()
    if x.ndim != 2 or len(x) != len(c):
        raise ValueError(f"features must be (n, d) with one cost per row; got {x.shape} and {c.shape}")
    c[~np.isfinite(c) | (c <= 0)] = np.inf
    return x, c


def _dense_groups(groups) -> np.ndarray:
    """Any hashable group labels -> 0..k-1 in order of first appearance."""
    ids: dict = {}
    return np.array([ids.setdefault(g, len(ids)) for g in groups], dtype=np.int64)


# ---------------------------------------------------------------- metrics (TenSet's, and top-k recall)


def _clean_costs(costs) -> np.ndarray:
    c = np.asarray(costs, dtype=np.float64).copy()
    c[~np.isfinite(c) | (c <= 0)] = np.inf
    return c


def pairwise_accuracy(scores, costs, chunk: int = 2048, apart: float = 0.0) -> float:
    """Fraction of pairs with different true costs that the scores order correctly.

    Failures (inf) count as the slowest; pairs of two failures tie and are skipped.
    A pair the scores tie counts half. ``apart``: only pairs whose costs differ by more
    than that share of the smaller count (closer ones can be within the costs' own
    noise). nan when no pair counts.
    """
    s = np.asarray(scores, dtype=np.float64)
    c = _clean_costs(costs)
    if len(s) != len(c):
        raise ValueError("scores and costs differ in length")
    correct = total = 0.0
    for lo in range(0, len(s), chunk):
        ds = s[lo:lo + chunk, None] - s[None, :]       # > 0: row predicted faster
        faster = c[lo:lo + chunk, None] * (1.0 + apart) < c[None, :]   # row truly faster
        slower = c[lo:lo + chunk, None] > c[None, :] * (1.0 + apart)
        total += faster.sum() + slower.sum()
        correct += ((ds > 0) & faster).sum() + ((ds < 0) & slower).sum()
        correct += 0.5 * ((ds == 0) & (faster | slower)).sum()
    return float(correct / total) if total else math.nan


def top_k_score(scores, costs, k: int) -> float:
    """Best true throughput among the model's top-k, over the best throughput overall.

    1.0 when the model's top-k contains the fastest record; 0.0 when all of them
    failed; nan when every record failed (nothing to find).
    """
    s = np.asarray(scores, dtype=np.float64)
    c = _clean_costs(costs)
    if not np.isfinite(c).any():
        return math.nan
    top = np.argsort(-s, kind="stable")[:max(1, k)]
    best_top = c[top].min()
    return float(c.min() / best_top) if np.isfinite(best_top) else 0.0


def top_k_recall(scores, costs, k: int) -> float:
    """Share of the ``k`` truly fastest records that the model's top ``k`` holds.

    Where ``top_k_score`` asks whether the model's picks include one config as fast as the
    best, recall asks how many of the best it would pick: a search that measures the top
    of the model's ranking finds the few configs near the optimum only if the model ranks
    them together at the top. Failures are never among the fastest; with fewer than ``k``
    successful records, ``k`` is their number. nan when every record failed. Ties among
    the costs count in the order given (stable sort).
    """
    s = np.asarray(scores, dtype=np.float64)
    c = _clean_costs(costs)
    if len(s) != len(c):
        raise ValueError("scores and costs differ in length")
    k = min(max(1, k), int(np.isfinite(c).sum()))
    if k == 0:
        return math.nan
    fastest = set(np.argsort(c, kind="stable")[:k].tolist())
    picked = np.argsort(-s, kind="stable")[:k].tolist()
    return len(fastest.intersection(picked)) / k


#: The k of the top-k recall that ``evaluate_holdout`` reports.
RECALL_K = 10


def _holdout_split(n: int, test_fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """A random split of ``n`` records, seeded: (held-out indices, the rest)."""
    if not 0.0 < test_fraction < 1.0:
        raise ValueError(f"test_fraction must be in (0, 1), got {test_fraction}")
    perm = np.random.default_rng(seed).permutation(n)
    n_test = max(1, int(round(n * test_fraction)))
    return perm[:n_test], perm[n_test:]


def evaluate_holdout(features, costs, test_fraction: float = 0.2, seed: int = 0, groups=None,
                     **model_kw) -> dict:
    """Fit on a random part of the records, score the rest: the quality metrics above.

    Returns ``pairwise_accuracy``, ``top1``, ``top5`` and ``recall10`` (``top_k_recall``
    at ``RECALL_K``) on the held-out records (with
    ``groups``, the averages over groups), plus ``n_train`` and ``n_test``.
    """
    x, c = _check_xy(features, costs)
    test, train = _holdout_split(len(c), test_fraction, seed)
    g = np.zeros(len(c), dtype=np.int64) if groups is None else _dense_groups(groups)
    model = XGBCostModel(seed=seed, **model_kw).fit(x[train], c[train], g[train])
    scores = model.predict(x[test]) if model.fitted else np.zeros(len(test))
    per_group = []
    for gid in np.unique(g[test]):
        m = g[test] == gid
        sg, cg = scores[m], c[test][m]
        per_group.append((pairwise_accuracy(sg, cg), top_k_score(sg, cg, 1), top_k_score(sg, cg, 5),
                          top_k_recall(sg, cg, RECALL_K)))
    pa, t1, t5, r10 = (float(np.nanmean(col)) if not np.all(np.isnan(col)) else math.nan
                       for col in np.array(per_group, dtype=np.float64).T)
    return {"pairwise_accuracy": pa, "top1": t1, "top5": t5, "recall10": r10, "n_train": len(train),
            "n_test": len(test)}


def learning_curve(features, costs, sizes, test_fraction: float = 0.2, splits: int = 4, **model_kw) -> dict:
    """Held-out pairwise accuracy as the training set grows: is the model short of records
    or of information?

    Each of ``splits`` random splits (seeds 0, 1, ...) holds out the same ``test_fraction``
    of the records for every size and trains on the first ``n`` of the rest, for each ``n``
    in ``sizes`` (sizes larger than the rest are left out). A curve still rising at the
    largest size says more records of the workload would order it better; a flat one, that
    the features (or the labels' noise) are the limit. Returns ``{n: mean accuracy}``.
    """
    x, c = _check_xy(features, costs)
    accuracy: dict[int, list[float]] = {}
    for seed in range(splits):
        test, rest = _holdout_split(len(c), test_fraction, seed)
        for n in sorted({int(n) for n in sizes if 2 <= int(n) <= len(rest)}):
            model = XGBCostModel(seed=seed, **model_kw).fit(x[rest[:n]], c[rest[:n]])
            scores = model.predict(x[test]) if model.fitted else np.zeros(len(test))
            accuracy.setdefault(n, []).append(pairwise_accuracy(scores, c[test]))
    return {n: float(np.nanmean(a)) for n, a in accuracy.items()}
