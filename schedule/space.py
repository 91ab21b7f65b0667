"""The schedule space of a workload: sketches derived from its DAG, configs replayed.

    space = ConfigSpace.from_workload(te.create_workload("matmul", M=64, N=64, K=64))
    print(space.describe())                 # the sketch and its knobs
    config = space.sample(rng)              # a Config: plain, JSON-able decisions
    space.check(config)                     # None, or why the config is invalid
    s, args = space.apply(config)           # a fresh Schedule, ready to lower/build

This module proposes and replays schedules; it neither builds nor measures. The
structure comes from ``sketch.derive_sketch`` (which stages inline, which get
multi-level tiling, which epilogues fuse); the numbers (split factors per level,
compute location, how many outer loops run in parallel, unroll depth, reduction
order) are the knobs of one ``Config``, read through ``schedule.decisions`` as typed
per-stage decisions. Split factors need not divide their extent: the lowering guards
the tails, so prime and odd shapes still get real tilings.
"""
from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass
from typing import ClassVar, Mapping

from te import dtypes
from te.expr import TensorRead, free_vars, post_order
from te.tensor import ComputeOp, PlaceholderOp, Tensor

from .config import Config, ConfigError, Knob, KnobSet, SearchSpace
from .decisions import (AT_BLOCK, AT_OUTER, AT_REGISTER, CPU_CODECS, CPU_MULTI_LEVEL, CPU_SIMPLE, PACK_BLOCK_PANELS,
                        PACK_NONE, PACK_PANELS, PACK_PREPACKED, PANEL_PREFIXES, PRODUCERS_INLINE, PRODUCERS_STORED,
                        REDUCE_INNER, REDUCE_OUTER, VECTOR_LAST, MultiLevelDecisions, ScheduleDecisions, SimpleDecisions,
                        StageCodec, StageDecisions, StageLayout, decode_config)
from .passes.specialize_rows import MAX_COPIES, row_variables
from .sketch import FUSED, INLINE, MULTI_LEVEL, PRECOMPUTED, SIMPLE, Sketch, StagePlan, combines_online, derive_sketch
from .stage import Schedule, create_schedule

SKETCH_VERSION = "cpu-v1"
#: Most configs whose schedule keys a space remembers (a 1000-trial search weighs about 15000).
SCHEDULE_KEYS_KEPT = 50_000
#: Unroll budgets: loops are unrolled innermost-first while the unrolled body stays under this.
UNROLL_STEPS = (0, 16, 64, 256)
#: ... and while the innermost (vector) loop is copied at most this many times: gcc
#: vectorizes each copy as a loop of its own, so a budget of 256 spent on copies of a loop
#: of one instruction (a narrow tile, a short vector) made builds of tens of seconds.
MAX_UNROLLED_LOOP_COPIES = 64
#: Most SIMD bytes one vectorized loop may cover (four 512-bit registers).
MAX_VECTOR_BYTES = 256
#: Largest register tile (innermost S3 level), in elements.
MAX_REGISTER_TILE = 1024
#: Largest local accumulator tile, in bytes.
MAX_LOCAL_BYTES = 256 * 1024


@dataclass(frozen=True)
class RegisterFile:
    """The SIMD registers a CPU multi-level tile's accumulators must fit in (from the
    target's facts: AVX-512 has 32 of 64 bytes, AVX2 16 of 32)."""

    vector_bytes: int = 64
    count: int = 32

    def vectors_needed(self, register_tile: list[int], nbytes: int) -> int:
        """Registers one step of a micro-kernel with this register tile (S3 sizes, the last
        vectorized) keeps live: its accumulators, the vectors of one row of the streamed
        input and one broadcast value."""
        row = -(-register_tile[-1] * nbytes // self.vector_bytes)
        return _prod(register_tile[:-1]) * row + row + 1


def _divisors(n: int) -> list[int]:
    small = [d for d in range(1, int(n ** 0.5) + 1) if n % d == 0]
    return sorted(set(small + [n // d for d in small]))


def factor_candidates(extent: int, limit: int | None = None) -> list[int]:
    """Split factors worth trying for ``extent``: divisors and powers of two; for extents
    with few divisors (primes, odd sizes) also 3..8, which then leave a guarded tail."""
    cands = set(_divisors(extent))
    p = 1
    while p <= extent:
        cands.add(p)
        p *= 2
    if len(_divisors(extent)) <= 4:
        cands.update(range(1, min(extent, 8) + 1))
    limit = extent if limit is None else min(limit, extent)
    return sorted(c for c in cands if c <= limit)


#: Register tile rows offered on every row axis, divisors of its extent or not (a tile with a
#: tail runs a full-tile copy wherever it is whole): the register file decides the best row
#: count, not the extent. AVX2's 16 registers hold 6 rows of two-vector accumulators (12,
#: with a row of the streamed input and a broadcast value), and 4 rows leave the two FMA
#: pipes of a Zen 3 core waiting on the accumulators' latency. A larger register file offers
#: more (``register_rows``).
REGISTER_ROWS = range(1, 9)
#: The register tile width, in vectors, that ``register_rows`` sizes the row counts for: the
#: widest tiles the starting points try (two vectors of the streamed input per row).
ROW_VECTORS = 2


def register_rows(registers: RegisterFile) -> range:
    """The register tile row counts offered on a row axis for ``registers``: ``REGISTER_ROWS``,
    and up to as many rows of ``ROW_VECTORS``-vector accumulators as the file holds beside
    one row of the streamed input and a broadcast value where that is more (AVX-512's 32
    registers: 14 rows, the shape of BLIS's and oneDNN's AVX-512 micro-kernels; AVX2's 16:
    6, so the 8 of ``REGISTER_ROWS``). A count that does not fit beside a wider tile is
    rejected per config by the register check."""
    fits = (registers.count - ROW_VECTORS - 1) // ROW_VECTORS
    return range(REGISTER_ROWS.start, max(REGISTER_ROWS.stop, fits + 1))


def tile_candidates(extent: int, max_inner: int, rows: bool = False,
                    row_counts: range = REGISTER_ROWS) -> tuple[tuple[int, int, int], ...]:
    """(T1, T2, T3) per-level tile sizes with T1*T2*T3 <= extent, T3 <= max_inner; on a row
    axis (``rows``: not vectorized) T3 also takes every count of ``row_counts`` (the target's
    ``register_rows``), and a T3 that does not divide the extent also even cache blocks
    (``even_row_blocks``)."""
    fs = factor_candidates(extent)
    inner = set(fs) | ({r for r in row_counts if r <= extent} if rows else set())
    out = []
    for t3 in sorted(f for f in inner if f <= max_inner):
        for t2 in fs:
            if t2 * t3 > extent:
                break
            for t1 in fs:
                if t1 * t2 * t3 > extent:
                    break
                out.append((t1, t2, t3))
        if rows and extent % t3:
            out += [t for t in even_row_blocks(extent, t3) if t not in out]
    return tuple(out)


#: Most cache blocks ``even_row_blocks`` divides a row axis into.
EVEN_BLOCKS = 4


def even_row_blocks(extent: int, rows: int) -> list[tuple[int, int, int]]:
    """(1, S2, rows) tiles that cut the ``ceil(extent / rows)`` register tiles of a row axis
    into 1 .. ``EVEN_BLOCKS`` cache blocks of nearly equal size: 128 rows in 6-row tiles as
    one block of 22 tiles or two of 11, where powers of two give a block of 16 tiles (96
    rows) and a block of the 32 rows left, which runs mostly empty tiles and leaves one core
    idle for two thirds of the time when the blocks run in parallel."""
    tiles = -(-extent // rows)
    return list(dict.fromkeys((1, even_block(tiles, blocks), rows) for blocks in range(1, EVEN_BLOCKS + 1)))


def even_block(tiles: int, blocks: int) -> int:
    """Tiles per cache block when ``tiles`` are cut into ``blocks`` blocks of nearly equal size."""
    return -(-tiles // blocks)


def _unique_names(ops: list[ComputeOp]) -> dict[ComputeOp, str]:
    names: dict[ComputeOp, str] = {}
    used: set[str] = set()
    for n, op in enumerate(ops):
        name = op.name if op.name not in used else f"{op.name}#{n}"
        used.add(name)
        names[op] = name
    return names


@dataclass
class ConfigSpace(SearchSpace):
    """All schedules of one DAG on the CPU: one sketch, its knobs, and replay.

    ``ConfigSpace.from_tensors(..., target="cuda")`` gives the GPU subclass
    (``schedule.space_gpu``), which overrides the per-role hooks below
    (``_knobs_for``, ``_codecs``, ``_plan_problem``, ``_appliers``, ``_describe_plan``,
    ``_describe_decisions``). The hooks past ``_knobs_for`` see a stage's decisions as
    the typed objects of ``schedule.decisions``, never as knob names.
    """

    inputs: list[Tensor]
    outputs: list[Tensor]
    sketch: Sketch
    knobs: KnobSet
    names: dict
    registers: RegisterFile = RegisterFile()

    sketch_version: ClassVar[str] = SKETCH_VERSION
    #: Whether stages computed from constant weights alone run once, at build time.
    precomputes: ClassVar[bool] = True
    #: Whether the space also holds other algorithms for the DAG (``schedule.alternatives``).
    offers_alternatives: ClassVar[bool] = True

    @classmethod
    def from_workload(cls, workload, target="cpu") -> "ConfigSpace":
        return cls.from_tensors(workload.inputs, workload.outputs, target)

    @classmethod
    def from_tensors(cls, inputs, outputs, target="cpu") -> "ConfigSpace":
        """The space of ``outputs`` on ``target`` (a spec such as "cpu" or "cuda:sm_80", or a
        ``schedule.targets.Target``). Called on a base class, it builds the more specific
        space class the target's kind names (``ConfigSpace`` -> ``GPUConfigSpace`` for cuda);
        the kind also supplies the space's extra fields (the GPU limits from its facts)."""
        from .targets import parse_target

        target = parse_target(target)
        kind = target.kind_info
        space_class = kind.space_class()
        if space_class is not cls and issubclass(space_class, cls):
            return space_class.from_tensors(inputs, outputs, target)
        outputs = list(outputs)
        sketch = derive_sketch(outputs, precompute=cls.precomputes)
        names = _unique_names([p.op for p in sketch.plans])
        options = kind.space_options(target)
        knobs: list[Knob] = []
        for plan in sketch.plans:
            knobs.extend(cls._knobs_for(plan, names[plan.op], options))
        space = cls(list(inputs), outputs, sketch, KnobSet(cls.sketch_version, tuple(knobs)), names, **options)
        space.target = target  # the Target this space was derived for
        if cls.offers_alternatives:
            from .alternatives import AlternativesSpace, alternatives

            others = alternatives(outputs)
            if others:
                space = AlternativesSpace.around(space, {name: cls.from_tensors(inputs, outs, target)
                                                         for name, outs in others.items()})
        return space

    @property
    def args(self) -> list[Tensor]:
        return self.inputs + self.outputs

    # ------------------------------------------------------------ per-role hooks (CPU)

    @staticmethod
    def _knobs_for(plan: StagePlan, name: str, options: Mapping) -> list[Knob]:
        """The knobs of ``plan``'s stage; ``options``: the space's extra fields for its target
        (the kind's ``space_options``: here the register file, which bounds the row counts)."""
        return _plan_knobs(plan, name, options.get("registers", RegisterFile()))

    @staticmethod
    def _codecs() -> Mapping[str, StageCodec]:
        """role -> the codec between that role's knob values and its typed decisions."""
        return CPU_CODECS

    def _plan_problem(self, plan: StagePlan, d: StageDecisions) -> str | None:
        """Why the decisions ``d`` break a limit for ``plan``'s stage (None: they do not)."""
        nbytes = dtypes.nbytes(plan.op.output(0).dtype)
        name = d.stage
        if plan.role == MULTI_LEVEL:
            tiles = d.tiles
            register = _prod(t[2] for t in tiles)
            if register > MAX_REGISTER_TILE:
                return f"{name}: register tile of {register} elements exceeds {MAX_REGISTER_TILE}"
            v = d.vector_index
            vector = tiles[v]
            if vector[2] * nbytes > MAX_VECTOR_BYTES:
                return f"{name}: vector of {vector[2]} lanes exceeds {MAX_VECTOR_BYTES} bytes"
            if d.panel_pack is not None and vector[2] == 1:
                return f"{name}: panels of {d.panel_pack} need a register tile wider than 1 on axis {vector.axis}"
            streams = self._panel_streams[plan.op, v]
            if d.panel_pack is not None and d.panel_pack not in streams:
                return (f"{name}: the register tile vectorizes axis {vector.axis}, which {d.panel_pack} "
                        f"is not read along alone: its panels would not feed the vectors")
            if v != len(tiles) - 1 and d.panel_pack is None:
                return (f"{name}: vectorizing axis {vector.axis} reads {', '.join(streams) or 'its input'} "
                        f"with a stride; only from its panels (pack = panels:/prepacked:)")
            if d.per_register_tile and d.local_pack is not None:
                return (f"{name}: computed per register tile (at = {AT_REGISTER}), it has no cache block step "
                        f"to pack {d.local_pack} for (pack = {d.pack})")
            local = _prod(t[2] if d.per_register_tile else t[1] * t[2] * (t[0] if d.at == AT_OUTER else 1)
                          for t in tiles)
            if local * nbytes > MAX_LOCAL_BYTES and not d.attached:  # attached: a region-sized buffer
                return f"{name}: local tile of {local * nbytes} bytes exceeds {MAX_LOCAL_BYTES}"
            if d.shares_loops and d.siblings < d.parallel:
                return (f"{name}: its siblings share its loops down to the one over axis {d.siblings}, which "
                        f"is inside the parallel loop fusing {d.parallel}; share {d.parallel} or more")
            needed = self.registers.vectors_needed(_vector_last([t[2] for t in tiles], v), nbytes)
            if needed > self.registers.count:
                return (f"{name}: register tile {'x'.join(str(t[2]) for t in tiles)} needs {needed} vector "
                        f"registers; the target has {self.registers.count}")
        elif plan.role == SIMPLE and not getattr(d, "attached", False):
            last = d.tiles[-1][0]
            if last * nbytes > MAX_VECTOR_BYTES * 4:
                return f"{name}: inner loop of {last} elements is too long to vectorize well"
        return None

    @staticmethod
    def _appliers() -> dict:
        """role -> ``apply(s, plan, decisions)`` for the stages this sketch schedules."""
        return {MULTI_LEVEL: _apply_multi_level, SIMPLE: _apply_simple}

    @staticmethod
    def _describe_plan(plan: StagePlan) -> str:
        if plan.role == MULTI_LEVEL:
            how = f"fused into {plan.owner.name}" if plan.owner is not None else "accumulated in a cache_write local tile"
            where = f"; or computed at an outer loop of {plan.host.name}" if plan.host is not None else ""
            padding = (f"; reads {', '.join(p.name for p in plan.guarded)} inlined or stored first"
                       if plan.guarded else "")
            siblings = (f"; siblings {', '.join(op.name for op in plan.siblings)} may share its outer loops"
                        if plan.siblings else "")
            return f"{plan.name}: multi-level tiling S1 R0 S2 R1 S3, {how}{where}{padding}{siblings}"
        if plan.role == FUSED:
            return f"{plan.name}: owns the tiles of {plan.produces.name} (epilogue fused at its a/b loops)"
        if plan.role == INLINE:
            return f"{plan.name}: inlined into its readers"
        if plan.role == PRECOMPUTED:
            return f"{plan.name}: computed once, at build time, from constant weights"
        kind = "reduction" if plan.op.is_reduction else "element-wise"
        where = f"; or computed at an outer loop of {plan.host.name}" if plan.host is not None else ""
        return f"{plan.name}: simple {kind} (parallel outer loops, vectorized inner loop{where})"

    # ------------------------------------------------------------ typed decisions

    def decisions(self, config: Config) -> ScheduleDecisions:
        """``config``'s decisions, one typed object per stage that has knobs (sketch order).

        Raises ConfigError when a knob is missing; whether the values are candidates is
        ``check``'s job.
        """
        return decode_config(config, [layout for _, layout in self._layouts if layout is not None])

    def encode(self, decisions: ScheduleDecisions) -> Config:
        """The config of ``decisions``: ``decisions(config)``'s inverse, byte for byte."""
        return decisions.to_config()

    @functools.cached_property
    def _panel_streams(self) -> dict:
        """(multi-level op, axis it may vectorize) -> ``panel_inputs`` along that axis: what
        ``check`` reads for every config a search weighs, worked out once per space."""
        return {(p.op, v): panel_inputs(p.op, v) for p in self.sketch.plans if p.role == MULTI_LEVEL
                for v in (len(p.op.axis) - 1, *vector_axes(p.op))}

    @functools.cached_property
    def _layouts(self) -> tuple[tuple[StagePlan, StageLayout | None], ...]:
        """Each plan with its role's codec bound to its stage (None: a role without knobs)."""
        codecs = self._codecs()
        return tuple((p, codecs[p.role].bind(self.names[p.op], p.op) if p.role in codecs else None)
                     for p in self.sketch.plans)

    def _plan_decisions(self, config: Config) -> list[tuple[StagePlan, StageDecisions | None]]:
        """Each plan with its decisions in ``config`` (None for roles without knobs); a sibling
        that shares its leader's loops has the leader's decisions, its own knobs ignored."""
        leaders = {}  # leader op -> its decisions, when its siblings share its loops
        out = []
        for p, layout in self._layouts:  # a leader comes before its siblings in sketch order
            if p.leader in leaders:
                d = _as_sibling(leaders[p.leader], p, self.names[p.op])
            else:
                d = layout.decode(config.values) if layout is not None else None
                if getattr(d, "shares_loops", False):
                    leaders[p.op] = d
            out.append((p, d))
        return out

    # ------------------------------------------------------------ validity and replay

    def problem(self, config: Config) -> str | None:
        plan_decisions = self._plan_decisions(config)
        sharing = _sharing_siblings(plan_decisions)
        for plan, d in plan_decisions:
            if plan.op in sharing:  # the leader's decisions, checked with the leader
                continue
            reason = self._plan_problem(plan, d) if d is not None else None
            if reason is not None:
                return reason
        return _attach_problem(plan_decisions, self.names)

    def schedule_key(self, config: Config) -> str:
        """The identity of the schedule ``config`` builds (``_schedule_key``), remembered per
        config: a search asks it of every candidate several times (whether it was scored,
        measured, whose features it shares)."""
        text = config.to_json()
        key = self._schedule_keys.get(text)
        if key is None:
            if len(self._schedule_keys) >= SCHEDULE_KEYS_KEPT:
                self._schedule_keys.clear()
            key = self._schedule_keys[text] = self._schedule_key(config)
        return key

    @functools.cached_property
    def _schedule_keys(self) -> dict[str, str]:
        return {}

    def __getstate__(self) -> dict:
        """What a copy in another process gets: the space, without the remembered keys."""
        state = self.__dict__.copy()
        state.pop("_schedule_keys", None)
        return state

    def _schedule_key(self, config: Config) -> str:
        """The config's JSON without the knobs an attached stage ignores (a simple stage's
        tiles, parallel loops and reduction order; a multi-level stage's tile location and
        parallel loops), or a sibling sharing its leader's loops (all of them, since it takes
        the leader's): they change nothing it builds; and an unroll budget keyed by the
        smallest budget of its knob that unrolls the same loops. Called for every config a
        tuner weighs, so it reads each attach knob's value, and decodes a stage's decisions
        only when its unroll budget is not the knob's smallest."""
        dropped = [names for attach, names in self._ignored_when_attached if config.values.get(attach)]
        gone = set().union(*dropped)
        budgets = self._effective_unroll_budgets(config, gone)
        if not gone and not budgets:
            return config.to_json()
        return Config(config.sketch, {k: budgets.get(k, v) for k, v in config.values.items() if k not in gone}).to_json()

    @staticmethod
    def _unrolled_by(d: StageDecisions, budget: int) -> tuple:
        """Which loops of a multi-level stage an unroll budget unrolls (``unrolled_loops``)."""
        return unrolled_loops(d, budget)

    def _effective_unroll_budgets(self, config: Config, gone: set) -> dict[str, int]:
        """Per multi-level stage whose unroll budget unrolls the same loops as a smaller one
        of the knob's: that smaller budget (``_unrolled_by``). Budgets differ only where a
        register tile's loops are long, so most of a model-guided run's neighbours that differ
        in it alone build one schedule."""
        out = {}
        for layout, name, budgets in self._unroll_knobs:
            budget = config.values.get(name)
            if name in gone or budget is None or budget == budgets[0]:
                continue
            try:
                d = layout.decode(config.values)
                loops = self._unrolled_by(d, budget)
            except (ConfigError, KeyError, TypeError, ValueError, IndexError):  # not a valid config: keyed as it is
                continue
            same = next((b for b in budgets if b <= budget and self._unrolled_by(d, b) == loops), budget)
            if same != budget:
                out[name] = same
        return out

    @functools.cached_property
    def _unroll_knobs(self) -> tuple[tuple[StageLayout, str, tuple[int, ...]], ...]:
        """(layout, knob name, its budgets in increasing order) of every multi-level stage."""
        candidates = {k.name: k.candidates for k in self.knobs.knobs}
        out = []
        for plan, layout in self._layouts:
            if layout is None or plan.role != MULTI_LEVEL:
                continue
            for f, knobs in layout.fields:
                if f.attr == "unroll":
                    for name, _ in knobs:
                        out.append((layout, name, tuple(sorted(candidates[name]))))
        return tuple(out)

    @functools.cached_property
    def _hosted_layouts(self) -> tuple:
        """(plan, layout) of every stage with a host, in sketch order."""
        return tuple((p, layout) for p, layout in self._layouts if p.host is not None and layout is not None)

    @functools.cached_property
    def _ignored_when_attached(self) -> tuple[tuple[str, frozenset], ...]:
        """Per stage with a host: its attach knob's name and the knobs it then ignores."""
        out = []
        for plan, layout in self._hosted_layouts:
            ignored = _IGNORED_WHEN_ATTACHED[plan.role]
            names = frozenset(name for f, knobs in layout.fields if f.attr in ignored for name, _ in knobs)
            attach = next(name for f, knobs in layout.fields if f.attr == "attach" for name, _ in knobs)
            out.append((attach, names))
        layouts = {p.op: layout for p, layout in self._layouts}
        for plan, layout in self._layouts:
            if plan.siblings and layout is not None:
                share = next(name for f, knobs in layout.fields if f.attr == "siblings" for name, _ in knobs)
                names = frozenset(name for op in plan.siblings for _, knobs in layouts[op].fields for name, _ in knobs)
                out.append((share, names))
        return tuple(out)

    def apply(self, config: Config, candidates: bool = True) -> tuple[Schedule, list[Tensor]]:
        """A fresh schedule with ``config``'s decisions, and the argument list to build it with.

        ``candidates=False`` takes decisions that are not this space's candidates: a config
        tuned for another size of the same DAG (a dynamic dimension's bucket), whose split
        factors split these loops as they are (a factor past an extent covers the extent);
        the limits (``problem``) are still checked."""
        reason = self.check(config) if candidates else self.problem(config)
        if reason is not None:
            raise ConfigError(f"invalid config: {reason}")
        s = create_schedule(self.outputs)
        for op in self._precomputed_results:
            s.precompute(op.output(0))
        plan_decisions = self._plan_decisions(config)
        stored = _stored_producers(plan_decisions)
        for plan in self.sketch.plans:
            if plan.role == INLINE:
                if plan.op in stored:
                    _apply_stored_producer(s, plan.op)
                else:
                    s[plan.op].compute_inline()
        appliers = self._appliers()
        host_loops: dict = {}  # stage -> what its applier returned: its loops by attach level
        attached = []
        leaders = {plan.op: (plan, d) for plan, d in plan_decisions if getattr(d, "shares_loops", False)}
        for plan, d in plan_decisions:
            if _attach_level(d):
                attached.append((plan, d))  # once its host's loops exist
            elif plan.leader in leaders:  # tiled as its leader, then inside the leader's loops
                lead, lead_d = leaders[plan.leader]
                _apply_multi_level(s, plan, d)
                _owner_stage(s, plan).compute_with(*host_loops[lead.op][lead_d.siblings - 1])
            elif plan.role in appliers:
                host_loops[plan.op] = appliers[plan.role](s, plan, d)
        while attached:  # a host first, when it is attached itself (a combine inside the output's loop)
            ready = [(plan, d) for plan, d in attached if plan.host in host_loops]
            if not ready:
                raise ConfigError(f"invalid config: {', '.join(self.names[p.op] for p, _ in attached)} "
                                  f"attach to hosts that are never scheduled")
            for plan, d in ready:
                at = host_loops[plan.host][d.attach - 1]
                if at is None:
                    raise ConfigError(f"invalid config: {self.names[plan.op]} attaches at loop {d.attach} of "
                                      f"{self.names[plan.host]}, which is computed inside another stage's loop")
                if plan.role == MULTI_LEVEL:
                    host_loops[plan.op] = _apply_attached_multi_level(s, plan, d, at)
                else:
                    _apply_attached(s, plan, at)
                    host_loops[plan.op] = []
            attached = [(p, d) for p, d in attached if p.op not in host_loops]
        return s, self.args

    @functools.cached_property
    def _precomputed_results(self) -> tuple:
        """The precomputed stages a stage of the kernel reads (each brings what it reads)."""
        pre = {p.op for p in self.sketch.plans if p.role == PRECOMPUTED}
        read = {t.op for p in self.sketch.plans if p.op not in pre for t in p.op.input_tensors}
        return tuple(p.op for p in self.sketch.plans if p.op in pre and p.op in read)

    def starting_points(self, rng) -> list[Config]:
        """Micro-kernel-shaped configs (``schedule.starting_points``): where a search begins."""
        from .starting_points import starting_points

        return starting_points(self, rng)

    # ------------------------------------------------------------ explanation

    def describe(self) -> str:
        lines = [f"sketch {self.sketch_version}:"]
        lines += ["  " + self._describe_plan(p) for p in self.sketch.plans]
        lines.append(f"knobs ({self.size} combinations):")
        for k in self.knobs.knobs:
            lines.append(f"  {k.name}: {len(k.candidates)} candidates - {k.doc}")
        return "\n".join(lines)

    def describe_config(self, config: Config) -> str:
        """One line per stage that says what ``config`` decides for it."""
        lines = []
        plan_decisions = self._plan_decisions(config)
        stored = _stored_producers(plan_decisions)
        sharing = _sharing_siblings(plan_decisions)
        for plan, d in plan_decisions:
            if plan.op in sharing:
                lines.append(f"{self.names[plan.op]}: computed with {self.names[plan.leader]}, inside its outer "
                             f"loops, with its tiles")
            elif d is not None:
                lines.append(self._describe_decisions(plan, d))
            elif plan.role == INLINE:
                how = "computed on its own, in parallel, before its readers" if plan.op in stored else "inlined"
                lines.append(f"{self.names[plan.op]}: {how}")
            elif plan.role == PRECOMPUTED:
                lines.append(f"{self.names[plan.op]}: computed once, at build time")
        return "\n".join(lines)

    @staticmethod
    def _describe_decisions(plan: StagePlan, d: StageDecisions) -> str:
        where = ""
        if d.attached and d.attach == reduction_level(plan.host):
            where = (f"computed inside {plan.host.name}'s loop over the outer tile of its reduction "
                     f"{plan.host.reduce_axis[0].name}, for what one step reads")
        elif d.attached:
            where = (f"computed inside {plan.host.name}'s outer loop over its axis "
                     f"{plan.host.axis[d.attach - 1].name}, for what one iteration reads")
        if isinstance(d, MultiLevelDecisions):
            tiles = ", ".join(f"{t.axis}: {t}" for t in d.tiles)
            red = ", ".join(f"{r.axis}: {r[0]}" for r in d.reduce_tiles)
            level = (f"computed per register tile (the {d.at}-level loop), the whole reduction inside"
                     if d.per_register_tile else f"computed at the {d.at}-level loop")
            placed = (f"{where}, tiled S1 R0 S2 R1 S3 over it" if d.attached else
                      f"{level}; {d.parallel} outer loop(s) fused in parallel")
            padding = ""
            if d.producers is not None:
                padding = "; padding stored first" if d.stores_producers else "; padding inlined"
            vector = f"; vectorized over {d.vector_tile.axis}" if d.vector not in (None, VECTOR_LAST) else ""
            siblings = ""
            if d.siblings is not None:
                siblings = (f"; its siblings share its outer loops down to the one over axis {d.siblings}"
                            if d.shares_loops else "; its siblings in loops of their own")
            return (f"{d.stage}: tiles (b x S2 x S3) {tiles}; inner reduction {red}; "
                    f"{_describe_pack(d)}{padding}{vector}; {placed}; unroll budget {d.unroll}{siblings}")
        if d.attached:
            return f"{d.stage}: {where}"
        tiles = ", ".join(f"{t.axis}: {t[0]}" for t in d.tiles)
        order = f"; reduction {d.order}" if d.order is not None else ""
        return f"{d.stage}: inner tiles {tiles}; {d.parallel} outer loop(s) in parallel{order}"


#: Decisions of a stage that do nothing once it is computed at its host's loop, by role: a
#: simple stage's loops cover the region as they are; a multi-level stage still tiles it.
_IGNORED_WHEN_ATTACHED = {SIMPLE: frozenset({"tiles", "parallel", "order"}),
                          MULTI_LEVEL: frozenset({"at", "parallel"})}


def _attach_level(d: StageDecisions | None) -> int:
    """The host loop a stage is computed at (0: on its own)."""
    return getattr(d, "attach", None) or 0


def _attach_problem(plan_decisions, names: dict) -> str | None:
    """Why the stages computed at their host's loops cannot run there: every stage that
    reads an attached stage must run inside the same loop (attached at it or deeper), or
    the values it reads would not exist yet (None: they all can)."""
    level = {plan.op: _attach_level(d) for plan, d in plan_decisions}
    panels = {getattr(d, "pack", "") for _, d in plan_decisions}
    per_register_tile = {plan.op for plan, d in plan_decisions if getattr(d, "per_register_tile", False)}
    for plan, d in plan_decisions:
        if not level[plan.op]:
            continue
        if plan.host in per_register_tile and level[plan.op] == reduction_level(plan.host):
            return (f"{names[plan.op]}: computed at {names[plan.host]}'s outer reduction loop, which runs "
                    f"inside each of its register tiles (at = {AT_REGISTER}): it would be computed once per tile")
        for prefix in (PACK_PANELS, PACK_BLOCK_PANELS):
            if prefix + names[plan.op] in panels:
                return (f"{names[plan.op]}: computed at {names[plan.host]}'s loop {level[plan.op]}, but a reader "
                        f"copies it into panels (pack = {prefix}{names[plan.op]})")
        for reader in plan.readers:
            if reader is not plan.host and level[reader] < level[plan.op]:
                where = "on its own" if level[reader] == 0 else f"at the host's loop {level[reader]}"
                return (f"{names[plan.op]}: computed at {names[plan.host]}'s loop {level[plan.op]}, but its "
                        f"reader {names[reader]} is computed {where}, outside that loop")
    return None


def _sharing_siblings(plan_decisions) -> set:
    """The stages that run inside their leader's loops, with its decisions (horizontal fusion)."""
    return {op for plan, d in plan_decisions if getattr(d, "shares_loops", False) for op in plan.siblings}


def _as_sibling(lead: MultiLevelDecisions, plan: StagePlan, name: str) -> MultiLevelDecisions:
    """The leader's decisions ``lead`` for its sibling ``plan`` (named ``name``): the same
    tiles on its own axes, packing its counterpart of the input the leader packs."""
    op = plan.op
    pack = lead.pack
    for prefix in (*PANEL_PREFIXES, ""):
        rest = pack[len(prefix):]
        if pack.startswith(prefix) and rest in plan.sibling_inputs:
            pack = prefix + plan.sibling_inputs[rest]
            break
    vector = lead.vector if lead.vector in (None, VECTOR_LAST) else op.axis[lead.vector_index].name
    return dataclasses.replace(
        lead, stage=name, pack=pack, vector=vector, siblings=None,
        tiles=tuple(dataclasses.replace(t, axis=iv.name) for t, iv in zip(lead.tiles, op.axis)),
        reduce_tiles=tuple(dataclasses.replace(t, axis=iv.name) for t, iv in zip(lead.reduce_tiles, op.reduce_axis)))


def _owner_stage(s: Schedule, plan: StagePlan):
    """The stage whose loops carry a multi-level stage's tiles: its fused owner, or itself
    (holding the ``cache_write`` copy-out)."""
    return s[plan.owner] if plan.owner is not None else s[plan.op]


def _stored_producers(plan_decisions) -> set:
    """The inlinable producers (padding) that some multi-level stage's decisions store first."""
    return {op for plan, d in plan_decisions if getattr(d, "stores_producers", False) for op in plan.guarded}


def _vector_last(items: list, v: int) -> list:
    """``items`` (one per spatial axis) with the vectorized axis's moved last: the register
    tile's loop order."""
    return items[:v] + items[v + 1:] + [items[v]]


def _describe_pack(d: MultiLevelDecisions) -> str:
    if d.panel_pack is not None:
        when = ("once, at build time" if d.panels_at_build_time
                else "per cache block and outer reduction step" if d.panels_per_block else "on every call")
        return f"packs {d.panel_pack} into panels {d.vector_tile[2]} wide along {d.vector_tile.axis} {when}"
    return "no packing" if d.local_pack is None else f"packs {d.local_pack}"


def _prod(xs) -> int:
    n = 1
    for x in xs:
        n *= x
    return n


# ---------------------------------------------------------------- knobs per role


def _plan_knobs(plan: StagePlan, name: str, registers: RegisterFile) -> list[Knob]:
    """The candidates of each decision of ``plan``'s stage (names and docs: the codec's), the
    register tile's row counts those ``registers`` hold (``register_rows``)."""
    op = plan.op
    lanes = max(1, MAX_VECTOR_BYTES // dtypes.nbytes(op.output(0).dtype))
    last = len(op.axis) - 1
    parallel = tuple(range(1, len(op.axis) + 1))
    if plan.role == MULTI_LEVEL:
        others = vector_axes(op)
        panels = [name for v in (last, *others) for name in panel_inputs(op, v)]
        return CPU_MULTI_LEVEL.knobs(
            name, op,
            tiles=[tile_candidates(iv.extent, lanes) if n == last or n in others
                   else tile_candidates(iv.extent, 16, rows=True, row_counts=register_rows(registers))
                   for n, iv in enumerate(op.axis)],
            reduce_tiles=[factor_candidates(iv.extent, 512) for iv in op.reduce_axis],
            at=(AT_OUTER, AT_BLOCK, AT_REGISTER), parallel=parallel, unroll=UNROLL_STEPS,
            pack=(PACK_NONE,) + tuple(t.name for t in op.input_tensors)
            + tuple(PACK_PANELS + name for name in panels)
            + tuple(PACK_PREPACKED + name for name in panels if name in layout_free_inputs(op))
            + (tuple(PACK_BLOCK_PANELS + name for name in panels) if op.reduce_axis else ()),
            attach=_attach_candidates(plan),
            producers=(PRODUCERS_INLINE, PRODUCERS_STORED) if plan.guarded else None,
            vector=(VECTOR_LAST, *(op.axis[v].name for v in others)) if others else None,
            siblings=tuple(range(len(op.axis) + 1)) if plan.siblings else None)
    if plan.role == SIMPLE:
        rows = row_axes(op)
        return CPU_SIMPLE.knobs(
            name, op,
            tiles=[(iv.extent,) if n in rows else factor_candidates(iv.extent, 4 * lanes if n == last else 64)
                   for n, iv in enumerate(op.axis)],
            parallel=parallel, order=(REDUCE_INNER, REDUCE_OUTER) if op.is_reduction else None,
            attach=_attach_candidates(plan))
    return []


def reduction_level(host: ComputeOp) -> int:
    """The attach level of a host's loop over the outer tile of its (first) reduction axis:
    one past its spatial axes."""
    return len(host.axis) + 1


def _attach_candidates(plan: StagePlan) -> tuple[int, ...] | None:
    """For a stage with a host: 0 (on its own) and the host's outer loops over the leading
    axes the stage shares with it (at least the first). A loop over an axis the stage does
    not have would compute the whole stage again in every iteration (softmax's row
    maximum inside the loop over column tiles): never faster, and such a candidate can
    take seconds to measure. A host that combines blocks online (``te.softmax_sum``:
    FlashAttention's loop over key blocks) offers its loop over the outer tile of its
    reduction instead (``reduction_level``): the stage's blocks one step at a time."""
    if plan.host is None:
        return None
    if combines_online(plan.host):
        return (0, reduction_level(plan.host))
    mine, host = plan.op.output(0).shape, plan.host.output(0).shape
    shared = 0
    while shared < min(len(mine), len(host)) and mine[shared] == host[shared]:
        shared += 1
    return tuple(range(max(1, shared) + 1))


#: Compute attribute naming the inputs whose layout the schedule may choose, because their
#: values are fixed before the kernel runs (weights): TVM's ``layout_free_placeholders``.
LAYOUT_FREE = "layout_free_placeholders"


def row_axes(op: ComputeOp) -> set[int]:
    """Axes (not the last) of at most ``MAX_COPIES`` iterations whose variable picks a branch
    of a select by equality: the row of a constant matrix written into the body
    (``te.ops.winograd``). Such an axis is not split: its loop stays whole, so lowering copies
    it out per row (``passes.specialize_rows``) instead of choosing the row per element."""
    chosen = row_variables([op.body])
    return {n for n, iv in enumerate(op.axis[:-1]) if iv.var in chosen and iv.extent <= MAX_COPIES}


def layout_free_inputs(op: ComputeOp) -> tuple[str, ...]:
    """Names of the placeholders ``op`` declares layout-free (its ``LAYOUT_FREE`` attribute)
    that it reads directly: those may be packed once, at build time."""
    read = {t.name for t in op.input_tensors if isinstance(t.op, PlaceholderOp)}
    return tuple(name for name in op.attrs.get(LAYOUT_FREE, ()) if name in read)


def vector_axes(op: ComputeOp) -> list[int]:
    """Spatial axes other than the last that a register tile may vectorize: those along
    which a layout-free input (weights) is read alone, so that input can stream from panels
    packed at build time while the others are broadcast (conv2d NCHW's output channel
    ``k``: ``kernel[k, c, r, s]``). The last axis, which the output is contiguous along, is
    always a candidate; vectorizing another pays off where it is short or strided (a 7x7
    output, a stride-2 window). Every other input must ignore the axis (be broadcast along
    it): depthwise_conv2d's data is read along its channels too, with a stride."""
    free = set(layout_free_inputs(op))
    reads = [n for n in post_order(op.body) if isinstance(n, TensorRead)]

    def others_ignore(axis: int) -> bool:  # every other input is broadcast along the axis
        var = op.axis[axis].var
        return not any(var in free_vars(idx) for r in reads if r.tensor.name not in free for idx in r.indices)

    return [n for n in range(len(op.axis) - 1) if free & set(panel_inputs(op, n)) and others_ignore(n)]


def panel_inputs(op: ComputeOp, axis: int = -1) -> dict[str, int]:
    """Inputs of ``op`` that can be packed into panels along its spatial axis ``axis`` (the
    innermost by default): name -> the dimension every read of that input indexes by that
    axis alone (``B[k, j]`` of matmul: 1; ``W[j, k]`` of dense: 0)."""
    inner = op.axis[axis].var
    found: dict[str, int] = {}
    dropped: set[str] = set()
    for read in (n for n in post_order(op.body) if isinstance(n, TensorRead)):
        name = read.tensor.name
        dims = [d for d, idx in enumerate(read.indices) if idx is inner]
        if len(dims) != 1 or found.get(name, dims[0]) != dims[0]:
            dropped.add(name)
        else:
            found[name] = dims[0]
    return {name: dim for name, dim in found.items() if name not in dropped}


# ---------------------------------------------------------------- replay per role


def _split_levels(stage, axis, sizes: list[int]):
    """Split ``axis`` into len(sizes)+1 loops whose inner extents are ``sizes`` (outer first)."""
    loops = []
    rest = axis
    for n in range(len(sizes)):
        outer, rest = stage.split(rest, factor=_prod(sizes[n:]))
        loops.append(outer)
    return loops + [rest]


def _parallel_outer(stage, outer_axes: list, count: int):
    """Fuse the first ``count`` outer loops and run the result in parallel; returns the new outer list."""
    fused = stage.fuse(*outer_axes[:count]) if count > 1 else outer_axes[0]
    stage.parallel(fused)
    return [fused] + outer_axes[count:]


def _apply_multi_level(s: Schedule, plan: StagePlan, d: MultiLevelDecisions) -> list:
    op = plan.op
    tiles = d.tiles
    if plan.owner is None:
        cache = s.cache_write(op.output(0), "local")
        owner, tiled = s[op], s[cache]
    else:
        owner, tiled = s[plan.owner], s[op]
        tiled.set_scope("local")  # a per-tile temporary of the fused epilogue
    if d.panel_pack is not None and not d.panels_per_block:
        _pack_panels(s, tiled, d.panel_pack, d.vector_tile, d.panels_at_build_time, d.vector_index)
    # The owner: a (outer, parallel) / b (cache block) / c (what one local tile covers) per
    # spatial axis; computed per register tile, c is one register tile, inside the S2 loops.
    inner = [[t[0], t[1], t[2]] if d.per_register_tile else [t[0], t[1] * t[2]] for t in tiles]
    split = [_split_levels(owner, iv, sizes) for iv, sizes in zip(owner.op.axis, inner)]
    by_level = [[loops[n] for loops in split] for n in range(len(split[0]))]  # a, b, (S2,) c
    owner.reorder(*(loop for level in by_level for loop in level))
    a_axes, b_axes, c_axes = by_level[0], by_level[1], by_level[-1]
    if inner[-1][-1] > 1:
        owner.vectorize(c_axes[-1])
    a_after = _parallel_outer(owner, a_axes, d.parallel)
    # at the loop just outside c (the last b or S2 loop), or at the outer one
    tiled.compute_at(owner, a_after[-1] if d.at == AT_OUTER else by_level[-2][-1])
    reduce_outer = _tile_region(s, tiled, d, levels=3 if d.at == AT_OUTER else 1 if d.per_register_tile else 2,
                                block_loop=(owner, b_axes[-1]))
    # where a stage attached at each level goes: the a-level loop over each axis, then the
    # loop over the outer reduction tile (``reduction_level``)
    return [(owner, loop) for loop in [a_after[0]] * d.parallel + a_after[1:]] + _reduce_loops(tiled, reduce_outer)


def _reduce_loops(tiled, reduce_outer: list) -> list:
    """(stage, loop) of the outer reduction tile a stage attaches to at ``reduction_level``."""
    return [(tiled, reduce_outer[0])] if reduce_outer else []


def _apply_attached_multi_level(s: Schedule, plan: StagePlan, d: MultiLevelDecisions, at) -> list:
    """Compute ``plan``'s multi-level stage inside its host's loop ``at`` ((stage, loop)),
    tiled S1 R0 S2 R1 S3 over what one iteration of that loop reads (a block of attention's
    score rows). Returns where stages it hosts attach: only its outer reduction loop (its
    a-level loops do not exist), at index ``reduction_level - 1``."""
    tiled = s[plan.op]
    if d.panel_pack is not None and not d.panels_per_block:
        _pack_panels(s, tiled, d.panel_pack, d.vector_tile, d.panels_at_build_time, d.vector_index)
    tiled.compute_at(*at)
    reduce_outer = _tile_region(s, tiled, d, levels=3)
    return [None] * len(plan.op.axis) + _reduce_loops(tiled, reduce_outer)


def _tile_region(s: Schedule, tiled, d: MultiLevelDecisions, levels: int, block_loop=None) -> list:
    """Tile a multi-level stage over the region it computes where it is attached:
    ``S1 R0 S2 R1 S3`` (3 ``levels`` of spatial loops; 2: ``R0 S2 R1 S3``, the cache block
    already outside; 1: ``R0 R1 S3``, one register tile), the S3 loop of the vectorized axis
    innermost and vectorized (the register tile's accumulators are laid out in that order),
    the input ``d.local_pack`` copied per
    outer reduction step, panels per block (``d.panels_per_block``) packed there too, or
    with one register tile at ``block_loop`` (the owner's (stage, cache block loop)) the
    whole reduction long, the innermost small loops unrolled within ``d.unroll`` (and
    ``MAX_UNROLLED_LOOP_COPIES``). Returns the R0 loops."""
    tiles = d.tiles
    s1, s2, s3 = [], [], []
    for iv, t in zip(tiled.op.axis, tiles):
        loops = _split_levels(tiled, iv, [t[1], t[2]][3 - levels:])  # S1, S2, S3: the last ``levels``
        s3.append(loops[-1])
        if levels > 1:
            s2.append(loops[-2])
        if levels > 2:
            s1.append(loops[0])
    r0, r1 = [], []
    for iv, rt in zip(tiled.op.reduce_axis, d.reduce_tiles):
        x0, x1 = tiled.split(iv, factor=rt[0])
        r0.append(x0)
        r1.append(x1)
    v = d.vector_index
    s3_order = _vector_last(s3, v)
    tiled.reorder(*s1, *r0, *s2, *r1, *s3_order)
    _pack_input(s, tiled, d.local_pack, r0[-1])
    if d.panels_per_block:
        _pack_panels(s, tiled, d.panel_pack, tiles[v], at_build_time=False, axis=v,
                     at=(tiled, r0[-1]) if levels > 1 else block_loop)
    if tiles[v][2] > 1:
        tiled.vectorize(s3[v])
    candidates = list(reversed(s3_order[:-1])) + list(reversed(r1)) + list(reversed(s2))
    for n in unrolled_loops(d, d.unroll):
        tiled.unroll(candidates[n])
    return r0


def _unroll_extents(d: MultiLevelDecisions) -> list[int]:
    """The extents of the loops ``_tile_region`` may unroll, in the order it tries them:
    the register tile's rows (S3 but the vectorized axis), the inner reduction loops (R1),
    then the S2 loops (none when computed per register tile), each level innermost first."""
    s3 = _vector_last([t[2] for t in d.tiles], d.vector_index)
    s2 = [] if d.per_register_tile else [t[1] for t in reversed(d.tiles)]
    return list(reversed(s3[:-1])) + [rt[0] for rt in reversed(d.reduce_tiles)] + s2


def unrolled_loops(d: MultiLevelDecisions, budget: int) -> tuple[int, ...]:
    """Which of the loops of ``_unroll_extents`` (their positions) an unroll ``budget``
    unrolls: innermost first, while the copies of the vector loop's body (in 16-lane
    instructions) stay within the budget and the copies within ``MAX_UNROLLED_LOOP_COPIES``;
    loops of one iteration take no unrolling."""
    extents = _unroll_extents(d)
    vector_body = max(1, -(-d.vector_tile[2] // 16))
    copies = 1  # of the vector loop, once the loops so far are unrolled
    out = []
    for n, extent in enumerate(extents):
        copies *= extent
        if copies * vector_body > budget or copies > MAX_UNROLLED_LOOP_COPIES:
            break
        if extent > 1:
            out.append(n)
    return tuple(out)


def _pack_input(s: Schedule, tiled, tensor_name: str | None, at) -> None:
    """Copy the tile of input ``tensor_name`` that one outer reduction step reads into a
    contiguous local buffer (GotoBLAS-style packing; the copy is reused by the S2 loops)."""
    if tensor_name is None:
        return
    tensor = next(t for t in tiled.op.input_tensors if t.name == tensor_name)
    packed = s.cache_read(tensor, "local", [tiled])
    s[packed].compute_at(tiled, at)


#: The most columns of zeros, as a share of the extent, that padding panels to whole outer
#: blocks may add (``_pack_panels``): every one of them is computed.
MAX_PADDED_SHARE = 1 / 16


def _pack_panels(s: Schedule, tiled, tensor_name: str, tile, at_build_time: bool, axis: int = -1,
                 at=None) -> None:
    """Rewrite input ``tensor_name`` into panels as wide as the register tile (``tile``: the
    (b, S2, S3) tile of the vectorized axis), so the tiled stage's micro-kernel streams one
    contiguous panel as the reduction advances; the copy's rows are vectorized. By default
    the copy runs before the tiled stage, in parallel over panels. ``at`` ((stage, loop):
    ``tiled``'s outer reduction loop, or the owner's cache block loop for a stage computed
    per register tile): only the panels one iteration reads are packed, right there
    (GotoBLAS: a block of panels packed where it is used, so it is read from cache; bound
    inference narrows the panels to the block). ``at_build_time``: the panels are packed
    once, outside the kernel (``Schedule.rewrite_layout``).

    The panels are padded with zeros to whole outer blocks of the axis (b x S2 x S3
    elements), as BLAS libraries pad their packed panels: every register tile that starts
    inside the extent then computes whole, its overhang reading zeros, where it would
    otherwise be guarded element by element and leave the micro-kernel for a loop of
    variable trip counts (a 1000-wide output's last tile, 8 columns of 16, did so on
    every row). The overhang is then computed whole too, tiles past the edge included, so
    a block that would add more than ``MAX_PADDED_SHARE`` of the extent keeps whole panels
    only (and its guards)."""
    tensor = next(t for t in tiled.op.input_tensors if t.name == tensor_name)
    dim = panel_inputs(tiled.op, axis)[tensor_name]
    extent = tensor.shape[dim]
    width, block = tile[2], tile[0] * tile[1] * tile[2]
    panels = -(-extent // block) * (block // width)
    if panels * width - extent > MAX_PADDED_SHARE * extent:
        panels = None  # whole panels: the guards skip the columns past the edge
    if at_build_time:
        s.rewrite_layout(tensor, dim, width, [tiled], panels)
        return
    packed = s.pack_panels(tensor, dim, width, [tiled], panels)
    stage = s[packed]
    outer, *middle, inner = stage.op.axis
    if at is not None:
        stage.compute_at(*at)
    else:
        stage.parallel(stage.fuse(outer, middle[0]) if outer.extent < 64 and middle else outer)
    stage.vectorize(inner)


def _apply_stored_producer(s: Schedule, op: ComputeOp) -> None:
    """Compute an inlinable producer (padding) on its own, before its readers: every axis but
    the last fused into one parallel loop, the last vectorized. Its readers then read a
    buffer, with no condition in their loops."""
    stage = s[op]
    *outer, last = op.axis
    if outer:
        stage.parallel(stage.fuse(*outer) if len(outer) > 1 else outer[0])
    if last.extent > 1:
        stage.vectorize(last)


def _apply_simple(s: Schedule, plan: StagePlan, d: SimpleDecisions) -> list:
    stage = s[plan.op]
    op = stage.op
    outer, inner = [], []
    for iv, t in zip(op.axis, d.tiles):
        o, i = stage.split(iv, factor=t[0])
        outer.append(o)
        inner.append(i)
    reduce_inner = not op.is_reduction or d.order == REDUCE_INNER
    if reduce_inner:
        stage.reorder(*outer, *inner, *op.reduce_axis)
    else:
        stage.reorder(*outer, *op.reduce_axis, *inner)
    if not op.is_reduction or not reduce_inner:
        if d.tiles[-1][0] > 1:
            stage.vectorize(inner[-1])
    after = _parallel_outer(stage, outer, d.parallel)
    # the loop over each axis's outer tile, where a stage attached at that level goes
    return [(stage, loop) for loop in [after[0]] * d.parallel + after[1:]]


def _apply_attached(s: Schedule, plan: StagePlan, at) -> None:
    """Compute ``plan``'s stage inside its host's loop ``at`` ((stage, loop)): its loops
    cover what one iteration reads; an element-wise stage vectorizes its last axis, and a
    reduction keeps its reduction innermost, which the backend folds into a vector
    accumulator."""
    stage = s[plan.op]
    stage.compute_at(*at)
    if not plan.op.is_reduction and plan.op.axis[-1].extent > 1:
        stage.vectorize(plan.op.axis[-1])
