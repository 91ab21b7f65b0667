"""Targets as data: the ``Target`` value, the ``TargetKind`` interface and their registry.

    target = parse_target("cuda:h200")     # Target(kind="cuda", preset="h200", facts=CudaFacts(...))
    str(target)                            # "cuda:h200", the canonical spec
    target.facts.shared_bytes_per_block    # what differs between devices lives in the facts
    target_kinds()                         # ("cpu", "cuda", ...) in registration order

A target spec is ``kind`` or ``kind:preset``. A kind's module (``schedule.targets.cpu``,
``schedule.targets.cuda``, or a user's) registers one ``TargetKind`` object that knows
how to detect the facts of this machine, which presets it has, and which schedule space
class serves it. The other packages register their own part per kind (``backends``: the
code generator and compiler; ``autotune``: runner, anchor, description), so adding a
target is adding modules that register, never an ``if kind == ...`` somewhere else.

Naming: a *kind* is the registry key stored in the tuning database ("cpu"); a *preset*
names a known device or ISA of that kind ("avx2", "sm_90", "h200"); *facts* are the
frozen numbers a kind's code reads (vector width, shared memory per block, ...).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

#: Separates the kind from the preset in a target spec.
SPEC_SEPARATOR = ":"


class TargetError(ValueError):
    """An unknown target kind or preset (the message lists the known ones)."""


@dataclass(frozen=True)
class Target:
    """One target: its kind (the registry key), an optional preset and the kind's facts.

    Compared and hashed by value, so two parses of the same spec on one machine are equal.
    """

    kind: str
    preset: str | None
    facts: Any  # the kind's frozen facts dataclass

    def __str__(self) -> str:
        return self.kind if self.preset is None else f"{self.kind}{SPEC_SEPARATOR}{self.preset}"

    @property
    def kind_info(self) -> "TargetKind":
        """The registered ``TargetKind`` of this target."""
        return target_kind(self.kind)

    @property
    def is_gpu(self) -> bool:
        """Whether kernels run on an accelerator (a fact of the kind's facts class)."""
        return bool(getattr(self.facts, "is_gpu", False))

    def with_facts(self, **changes) -> "Target":
        """The same target with some facts replaced (e.g. a smaller shared memory, in tests)."""
        return dataclasses.replace(self, facts=dataclasses.replace(self.facts, **changes))


class TargetKind:
    """What one kind of target knows about itself; subclass and register one object per kind.

    Subclasses set ``name`` and implement ``detect`` (the facts of this machine),
    ``preset_facts`` (the facts of a named preset; ``presets`` lists the names) and
    ``space_class`` (the ``ConfigSpace`` class of the kind, imported inside the method so
    that ``schedule.space`` may import this package). ``space_options`` gives the extra
    fields the space is constructed with (e.g. the GPU limits from the facts).
    """

    name: str = ""
    #: preset name -> whatever ``preset_facts`` needs; the keys are the valid presets.
    presets: dict = {}
    #: The lowering pipeline (``schedule.passes.pipeline``) whose output the kind's code
    #: generator takes: "cpu" (a ``LoweredFunc``) or "gpu" (a ``GPUProgram`` of kernels).
    pipeline: str = "cpu"

    def detect(self):
        raise NotImplementedError

    def preset_facts(self, preset: str):
        raise NotImplementedError

    def space_class(self) -> type:
        raise NotImplementedError

    def space_options(self, target: Target) -> dict:
        return {}

    def parse(self, preset: str | None) -> Target:
        """The target of ``preset`` (None: this machine's facts, as ``detect`` finds them)."""
        if preset is None:
            return Target(self.name, None, self.detect())
        key = preset.lower()
        if key not in self.presets:
            raise KeyError(preset)
        return Target(self.name, key, self.preset_facts(key))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"


_KINDS: dict[str, TargetKind] = {}


def register_target_kind(kind: TargetKind, *, override: bool = False) -> TargetKind:
    """Register ``kind`` under ``kind.name``; registering the same object twice is harmless."""
    name = kind.name
    if not isinstance(name, str) or not name.isidentifier():
        raise TargetError(f"a target kind's name must be an identifier, got {name!r}")
    if name in _KINDS and _KINDS[name] is not kind and not override:
        raise TargetError(f"target kind {name!r} is already registered (pass override=True to replace it)")
    _KINDS[name] = kind
    return kind


def target_kinds() -> tuple[str, ...]:
    """The registered kinds, in registration order."""
    return tuple(_KINDS)


def target_kind(name: str) -> TargetKind:
    try:
        return _KINDS[name]
    except KeyError:
        raise TargetError(f"unknown target {name!r}; {known_targets()}") from None


def known_targets() -> str:
    """``known targets: cpu[:avx2|avx512], cuda[:sm_80|...]`` for error messages."""
    parts = []
    for name, kind in _KINDS.items():
        presets = "|".join(kind.presets)
        parts.append(f"{name}[:{presets}]" if presets else name)
    return "known targets: " + ", ".join(parts)


def parse_target(spec: "str | Target") -> Target:
    """The ``Target`` of a spec such as "cpu", "cpu:avx2", "cuda", "cuda:sm_80", "cuda:h200".

    A ``Target`` is returned as it is. An unknown kind or preset raises ``TargetError``
    with one message listing every known kind and its presets.
    """
    if isinstance(spec, Target):
        return spec
    if not isinstance(spec, str) or not spec.strip():
        raise TargetError(f"a target is a spec like 'cpu' or 'cuda:sm_90', got {spec!r}; {known_targets()}")
    name, sep, preset = spec.strip().partition(SPEC_SEPARATOR)
    kind = _KINDS.get(name.lower())
    if kind is None:
        raise TargetError(f"unknown target {spec!r}; {known_targets()}")
    if sep and not preset:
        raise TargetError(f"target {spec!r} names no preset after {SPEC_SEPARATOR!r}; {known_targets()}")
    try:
        return kind.parse(preset if sep else None)
    except KeyError:
        raise TargetError(f"unknown target {spec!r}: {kind.name} has no preset {preset!r}; "
                          f"{known_targets()}") from None


class KindTable:
    """One package's part per target kind: ``backends`` keeps its backend factories in one,
    ``autotune`` its tuning parts, so each package registers beside the kind, not in it."""

    def __init__(self, what: str):
        self.what = what  # how errors name a part: "backend", "tuning parts"
        self._parts: dict[str, Any] = {}

    def register(self, kind: str, part, *, override: bool = False):
        """Make ``part`` the one of ``kind``; registering the same object twice is harmless."""
        if kind in self._parts and self._parts[kind] is not part and not override:
            raise TargetError(f"the {self.what} of target kind {kind!r} is already registered "
                              f"(pass override=True to replace it)")
        self._parts[kind] = part
        return part

    def kinds(self) -> tuple[str, ...]:
        return tuple(self._parts)

    def values(self) -> list:
        return list(self._parts.values())

    def part_of(self, target: "str | Target"):
        """The part of ``target``'s kind (a spec or a Target)."""
        kind = parse_target(target).kind
        try:
            return self._parts[kind]
        except KeyError:
            raise TargetError(f"target kind {kind!r} has no {self.what} registered "
                              f"(kinds with one: {', '.join(self._parts) or 'none'})") from None
