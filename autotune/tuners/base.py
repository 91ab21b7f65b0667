"""The tuner contract, and the bookkeeping every tuner shares.

    tuner = make_tuner("xgb", task.space, seed=0, feature_fn=cache.feature_fn(task))
    while tuner.has_next() and trials < budget:
        configs = tuner.next_batch(64)          # Configs never proposed or measured before
        results = measure(task, configs)        # MeasureResults; failures have cost inf
        tuner.update(configs, results)          # the tuner learns from the batch

A *space* is anything with ConfigSpace's interface (``size``, ``sample(rng)``,
``check(config) -> None | reason``, ``mutate``, ``crossover``, ``enumerate``); a bare
``KnobSet`` is wrapped in ``KnobSpace``.
"""
from __future__ import annotations

import math
import random
from typing import Callable, Iterable, Sequence

from schedule.config import Config, ConfigError, KnobSet, SearchSpace

#: Spaces up to this many knob combinations are enumerated when random sampling stops
#: finding new configs, so that a tuner can tell a small space is exhausted.
ENUMERATE_LIMIT = 50_000


def config_key(config: Config) -> str:
    """The identity of a config inside a tuner (its canonical JSON)."""
    return config.to_json()


def cost_of(result) -> float:
    """Seconds of one trial: ``result.cost`` (MeasureResult-like) or a number; failures inf."""
    cost = getattr(result, "cost", result)
    try:
        cost = float(cost)
    except (TypeError, ValueError):
        return math.inf
    return cost if math.isfinite(cost) and cost > 0 else math.inf


class KnobSpace(SearchSpace):
    """ConfigSpace's interface over a bare KnobSet, with an optional validity rule.

    ``constraint(config)`` returns None or why the config is invalid (like
    ``ConfigSpace.check``). For tests and synthetic objectives.
    """

    def __init__(self, knobs: KnobSet, constraint: Callable[[Config], str | None] | None = None):
        self.knobs = knobs
        self.constraint = constraint

    def problem(self, config: Config) -> str | None:
        return self.constraint(config) if self.constraint is not None else None


def as_space(space):
    return KnobSpace(space) if isinstance(space, KnobSet) else space


class Tuner:
    """Proposes configs to measure and learns from their results (AutoTVM's contract).

    ``Tuner(space, seed=0)``; subclasses add their own keyword options.

    ``next_batch(n) -> list[Config]``
        Up to ``n`` valid configs (``space.check(c) is None``), none of them proposed
        or measured before (by this tuner, or reported to it through ``update``), no
        two alike. Fewer than ``n`` only when the space is exhausted.
    ``update(configs, results)``
        The results of measuring ``configs`` (in the same order): objects with a
        ``.cost`` in seconds (``MeasureResult``), ``inf`` for failures; plain numbers
        are accepted too. Configs the tuner never proposed (e.g. records replayed from
        the database on ``--resume``) are welcome: they count as measured.
    ``has_next() -> bool``
        False once every valid config of the space has been proposed or measured.
    ``batch_size(requested) -> int``
        How many configs the tuner would like measured next, at most ``requested``
        (the tune loop's batch size). ``requested`` by default; the model-guided
        tuner asks for smaller batches while it has few measurements.

    Optional capabilities, declared here with defaults so that the tune loop asks
    every tuner the same way (never ``hasattr``):

    ``accepts_warm_start`` (class attribute, False)
        Whether ``warm_start`` uses records of other workloads; the loop extracts
        their features only for a tuner that says so.
    ``warm_start(features, costs, groups=None) -> bool``
        Records of other workloads (features (n, d), costs in seconds, a group id per
        record): True if they now steer the proposals. Default: ignored, False.
    ``timings() -> dict``
        Seconds spent so far, as ``model_s`` (fitting and predicting a model) and
        ``search_s`` (the tuner's own search). Default: zeros.

    Tuners are deterministic under their seed: all randomness comes from ``self.rng``
    (``random.Random(seed)``), never from global state. ``best_config``/``best_cost``
    and ``history`` (config, cost) describe what was measured so far.
    """

    accepts_warm_start = False

    def __init__(self, space, seed: int = 0):
        self.space = as_space(space)
        self.seed = seed
        self.rng = random.Random(seed)
        self.history: list[tuple[Config, float]] = []
        self.best_config: Config | None = None
        self.best_cost = math.inf
        self._visited: set[str] = set()
        self._exhausted = False
        self._remaining: list[Config] | None = None  # unvisited valid configs, once enumerated
        self._valid_keys: set[str] | None = None
        self._visited_valid = 0
        self._starts: list[Config] | None = None  # the space's starting points not offered yet

    # ------------------------------------------------------------ the contract

    def next_batch(self, n: int) -> list[Config]:
        raise NotImplementedError

    def batch_size(self, requested: int) -> int:
        return requested

    def update(self, configs: Sequence[Config], results: Sequence) -> None:
        configs, results = list(configs), list(results)
        if len(configs) != len(results):
            raise ValueError(f"update: {len(configs)} configs but {len(results)} results")
        costs = [cost_of(r) for r in results]
        for config, cost in zip(configs, costs):
            self._mark(config)
            self.history.append((config, cost))
            if cost < self.best_cost:
                self.best_cost, self.best_config = cost, config
        self._learn(configs, costs)

    def has_next(self) -> bool:
        if self._exhausted:
            return False
        if self.space.size <= ENUMERATE_LIMIT:
            self._ensure_valid_keys()
            if self._visited_valid >= len(self._valid_keys):
                self._exhausted = True
        return not self._exhausted

    # ------------------------------------------------------------ optional capabilities

    def warm_start(self, features, costs, groups=None) -> bool:
        """Records of other workloads; this tuner has no use for them (see ``accepts_warm_start``)."""
        return False

    def timings(self) -> dict[str, float]:
        """Seconds in a model (``model_s``) and in the search (``search_s``); none here."""
        return {"model_s": 0.0, "search_s": 0.0}

    # ------------------------------------------------------------ for subclasses

    def _learn(self, configs: list[Config], costs: list[float]) -> None:
        """Hook: a batch of measurements arrived (already in ``history``)."""

    def visited(self, config: Config) -> bool:
        return self.space.schedule_key(config) in self._visited

    def _mark(self, config: Config) -> bool:
        """Record ``config`` as proposed/measured; False if it (or a config that builds the
        same schedule: ``SearchSpace.schedule_key``) already was."""
        key = self.space.schedule_key(config)
        if key in self._visited:
            return False
        self._visited.add(key)
        if self._valid_keys is not None and key in self._valid_keys:
            self._visited_valid += 1
        return True

    def _ensure_valid_keys(self) -> None:
        if self._valid_keys is None:
            self._valid_keys = {self.space.schedule_key(c) for c in self.space.enumerate()}
            self._visited_valid = len(self._valid_keys & self._visited)

    def _random_fresh(self, n: int) -> list[Config]:
        """Up to ``n`` new valid configs, uniformly at random; fewer only if the space runs out."""
        out: list[Config] = []
        if n <= 0 or self._exhausted:
            return out
        attempts = 0
        max_attempts = max(200, 20 * n)
        while len(out) < n and attempts < max_attempts:
            attempts += 1
            try:
                config = self.space.sample(self.rng)
            except ConfigError:
                break
            if self._mark(config):
                out.append(config)
        if len(out) < n:
            out.extend(self._from_remaining(n - len(out)))
        return out

    def _starting_then_random(self, n: int) -> list[Config]:
        """The space's starting points not yet visited, then random configs: the first
        batches of a tuner that climbs from what it measured."""
        if self._starts is None:
            self._starts = list(self.space.starting_points(self.rng))
        out: list[Config] = []
        while self._starts and len(out) < n:
            config = self._starts.pop(0)
            if self._mark(config):
                out.append(config)
        return out + self._random_fresh(n - len(out))

    def _from_remaining(self, n: int) -> list[Config]:
        """Draw from the enumerated rest of a small space (sampling keeps hitting old configs)."""
        if self.space.size > ENUMERATE_LIMIT:
            return []
        if self._remaining is None:
            self._remaining = list(self.space.enumerate())
            self.rng.shuffle(self._remaining)
        self._remaining = [c for c in self._remaining if not self.visited(c)]
        out = self._remaining[:n]
        self._remaining = self._remaining[n:]
        for c in out:
            self._mark(c)
        if not self._remaining:
            self._exhausted = True
        return out

    def _fresh(self, configs: Iterable[Config], n: int) -> list[Config]:
        """The first ``n`` of ``configs`` that are new (marked as proposed on the way)."""
        out: list[Config] = []
        for c in configs:
            if len(out) >= n:
                break
            if self._mark(c):
                out.append(c)
        return out

    def measured(self, finite_only: bool = False) -> list[tuple[Config, float]]:
        """History sorted fastest first (failures last, or dropped with ``finite_only``)."""
        items = [(c, t) for c, t in self.history if not finite_only or math.isfinite(t)]
        return sorted(items, key=lambda ct: ct[1])
