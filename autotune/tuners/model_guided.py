"""Model-guided search: a cost model ranks candidates, the best get measured.

    update(configs, results) -> features of the measured configs -> model.fit
    next_batch(n)            -> evolutionary search scored by the model -> (1 - eps) n
                                unmeasured configs from its plan + eps n random ones

The search policy lives here and the model is a constructor argument (any
``cost_model.CostModel``); ``XGBTuner`` is this search with the XGBoost ranking model.
Its knobs are one ``SearchOptions``.

Until ``min_train`` configs have been measured (and at least two distinct
throughputs exist, so there is an order to learn) batches are random. Then each
batch after a retrain runs one search:

    population  the fastest measured configs (``seed_fraction`` of it) + random valid
                configs, ``population`` in all, scored in one batched ``predict``
    generation  children of the better-scored half (uniform crossover and/or one-knob
                mutations; invalid and already-scored children dropped), scored in one
                ``predict``; the best ``population`` of parents and children survive;
                ``generations`` times
    local       ``local_children`` neighbours (one or two small steps) of each of the
                ``local_parents`` fastest measured configs, scored in one ``predict``
    plan        ``local_share`` of it the best-scored neighbours, the rest every other
                unmeasured config the search scored, best first; ``plan_size`` or the
                batch size kept; the batch takes the top of the plan

A space of at most ``exhaustive`` knob combinations (a small workload, or a replay
restricted to a recording) is not searched but scored whole: every unvisited valid
config in one batched ``predict``, the best-scored first. That finds the model's own
best, which breeding only approximates, and costs one lowering per config once (the
feature cache keeps them).

Mutations are local with probability ``local_mutation`` (a tile level doubled or
halved, a factor moved between levels, the next unroll depth: Ansor's tile-size
mutation), so children keep what made their parents fast. The ``local`` share is a
trust region: early on the model ranks configs far from anything measured poorly,
but it ranks neighbours of measured configs much better, so half of every batch
climbs from the fastest configs while the other half follows the model's global
search. Without the two, runs got stuck in a slow basin far more often
(``bench/tune_convergence.py`` compares tuners on one task).

Batches are ``early_batch`` long until ``early_trials`` were measured (see
``batch_size``): each retrain is one step of the climb, and early steps teach the
model most, so it retrains eight times as often at the start, and the model steers
from the 17th trial (``min_train``). Replayed over the recordings, batches of 8 after
16 random trials reached 0.95x of the optimum in fewer trials than batches of 32
after 32 on every workload (``bench/RESULTS.md``). A full search after every small
batch would cost twice the search time of a run, so one runs every
``full_search_every`` trials; a retrain in between rescores the candidates the last
one scored (their features are cached: one ``predict``) together with fresh
neighbours of the fastest measured configs, which is where a new best moves the search.

So a search scores about ``population * (generations + 1) + local_parents *
local_children`` candidates, each needing its features (a lowering plus an extraction
unless the feature cache has it): that is the cost to watch, and what ``scored``,
``feature_s``, ``model_s`` and ``search_s`` report (disjoint: ``search_s`` is the
search's own bookkeeping, without the time in ``feature_fn`` and the model).
``eps_random`` of each batch is random, so a wrong model cannot trap the search in
its own blind spot.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Callable

import numpy as np

from schedule.config import Config, ConfigError

from ..cost_model import CostModel
from .base import Tuner, config_key


@dataclass(frozen=True)
class SearchOptions:
    """The knobs of ``ModelGuidedSearch`` (see the module docstring for what each step does)."""

    # when the model steers, and how much of a batch it picks
    min_train: int = 16            # measurements before the first model-guided batch (unless warm-started)
    plan_size: int = 64            # configs one search plans ahead (at least the batch size)
    eps_random: float = 0.05       # share of every guided batch drawn at random (exploration)
    # the evolutionary search over the model
    population: int = 128          # candidates kept per generation (at least 2)
    generations: int = 3           # rounds of breeding
    seed_fraction: float = 0.125   # share of the first population taken from the fastest measured configs
    crossover_prob: float = 0.5    # a child is a crossover of two parents (else a mutation of one)
    local_mutation: float = 0.8    # a mutation takes a small step rather than a random new value
    # the trust region around the fastest measured configs
    local_share: float = 0.5       # share of the plan taken from their neighbours
    local_parents: int = 8         # fastest measured configs whose neighbours are scored
    local_children: int = 16       # neighbours scored per parent
    # the batch schedule
    early_batch: int = 8           # batch size while fewer than early_trials were measured
    early_trials: int = 128
    full_search_every: int = 32    # trials between full searches; between them the last one's candidates are rescored
    # a space this small is scored whole instead of searched
    exhaustive: int = 4096         # most knob combinations of a space scored whole (0: never)

    def __post_init__(self):
        for name in ("eps_random", "seed_fraction", "crossover_prob", "local_mutation", "local_share"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"{name} must be in [0, 1], got {value}")
        for name, least in (("population", 2), ("generations", 0), ("early_batch", 1), ("min_train", 0),
                            ("plan_size", 0), ("local_parents", 0), ("local_children", 0), ("early_trials", 0),
                            ("exhaustive", 0), ("full_search_every", 0)):
            if getattr(self, name) < least:
                raise ValueError(f"{name} must be at least {least}, got {getattr(self, name)}")


class ModelGuidedSearch(Tuner):
    """Proposes the configs a cost model predicts fastest (see the module docstring).

    ``feature_fn(config) -> np.ndarray`` gives a config's features (the tune loop
    passes ``FeatureCache.feature_fn(task)``); the optional ``features_many(configs)
    -> (n, d) array`` is its batched form (e.g. a parallel ``FeatureCache``). ``model``
    is any ``CostModel``: it is refit after every ``update`` on all measurements.
    Counters for the tune loop's report, in seconds and disjoint: ``model_s`` (fits
    and predicts), ``feature_s`` (in ``feature_fn``), ``search_s`` (the rest of the
    search); and ``scored`` (candidates scored in all), ``last_scored`` (by the latest
    search), ``fits``.
    """

    accepts_warm_start = True

    def __init__(self, space, feature_fn: Callable[[Config], np.ndarray], model: CostModel,
                 options: SearchOptions | None = None, seed: int = 0,
                 features_many: Callable[[list[Config]], np.ndarray] | None = None):
        super().__init__(space, seed)
        if feature_fn is None:
            raise ValueError(f"{type(self).__name__} needs a feature_fn(config) -> features")
        self.feature_fn = feature_fn
        self.features_many = features_many
        self.model = model
        self.options = options if options is not None else SearchOptions()
        self._xs: list[np.ndarray] = []
        self._costs: list[float] = []
        self._plan: list[Config] = []
        self._plan_fresh = False
        self._warm = False  # a model fitted on other workloads' records steers from the first batch
        self._whole: list[Config] | None = None  # the space's valid configs, when it is scored whole
        self._pool: list[Config] = []  # the candidates the last full search scored
        self._pool_at = -1             # trials measured when it ran
        self.model_s = self.search_s = self.feature_s = 0.0
        self.scored = self.last_scored = self.fits = 0

    # ------------------------------------------------------------ capabilities

    def warm_start(self, features, costs, groups=None) -> bool:
        """Records of other workloads for the model (see ``CostModel.warm_start``).

        The model is refit at once and, when that fit succeeds, it steers the search
        from the first batch on (``min_train`` no longer applies). Returns whether it does.
        """
        self.model.warm_start(features, costs, groups)
        self._refit(np.asarray(features).shape[1])
        self._warm = self.model.fitted
        return self._warm

    def timings(self) -> dict[str, float]:
        return {"model_s": self.model_s, "search_s": self.search_s}

    # ------------------------------------------------------------ learning

    def _learn(self, configs: list[Config], costs: list[float]) -> None:
        t0 = time.perf_counter()
        self._xs.extend(np.asarray(self.feature_fn(c), dtype=np.float32) for c in configs)
        self._costs.extend(costs)
        self.feature_s += time.perf_counter() - t0
        self._refit(len(self._xs[0]))

    def _refit(self, dim: int) -> None:
        """Retrain on everything measured (plus warm-start records); the plan is stale."""
        t0 = time.perf_counter()
        x = np.stack(self._xs) if self._xs else np.zeros((0, dim), dtype=np.float32)
        self.model.fit(x, np.asarray(self._costs, dtype=np.float64))
        self.model_s += time.perf_counter() - t0
        self.fits += 1
        self._plan_fresh = False

    # ------------------------------------------------------------ proposing

    def batch_size(self, requested: int) -> int:
        """``early_batch`` (if smaller) until ``early_trials`` were measured, then ``requested``."""
        if len(self.history) < self.options.early_trials:
            return min(requested, self.options.early_batch)
        return requested

    def next_batch(self, n: int) -> list[Config]:
        if n <= 0:
            return []
        if not self.model.fitted or (len(self._costs) < self.options.min_train and not self._warm):
            return self._starting_then_random(n)
        n_random = min(n, int(round(self.options.eps_random * n)))
        n_model = n - n_random
        self._plan = [c for c in self._plan if not self.visited(c)]
        if not self._plan_fresh or len(self._plan) < n_model:
            want = max(self.options.plan_size, n_model)
            recent = self._pool_at >= 0 and len(self.history) - self._pool_at < self.options.full_search_every
            self._plan = self._rescore(want) if recent and self._pool else self._search(want)
            self._plan_fresh = True
        out = self._fresh(self._plan, n_model)
        self._plan = self._plan[len(out):]
        out += self._random_fresh(n - len(out))
        return out

    def _score(self, configs: list[Config]) -> np.ndarray:
        """Model scores of ``configs``, in one batched predict."""
        if not configs:
            return np.zeros(0)
        t0 = time.perf_counter()
        if self.features_many is not None:
            x = np.asarray(self.features_many(configs), dtype=np.float32)
        else:
            x = np.stack([np.asarray(self.feature_fn(c), dtype=np.float32) for c in configs])
        t1 = time.perf_counter()
        scores = self.model.predict(x)
        self.feature_s += t1 - t0
        self.model_s += time.perf_counter() - t1
        self.scored += len(configs)
        self.last_scored += len(configs)
        return scores

    def _search(self, want: int) -> list[Config]:
        """The ``want`` best-scored unvisited configs an evolutionary search over the model finds
        (or, in a space of at most ``exhaustive`` combinations, the best of all of them)."""
        opt = self.options
        if self.space.size <= opt.exhaustive:
            return self._search_whole(want)
        t0 = time.perf_counter()
        spent0 = self.feature_s + self.model_s
        self.last_scored = 0
        seen: dict[str, tuple[float, Config]] = {}

        seeds = [c for c, _ in self.measured(finite_only=True)[:max(1, int(opt.population * opt.seed_fraction))]]
        pop = self._distinct(seeds, seen)
        tries = 0
        while len(pop) < opt.population and tries < 4 * opt.population:
            tries += 1
            try:
                c = self.space.sample(self.rng)
            except ConfigError:
                break
            pop += self._distinct([c], seen)
        pop_scores = self._record(pop, seen)

        for _ in range(opt.generations):
            order = np.argsort(-pop_scores, kind="stable")
            parents = [pop[i] for i in order[:max(2, len(pop) // 2)]]
            children = self._breed(parents, opt.population, seen)
            if not children:
                break
            child_scores = self._record(children, seen)
            pop = pop + children
            pop_scores = np.concatenate([pop_scores, child_scores])
            keep = np.argsort(-pop_scores, kind="stable")[:opt.population]
            pop, pop_scores = [pop[i] for i in keep], pop_scores[keep]

        local = self._local_candidates(seen)
        local_scores = self._record(local, seen)
        ranked = sorted(((s, c) for s, c in seen.values() if not self.visited(c)),
                        key=lambda sc: -sc[0])
        ranked_local = [local[i] for i in np.argsort(-local_scores, kind="stable")]
        plan = _interleave(ranked_local, [c for _, c in ranked], opt.local_share, want)
        self._pool, self._pool_at = [c for _, c in seen.values()], len(self.history)
        self.search_s += time.perf_counter() - t0 - (self.feature_s + self.model_s - spent0)
        return plan

    def _rescore(self, want: int) -> list[Config]:
        """The ``want`` best unvisited configs among the last full search's candidates,
        scored again by the retrained model, and fresh neighbours of the fastest measured
        configs (``local_share`` of the plan): a search without breeding."""
        t0 = time.perf_counter()
        spent0 = self.feature_s + self.model_s
        self.last_scored = 0
        pool = [c for c in self._pool if not self.visited(c)]
        seen: dict[str, tuple[float, Config]] = {}
        self._distinct(pool, seen)
        local = self._local_candidates(seen)
        scores = self._score(pool + local)
        pool_scores, local_scores = scores[:len(pool)], scores[len(pool):]
        ranked = [pool[i] for i in np.argsort(-pool_scores, kind="stable")]
        ranked_local = [local[i] for i in np.argsort(-local_scores, kind="stable")]
        plan = _interleave(ranked_local, ranked, self.options.local_share, want)
        self._pool = pool + local
        self.search_s += time.perf_counter() - t0 - (self.feature_s + self.model_s - spent0)
        return plan

    def _search_whole(self, want: int) -> list[Config]:
        """The ``want`` best-scored unvisited configs of the whole space: where the space is
        small, scoring all of it is cheaper than breeding and finds the model's true best."""
        t0 = time.perf_counter()
        spent0 = self.feature_s + self.model_s
        self.last_scored = 0
        if self._whole is None:
            self._whole = list(self.space.enumerate())
        candidates = [c for c in self._whole if not self.visited(c)]
        scores = self._score(candidates)
        plan = [candidates[i] for i in np.argsort(-scores, kind="stable")[:want]]
        self.search_s += time.perf_counter() - t0 - (self.feature_s + self.model_s - spent0)
        return plan

    def _local_candidates(self, seen: dict) -> list[Config]:
        """Unscored configs one or two small steps from the fastest measured ones.

        The model ranks these neighbours of known-good configs more reliably than far-away
        configs (it has measured data around them), so a share of every batch comes from
        them: a trust region that keeps the search climbing even while the model is poor.
        Neighbours the evolutionary part already scored are not drawn again; they compete
        in the global ranking.
        """
        parents = [c for c, _ in self.measured(finite_only=True)[:self.options.local_parents]]
        want = self.options.local_children
        out: list[Config] = []
        for parent in parents:
            made = 0
            for _ in range(4 * want):
                if made >= want:
                    break
                child = self.space.mutate(parent, self.rng, 1.0)
                if self.rng.random() < 0.5:
                    child = self.space.mutate(child, self.rng, 1.0)
                if self.visited(child) or not self._admit(child, seen):
                    continue
                out.append(child)
                made += 1
        return out

    def _distinct(self, configs: list[Config], seen: dict) -> list[Config]:
        """The configs of ``configs`` whose schedule ``seen`` lacks (they join it, unscored).
        ``seen`` is keyed by schedule (``SearchSpace.schedule_key``): configs that build one
        schedule are scored once."""
        out = []
        for c in configs:
            key = self.space.schedule_key(c)
            if key not in seen:
                seen[key] = (-math.inf, c)
                out.append(c)
        return out

    def _record(self, configs: list[Config], seen: dict) -> np.ndarray:
        scores = self._score(configs)
        for c, s in zip(configs, scores):
            seen[self.space.schedule_key(c)] = (float(s), c)
        return scores

    def _breed(self, parents: list[Config], count: int, seen: dict) -> list[Config]:
        """Up to ``count`` valid children not scored before in this search."""
        out: list[Config] = []
        for _ in range(4 * count):
            if len(out) >= count:
                break
            a = parents[self.rng.randrange(len(parents))]
            if self.rng.random() < self.options.crossover_prob:
                child = self.space.crossover(a, parents[self.rng.randrange(len(parents))], self.rng)
                if self.rng.random() < 0.5:
                    child = self.space.mutate(child, self.rng, self.options.local_mutation)
            else:
                child = self.space.mutate(a, self.rng, self.options.local_mutation)
            if self._admit(child, seen):
                out.append(child)
        return out

    def _admit(self, child: Config, seen: dict) -> bool:
        """Whether ``child`` is valid and its schedule new to this search; if so it joins ``seen`` (unscored)."""
        key = self.space.schedule_key(child)
        if key in seen or self.space.check(child) is not None:
            return False
        seen[key] = (-math.inf, child)
        return True


def _interleave(local: list[Config], ranked: list[Config], share: float, want: int) -> list[Config]:
    """Up to ``want`` distinct configs, about ``share`` of every prefix from ``local`` (while it lasts)."""
    out: list[Config] = []
    keys: set[str] = set()
    li = gi = from_local = 0
    while len(out) < want and (li < len(local) or gi < len(ranked)):
        if li < len(local) and (gi >= len(ranked) or from_local < share * (len(out) + 1)):
            c, li = local[li], li + 1
            is_local = True
        else:
            c, gi = ranked[gi], gi + 1
            is_local = False
        key = config_key(c)
        if key not in keys:
            keys.add(key)
            out.append(c)
            from_local += is_local
    return out
