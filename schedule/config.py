"""Knobs and configs: the numeric decisions of a sketch, as plain data.

Naming follows AutoTVM: a *knob* is one decision with a finite list of candidates
(a split's factors, a compute location, an unroll depth); a *config* is one point of
the space: a candidate for every knob of one sketch. Configs are JSON-serialisable,
hash stably (SHA-256 of canonical JSON) and replay to the same schedule in any process.
The knob names and value formats are spelled in ``schedule.decisions``, which also reads
a config's values as typed per-stage decisions.
"""
from __future__ import annotations

import functools
import hashlib
import json
import math
import random
from dataclasses import dataclass, field
from typing import Any


def _canonical(value):
    """Lists become tuples so that decoded JSON equals the original candidates."""
    if isinstance(value, (list, tuple)):
        return tuple(_canonical(v) for v in value)
    return value


@dataclass(frozen=True)
class Knob:
    """One decision: ``name``, its ``candidates`` (JSON-able values) and what it means.

    ``default``: for a knob added to a space after configs were stored, the candidate a
    stored config without it means (it then fits, decodes and replays as before: the
    database identifies measured points by their stored JSON); None otherwise."""

    name: str
    candidates: tuple
    doc: str = ""
    default: Any = None

    @property
    def required(self) -> bool:
        return self.default is None

    def value_in(self, config: "Config"):
        """This knob's value in ``config`` (its default when a stored config predates it)."""
        if self.name in config.values or self.required:
            return config.values[self.name]
        return self.default

    def index(self, value) -> int:
        try:
            return self.candidates.index(_canonical(value))
        except ValueError:
            raise ConfigError(f"value {value!r} is not a candidate of knob {self.name!r}") from None

    def neighbors(self, index: int) -> tuple[int, ...]:
        """Indices of the candidates one small step away from candidate ``index``.

        Numbers: the next smaller and larger candidate. Tuples of positive ints (tile
        sizes per level): the candidates that scale one level by 2 or 1/2, or move a
        factor of 2 from one level to another (Ansor's tile-size mutation), i.e. those
        whose log2 sizes differ by at most 2 in total. Other values (names) have no
        order, so every other candidate is a neighbour.
        """
        return _neighbor_table(self.candidates)[index]


@functools.lru_cache(maxsize=1024)
def _neighbor_table(candidates: tuple) -> tuple[tuple[int, ...], ...]:
    """``Knob.neighbors`` for every candidate at once (knobs of one space share it)."""
    n = len(candidates)
    everyone = tuple(tuple(j for j in range(n) if j != i) for i in range(n))

    def positive_ints(v):
        return isinstance(v, int) and not isinstance(v, bool) and v > 0

    if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in candidates):
        order = sorted(range(n), key=lambda i: candidates[i])
        rank = {i: r for r, i in enumerate(order)}
        return tuple(tuple(order[r] for r in (rank[i] - 1, rank[i] + 1) if 0 <= r < n) for i in range(n))
    if all(isinstance(v, tuple) and v and all(positive_ints(x) for x in v) for v in candidates) \
            and len({len(v) for v in candidates}) == 1:
        logs = [[math.log2(x) for x in v] for v in candidates]
        table = []
        for i in range(n):
            near = tuple(j for j in range(n) if j != i
                         and sum(abs(a - b) for a, b in zip(logs[i], logs[j])) <= 2.0 + 1e-9)
            table.append(near or everyone[i])
        return tuple(table)
    return everyone


class ConfigError(ValueError):
    """A config that does not belong to the space it is used with."""


@dataclass(frozen=True)
class Config:
    """One point of a space: the sketch name and a value for each of its knobs."""

    sketch: str
    values: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> str:
        """The canonical JSON (sorted keys, no spaces); made once per config, as it is the
        identity every lookup (hash, equality, the search's seen-sets, caches) goes through."""
        text = self.__dict__.get("_json")
        if text is None:
            text = json.dumps({"sketch": self.sketch, "values": self.values}, sort_keys=True, separators=(",", ":"))
            object.__setattr__(self, "_json", text)
        return text

    def to_dict(self) -> dict:
        return json.loads(self.to_json())

    @classmethod
    def from_json(cls, text: str | dict) -> "Config":
        data = json.loads(text) if isinstance(text, str) else text
        try:
            return cls(data["sketch"], {k: _canonical(v) for k, v in data["values"].items()})
        except (KeyError, TypeError, AttributeError):
            raise ConfigError(f"not a config: {str(text)[:200]}") from None

    @property
    def hash(self) -> str:
        """Stable identity: SHA-256 of the canonical JSON, 16 hex digits."""
        digest = self.__dict__.get("_hash")
        if digest is None:
            digest = hashlib.sha256(self.to_json().encode()).hexdigest()[:16]
            object.__setattr__(self, "_hash", digest)
        return digest

    def __hash__(self):
        return hash(self.to_json())

    def __eq__(self, other):
        return isinstance(other, Config) and self.to_json() == other.to_json()

    def __str__(self):
        parts = ", ".join(f"{k}={_fmt(v)}" for k, v in sorted(self.values.items()))
        return f"{self.sketch}: {parts}"

    def decisions(self, space):
        """The typed per-stage decisions (``schedule.decisions``) this config holds in ``space``."""
        return space.decisions(self)


def _fmt(v) -> str:
    if isinstance(v, tuple):
        return "x".join(map(str, v))
    return str(v)


@dataclass(frozen=True)
class KnobSet:
    """The knobs of one sketch, with uniform sampling, mutation and crossover."""

    sketch: str
    knobs: tuple[Knob, ...]

    @property
    def size(self) -> int:
        n = 1
        for k in self.knobs:
            n *= len(k.candidates)
        return n

    def sample(self, rng: random.Random) -> Config:
        return Config(self.sketch, {k.name: rng.choice(k.candidates) for k in self.knobs})

    def mutate(self, config: Config, rng: random.Random, local: float = 0.0) -> Config:
        """Change one decision (a knob with more than one candidate) to another candidate.

        With probability ``local`` the new candidate is a neighbour of the current one
        (``Knob.neighbors``: a tile level doubled or halved, the next unroll depth), so
        the child keeps most of what made its parent fast; otherwise any candidate.
        """
        choices = [k for k in self.knobs if len(k.candidates) > 1]
        if not choices:
            return config
        knob = rng.choice(choices)
        current = knob.index(knob.value_in(config))
        if local > 0.0 and rng.random() < local:
            new = rng.choice(knob.neighbors(current))
        else:
            new = rng.choice([n for n in range(len(knob.candidates)) if n != current])
        values = dict(config.values)
        values[knob.name] = knob.candidates[new]
        return Config(self.sketch, values)

    def crossover(self, a: Config, b: Config, rng: random.Random) -> Config:
        """Each decision from one parent or the other, uniformly."""
        return Config(self.sketch, {k.name: k.value_in(a if rng.random() < 0.5 else b) for k in self.knobs})

    def check(self, config: Config) -> None:
        if config.sketch != self.sketch:
            raise ConfigError(f"config of sketch {config.sketch!r} used with sketch {self.sketch!r}")
        names = {k.name for k in self.knobs}
        missing = sorted(k.name for k in self.knobs if k.required and k.name not in config.values)
        extra = sorted(set(config.values) - names)
        if missing or extra:
            raise ConfigError(f"config does not fit sketch {self.sketch!r}: missing {missing}, unknown {extra}")
        for k in self.knobs:
            k.index(k.value_in(config))

    def enumerate(self):
        """Every config in a fixed order (for grid search)."""
        import itertools

        names = [k.name for k in self.knobs]
        for combo in itertools.product(*(k.candidates for k in self.knobs)):
            yield Config(self.sketch, dict(zip(names, combo)))


class SearchSpace:
    """The set operations every space of configs shares, over its ``knobs`` (a KnobSet).

    A config is valid when it fits the knobs and ``problem(config)`` (the subclass's own
    limits) finds nothing wrong; sampling, mutation and enumeration follow from that.
    """

    knobs: KnobSet

    def problem(self, config: Config) -> str | None:
        """Why a config that fits the knobs is still invalid here (None: it is valid)."""
        return None

    @property
    def size(self) -> int:
        """Number of knob combinations (valid and invalid)."""
        return self.knobs.size

    def schedule_key(self, config: Config) -> str:
        """The identity of the schedule ``config`` builds: configs with one key build the same
        code, so a tuner measures only one of them. Its canonical JSON unless a space knows
        of knobs that some configs leave without effect."""
        return config.to_json()

    def check(self, config: Config) -> str | None:
        """None if ``config`` is valid here, else the reason it is not (before any build)."""
        try:
            self.knobs.check(config)
        except ConfigError as exc:
            return str(exc)
        return self.problem(config)

    def estimated_valid_size(self, samples: int = 2000, seed: int = 0) -> int:
        """``size`` times the fraction of uniformly sampled configs that pass ``check``."""
        rng = random.Random(seed)
        ok = sum(self.check(self.knobs.sample(rng)) is None for _ in range(samples))
        return round(self.size * ok / samples)

    def sample(self, rng: random.Random, max_tries: int = 1000) -> Config:
        """A uniformly random *valid* config."""
        for _ in range(max_tries):
            config = self.knobs.sample(rng)
            if self.check(config) is None:
                return config
        raise ConfigError("could not sample a valid config; the space's limits reject nearly everything")

    def starting_points(self, rng: random.Random) -> list[Config]:
        """Valid configs a search should measure first (known-good shapes); none by default."""
        return []

    def mutate(self, config: Config, rng: random.Random, local: float = 0.0) -> Config:
        """One decision changed; a neighbouring candidate with probability ``local`` (see KnobSet.mutate)."""
        return self.knobs.mutate(config, rng, local)

    def crossover(self, a: Config, b: Config, rng: random.Random) -> Config:
        return self.knobs.crossover(a, b, rng)

    def enumerate(self):
        """Every valid config in a fixed order (for grid search)."""
        return (c for c in self.knobs.enumerate() if self.check(c) is None)
