"""Typed schedule decisions and the one codec between them and a config's knob values.

A ``Config`` stores its decisions as a flat dict of JSON values under string keys
(``"C.tile.i": [4, 2, 1]``, ``"C.at": "b"``); that dict is what the tuning database
stores and hashes, so its spelling is a file format. This module is the only place the
format is spelled. Everything else reads typed, frozen decisions:

    decisions = space.decisions(config)   # ScheduleDecisions: the sketch, one entry per stage
    c = decisions["C"]                    # MultiLevelDecisions(stage="C", tiles=..., at="b", ...)
    c.tile("i").sizes, c.at, c.unroll     # (4, 2, 1), "b", 256
    decisions.to_config() == config       # the same Config, byte for byte
    decisions.replace(c.with_tiles(i=(8, 1, 1))).to_config()   # an edited config

Knob names (``<stage>`` is the stage's unique name in the space, ``<axis>`` an axis name):

    <stage>.tile.<axis>     TileDecision of one spatial axis (CPU simple: one number; else a list)
    <stage>.rtile.<axis>    ReduceTileDecision of one reduce axis (CPU: one number; GPU: a list)
    <stage>.at              CPU multi-level: compute location, AT_OUTER ("a"), AT_BLOCK ("b") or
                            AT_REGISTER ("c")
    <stage>.parallel        CPU: how many outer loops fuse into the parallel loop
    <stage>.unroll          unroll budget
    <stage>.pack            CPU multi-level: the input name packed into a local tile, PACK_PANELS
                            + the input name (rewritten once per call into register-tile-wide panels),
                            PACK_BLOCK_PANELS + the input name (those panels, one cache block's per
                            outer reduction step, packed inside the stage's loops),
                            PACK_PREPACKED + the input name (the same panels, packed once at build
                            time: constant weights), or PACK_NONE
    <stage>.producers       CPU multi-level reading padding: PRODUCERS_INLINE or PRODUCERS_STORED
    <stage>.vector          CPU multi-level: the axis its register tile vectorizes, VECTOR_LAST or a name
    <stage>.siblings        CPU multi-level with siblings: 0 (each in loops of its own), or n: they
                            share its outer loops down to the one over its n-th axis (horizontal fusion)
    <stage>.order           CPU simple reduction: REDUCE_INNER or REDUCE_OUTER
    <stage>.threads         GPU simple: threads per block

One ``StageCodec`` per (target, role) lists its decisions as ``_Field``s, in knob order;
from that single list it builds the knobs (the space supplies the candidates), decodes a
config's values into the role's decisions class and encodes them back. Decoding reads
values; whether they are candidates is ``KnobSet.check``'s job.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Iterator, Mapping, Sequence

from .config import Config, ConfigError, Knob
from .sketch import MULTI_LEVEL, SIMPLE

#: CPU multi-level compute locations: at the owner's last outer (parallel) loop, or its last cache-block loop.
AT_OUTER = "a"
AT_BLOCK = "b"
#: CPU multi-level compute location: at the owner's last loop over register tiles, so the
#: local tile is one register tile and the whole reduction runs inside it (no cache block
#: step of the reduction; the tile goes to the output straight from its accumulators).
#: Where a block of the reduction fits in cache with room to spare, this drops the copy of
#: a cache block's local tile out to the output; the reduction is then never blocked.
AT_REGISTER = "c"
#: CPU multi-level packing: no input copied into a local tile.
PACK_NONE = "none"
#: CPU multi-level packing: prefix of a ``pack`` value that rewrites an input into panels as
#: wide as the register tile (``"panels:B"``), once per call, rather than copying a local tile.
PACK_PANELS = "panels:"
#: CPU multi-level packing: prefix of a ``pack`` value that packs the same panels inside the
#: stage's loops, the panels one cache block reads for one outer reduction step at a time
#: (``"block-panels:B"``): GotoBLAS's placement, where the panels stay in cache between being
#: packed and being read, and the input is read from memory once per block instead of being
#: written out whole and read back.
PACK_BLOCK_PANELS = "block-panels:"
#: CPU multi-level packing: prefix of a ``pack`` value that lays an input the op declares
#: layout-free (``attrs["layout_free_placeholders"]``: constant weights) out in those panels
#: once, at build time (``Schedule.rewrite_layout``), so no call pays for the copy.
PACK_PREPACKED = "prepacked:"
#: The ``pack`` prefixes that read an input from panels: per call, per cache block, at build time.
PANEL_PREFIXES = (PACK_PANELS, PACK_BLOCK_PANELS, PACK_PREPACKED)
#: CPU multi-level: the inlined producers with a condition that the stage reads (padding)
#: substituted into its loops (one condition per read, inside the micro-kernel), or stored
#: in a buffer of their own before it runs.
PRODUCERS_INLINE = "inline"
PRODUCERS_STORED = "stored"
#: CPU multi-level: the register tile vectorizes the output's last axis (the default), or
#: the axis a ``vector`` knob names (conv2d's output channels, with the weights in panels).
VECTOR_LAST = "last"
#: CPU simple reductions: reduction loops inside the spatial tile, or outside it.
REDUCE_INNER = "reduce_inner"
REDUCE_OUTER = "reduce_outer"

# What one field of a decisions class ranges over.
_ONE = "one"  # a single knob
_AXIS = "axis"  # one knob per spatial axis of the stage
_REDUCE_AXIS = "reduce_axis"  # one knob per reduce axis of the stage


# ---------------------------------------------------------------- decisions


@dataclass(frozen=True)
class _LevelSizes:
    """Sizes of the inner loop levels of one axis, outermost first; the outermost loop
    (not listed) covers what is left of the extent. Indexable like the stored tuple."""

    axis: str
    sizes: tuple[int, ...]

    def __getitem__(self, level: int) -> int:
        return self.sizes[level]

    def __iter__(self) -> Iterator[int]:
        return iter(self.sizes)

    def __len__(self) -> int:
        return len(self.sizes)

    @property
    def product(self) -> int:
        """Elements one tile of all the listed levels covers."""
        n = 1
        for x in self.sizes:
            n *= x
        return n

    def __str__(self) -> str:
        return "x".join(map(str, self.sizes))


@dataclass(frozen=True)
class TileDecision(_LevelSizes):
    """Tile sizes of one spatial axis. CPU multi-level: (b, S2, S3); CPU simple: (inner,);
    GPU multi-level: (vthread, threads, S3, S4)."""


@dataclass(frozen=True)
class ReduceTileDecision(_LevelSizes):
    """Tile sizes of one reduce axis. CPU multi-level: (R1,); GPU multi-level: (R1, R2)."""


@dataclass(frozen=True)
class StageDecisions:
    """The decisions of one stage; ``stage`` is its unique name in the space."""

    stage: str

    def encode(self) -> dict[str, Any]:
        """The knob values of these decisions, as a ``Config`` stores them."""
        return _CODEC_OF[type(self)].encode(self)

    def tile(self, axis: str) -> TileDecision:
        """The tile of spatial axis ``axis`` (by name)."""
        return _by_axis(getattr(self, "tiles", ()), axis, self.stage)

    def reduce_tile(self, axis: str) -> ReduceTileDecision:
        """The tile of reduce axis ``axis`` (by name)."""
        return _by_axis(getattr(self, "reduce_tiles", ()), axis, self.stage)

    def with_tiles(self, **sizes: Sequence[int]) -> "StageDecisions":
        """A copy with the tiles of the named spatial axes replaced by ``sizes``."""
        return dataclasses.replace(self, tiles=_replaced(self.tiles, sizes, self.stage))

    def with_reduce_tiles(self, **sizes: Sequence[int]) -> "StageDecisions":
        """A copy with the tiles of the named reduce axes replaced by ``sizes``."""
        return dataclasses.replace(self, reduce_tiles=_replaced(self.reduce_tiles, sizes, self.stage))


@dataclass(frozen=True)
class MultiLevelDecisions(StageDecisions):
    """CPU multi-level tiling ("SSRSRS"): per-axis tiles, inner reduction tiles, where the
    tile is computed in its owner, outer loops run in parallel, unroll budget, packing."""

    tiles: tuple[TileDecision, ...]
    reduce_tiles: tuple[ReduceTileDecision, ...]
    at: str
    parallel: int
    unroll: int
    pack: str
    attach: int | None = None
    producers: str | None = None
    vector: str | None = None
    siblings: int | None = None

    @property
    def shares_loops(self) -> bool:
        """Whether its siblings (``StagePlan.siblings``) run inside its outer loops, with its
        tiles (None or 0: each sibling in loops of its own)."""
        return bool(self.siblings)

    @property
    def vector_index(self) -> int:
        """Position in ``tiles`` of the axis the register tile vectorizes: the one ``vector``
        names, or the last (None or VECTOR_LAST: a space without the knob, or a config that
        predates it)."""
        if self.vector in (None, VECTOR_LAST):
            return len(self.tiles) - 1
        for n, t in enumerate(self.tiles):
            if t.axis == self.vector:
                return n
        raise ConfigError(f"{self.stage}.vector: no spatial axis named {self.vector!r}")

    @property
    def vector_tile(self) -> TileDecision:
        """The tile of the vectorized axis."""
        return self.tiles[self.vector_index]

    @property
    def stores_producers(self) -> bool:
        """Whether the padding it reads is stored before it runs rather than inlined into
        its loops (None, a space without the knob or a config that predates it: inlined)."""
        return self.producers == PRODUCERS_STORED

    @property
    def attached(self) -> bool:
        """Computed inside its host's loop ``attach`` (a score block of attention inside the
        loop over the output's rows): then ``at`` and ``parallel`` do not apply, and its
        S1 R0 S2 R1 S3 tiling covers what one iteration of that loop reads."""
        return bool(self.attach)

    @property
    def per_register_tile(self) -> bool:
        """Whether the local tile is one register tile, computed at the owner's loops over
        register tiles with the whole reduction inside (``AT_REGISTER``; not when attached)."""
        return self.at == AT_REGISTER and not self.attached

    @property
    def local_pack(self) -> str | None:
        """The input copied into a local tile at the outer reduction loop, if any."""
        if self.pack == PACK_NONE or self.panel_pack is not None:
            return None
        return self.pack

    @property
    def panel_pack(self) -> str | None:
        """The input rewritten into register-tile-wide panels (per call, per block or at build
        time), if any."""
        for prefix in PANEL_PREFIXES:
            if self.pack.startswith(prefix):
                return self.pack[len(prefix):]
        return None

    @property
    def panels_per_block(self) -> bool:
        """Whether the panels are packed inside the stage's loops, one cache block and outer
        reduction step at a time, rather than whole before it runs."""
        return self.pack.startswith(PACK_BLOCK_PANELS)

    @property
    def panels_at_build_time(self) -> bool:
        """Whether the panels are packed once, at build time, rather than on every call."""
        return self.pack.startswith(PACK_PREPACKED)


@dataclass(frozen=True)
class SimpleDecisions(StageDecisions):
    """CPU simple stage: inner tile per spatial axis, outer loops run in parallel, and for
    a reduction where its loops go (``order``; None for an element-wise stage).

    ``attach`` (stages with a host, else None): 0 computes the stage on its own; n > 0
    computes it inside the host's outer loop over the host's n-th axis, for the region
    that loop's iteration needs (its own tiles and parallel loops then do not apply)."""

    tiles: tuple[TileDecision, ...]
    parallel: int
    order: str | None
    attach: int | None = None

    @property
    def attached(self) -> bool:
        return bool(self.attach)


@dataclass(frozen=True)
class GPUMultiLevelDecisions(StageDecisions):
    """CUDA multi-level tiling ("SSSRRSRS"): per-axis (vthread, threads, S3, S4), per
    reduce axis (R1, R2), unroll budget."""

    tiles: tuple[TileDecision, ...]
    reduce_tiles: tuple[ReduceTileDecision, ...]
    unroll: int


@dataclass(frozen=True)
class GPUSimpleDecisions(StageDecisions):
    """CUDA simple stage: threads per block (all spatial axes fused)."""

    threads: int


@dataclass(frozen=True)
class ScheduleDecisions:
    """The decisions of every stage of one config that has any, in sketch order."""

    sketch: str
    stages: tuple[StageDecisions, ...]

    def __getitem__(self, stage: str) -> StageDecisions:
        for d in self.stages:
            if d.stage == stage:
                return d
        raise KeyError(stage)

    def __iter__(self) -> Iterator[StageDecisions]:
        return iter(self.stages)

    def __len__(self) -> int:
        return len(self.stages)

    def replace(self, decisions: StageDecisions) -> "ScheduleDecisions":
        """A copy with the decisions of ``decisions.stage`` replaced."""
        self[decisions.stage]  # KeyError for a stage that is not here
        return ScheduleDecisions(self.sketch, tuple(decisions if d.stage == decisions.stage else d
                                                    for d in self.stages))

    def to_config(self) -> Config:
        values: dict[str, Any] = {}
        for d in self.stages:
            values.update(d.encode())
        return Config(self.sketch, values)


def _by_axis(items, axis: str, stage: str):
    for item in items:
        if item.axis == axis:
            return item
    raise KeyError(f"{stage} has no tile for axis {axis!r}")


def _replaced(items: tuple, sizes: dict, stage: str) -> tuple:
    unknown = set(sizes) - {item.axis for item in items}
    if unknown:
        raise KeyError(f"{stage} has no tile for axes {sorted(unknown)}")
    return tuple(dataclasses.replace(item, sizes=tuple(sizes[item.axis])) if item.axis in sizes else item
                 for item in items)


# ---------------------------------------------------------------- the codec


@dataclass(frozen=True)
class _Field:
    """One decision of a role: the attribute of its decisions class, its knob key and doc.

    ``over``: one knob (``_ONE``), or one per spatial / reduce axis. ``scalar``: a per-axis
    decision with one level, stored as a plain number rather than a list. ``optional`` (single
    knobs only): absent from stages that do not have it (its attribute is then None).
    """

    attr: str
    key: str
    doc: str
    over: str = _ONE
    scalar: bool = False
    optional: bool = False
    default: Any = None  # a knob added later: what a stored config without it means (``Knob.default``)

    def names(self, stage: str, op) -> list[tuple[str, str | None]]:
        """(knob name, axis name or None) of each knob of this field, in order."""
        if self.over == _ONE:
            return [(f"{stage}.{self.key}", None)]
        axes = op.axis if self.over == _AXIS else op.reduce_axis
        return [(f"{stage}.{self.key}.{iv.name}", iv.name) for iv in axes]

    def decode(self, names: Sequence[tuple[str, str | None]], values: Mapping[str, Any]):
        """The value of this field from its knobs ``names`` (``self.names(...)``) in ``values``."""
        try:
            if self.over == _ONE:
                name = names[0][0]
                return None if self.optional and name not in values else values[name]
            kind = TileDecision if self.over == _AXIS else ReduceTileDecision
            if self.scalar:
                return tuple([kind(axis, (values[name],)) for name, axis in names])
            return tuple([kind(axis, tuple(values[name])) for name, axis in names])
        except KeyError as exc:
            raise ConfigError(f"config has no value for knob {exc.args[0]!r}") from None

    def encode(self, stage: str, value) -> dict[str, Any]:
        if value is None and self.optional:
            return {}
        if self.over == _ONE:
            return {f"{stage}.{self.key}": value}
        out = {}
        for level in value:
            if self.scalar and len(level.sizes) != 1:
                raise ConfigError(f"{stage}.{self.key}.{level.axis}: one level expected, got {level.sizes}")
            out[f"{stage}.{self.key}.{level.axis}"] = level.sizes[0] if self.scalar else tuple(level.sizes)
        return out


@dataclass(frozen=True)
class StageCodec:
    """Knobs <-> decisions of one role on one target (``decisions``: its class)."""

    decisions: type
    fields: tuple[_Field, ...]

    def knobs(self, stage: str, op, **candidates) -> list[Knob]:
        """The knobs of ``op`` (named ``stage``), in field order.

        ``candidates`` maps each field's attribute to its candidates: a tuple of values
        for a single knob, a sequence of tuples (one per axis, in ``op``'s axis order)
        for a per-axis field; None leaves an optional field out.
        """
        knobs: list[Knob] = []
        for f in self.fields:
            cands = candidates[f.attr]
            if cands is None and f.optional:
                continue
            names = f.names(stage, op)
            per_knob = [cands] if f.over == _ONE else list(cands)
            if len(per_knob) != len(names):
                raise ValueError(f"{stage}.{f.key}: {len(per_knob)} candidate lists for {len(names)} axes")
            knobs.extend(Knob(name, tuple(c), f.doc, f.default) for (name, _), c in zip(names, per_knob))
        return knobs

    def bind(self, stage: str, op) -> "StageLayout":
        """This codec for ``op`` named ``stage``, its knob names worked out once."""
        return StageLayout(self, stage, tuple((f, tuple(f.names(stage, op))) for f in self.fields))

    def decode(self, stage: str, op, values: Mapping[str, Any]) -> StageDecisions:
        """The decisions of ``op`` (named ``stage``) in a config's ``values``."""
        return self.bind(stage, op).decode(values)

    def encode(self, decisions: StageDecisions) -> dict[str, Any]:
        """The knob values of ``decisions``: ``decode``'s inverse."""
        values: dict[str, Any] = {}
        for f in self.fields:
            values.update(f.encode(decisions.stage, getattr(decisions, f.attr)))
        return values


@dataclass(frozen=True)
class StageLayout:
    """A codec bound to one stage of one space (a space decodes every config it checks)."""

    codec: StageCodec
    stage: str
    fields: tuple[tuple[_Field, tuple[tuple[str, str | None], ...]], ...]  # each field with its knob names

    def decode(self, values: Mapping[str, Any]) -> StageDecisions:
        return self.codec.decisions(self.stage, **{f.attr: f.decode(names, values) for f, names in self.fields})


_UNROLL = _Field("unroll", "unroll", "unroll budget for the innermost loops")

CPU_MULTI_LEVEL = StageCodec(MultiLevelDecisions, (
    _Field("tiles", "tile", "tile sizes (b, S2, S3) of this spatial axis; the rest is the outer a level", _AXIS),
    _Field("reduce_tiles", "rtile", "inner reduction tile R1 of this reduce axis", _REDUCE_AXIS, scalar=True),
    _Field("at", "at", "loop level of the owner where the tile is computed"),
    _Field("parallel", "parallel", "outer a-level loops fused into the parallel loop"),
    _UNROLL,
    _Field("pack", "pack", "input copied into a contiguous local tile at the outer reduction loop, "
                           "(panels:<input>) rewritten on every call into panels as wide as the register "
                           "tile, or (prepacked:<input>, constant weights) into those panels once, at build time"),
    _Field("attach", "attach", "0: tiled on its own; n: computed inside the host's outer loop over its n-th "
                               "axis, tiled over what one iteration of that loop reads", optional=True, default=0),
    _Field("producers", "producers", "inline: the padding it reads is computed inside its loops, a condition "
                                     "per read; stored: computed into a buffer of its own before it runs",
           optional=True, default=PRODUCERS_INLINE),
    _Field("vector", "vector", "the axis the register tile vectorizes (last: the output's last axis); another "
                               "axis streams an input it indexes from that input's panels", optional=True,
           default=VECTOR_LAST),
    _Field("siblings", "siblings", "0: its siblings (the same computation on the same shared input) run in loops "
                                   "of their own; n: they share its outer loops down to the a-level loop over its "
                                   "n-th axis, with its tiles (horizontal fusion)", optional=True, default=0),
))
CPU_SIMPLE = StageCodec(SimpleDecisions, (
    _Field("tiles", "tile", "inner split of this spatial axis (the last one is vectorized)", _AXIS, scalar=True),
    _Field("parallel", "parallel", "outer loops fused into the parallel loop"),
    _Field("order", "order", "reduction loops inside the spatial tile, or outside it (then the tile vectorizes)",
           optional=True),
    _Field("attach", "attach", "0: computed on its own; n: computed inside the host's outer loop over its "
                               "n-th axis, for what one iteration of that loop reads", optional=True, default=0),
))
GPU_MULTI_LEVEL = StageCodec(GPUMultiLevelDecisions, (
    _Field("tiles", "tile", "(vthread, threads, S3, S4) of this spatial axis; blocks cover the rest", _AXIS),
    _Field("reduce_tiles", "rtile",
           "(R1, R2) of this reduce axis; the shared tile covers R1*R2, R0 loops over the rest", _REDUCE_AXIS),
    _UNROLL,
))
GPU_SIMPLE = StageCodec(GPUSimpleDecisions, (
    _Field("threads", "threads", "threads per block (all spatial axes fused)"),
))

#: role -> codec of each target's sketch.
CPU_CODECS: Mapping[str, StageCodec] = {MULTI_LEVEL: CPU_MULTI_LEVEL, SIMPLE: CPU_SIMPLE}
GPU_CODECS: Mapping[str, StageCodec] = {MULTI_LEVEL: GPU_MULTI_LEVEL, SIMPLE: GPU_SIMPLE}

_CODEC_OF: dict[type, StageCodec] = {c.decisions: c for c in (CPU_MULTI_LEVEL, CPU_SIMPLE, GPU_MULTI_LEVEL, GPU_SIMPLE)}


def decode_config(config: Config, layouts: Sequence[StageLayout]) -> ScheduleDecisions:
    """The decisions of the stages of ``layouts`` (in that order) in ``config``."""
    return ScheduleDecisions(config.sketch, tuple(layout.decode(config.values) for layout in layouts))
