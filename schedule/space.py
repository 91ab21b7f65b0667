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
order) are the knobs of one ``Config``. Split factors need not divide their extent:
the lowering guards the tails, so prime and odd shapes still get real tilings.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from te import dtypes
from te.tensor import ComputeOp, Tensor

from .config import Config, ConfigError, Knob, KnobSet, SearchSpace
from .sketch import FUSED, INLINE, MULTI_LEVEL, SIMPLE, Sketch, StagePlan, derive_sketch
from .stage import Schedule, create_schedule

SKETCH_VERSION = "cpu-v1"
#: Unroll budgets: loops are unrolled innermost-first while the unrolled body stays under this.
UNROLL_STEPS = (0, 16, 64, 256)
#: Most SIMD bytes one vectorized loop may cover (four 512-bit registers).
MAX_VECTOR_BYTES = 256
#: Largest register tile (innermost S3 level), in elements.
MAX_REGISTER_TILE = 1024
#: Largest local accumulator tile, in bytes.
MAX_LOCAL_BYTES = 256 * 1024


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


def tile_candidates(extent: int, max_inner: int) -> tuple[tuple[int, int, int], ...]:
    """(T1, T2, T3) per-level tile sizes with T1*T2*T3 <= extent, T3 <= max_inner."""
    fs = factor_candidates(extent)
    out = []
    for t3 in (f for f in fs if f <= max_inner):
        for t2 in fs:
            if t2 * t3 > extent:
                break
            for t1 in fs:
                if t1 * t2 * t3 > extent:
                    break
                out.append((t1, t2, t3))
    return tuple(out)


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
    (``_knobs_for``, ``_plan_problem``, ``_appliers``, ``_describe_plan``).
    """

    inputs: list[Tensor]
    outputs: list[Tensor]
    sketch: Sketch
    knobs: KnobSet
    names: dict

    sketch_version: ClassVar[str] = SKETCH_VERSION

    @classmethod
    def from_workload(cls, workload, target: str = "cpu") -> "ConfigSpace":
        return cls.from_tensors(workload.inputs, workload.outputs, target)

    @classmethod
    def from_tensors(cls, inputs, outputs, target: str = "cpu") -> "ConfigSpace":
        if target == "cuda" and cls is ConfigSpace:
            from .space_gpu import GPUConfigSpace  # the GPU sketches ("cuda-v1")

            return GPUConfigSpace.from_tensors(inputs, outputs, target)
        if target not in ("cpu", "cuda"):
            raise ConfigError(f"no schedule space for target {target!r} (use 'cpu' or 'cuda')")
        outputs = list(outputs)
        sketch = derive_sketch(outputs)
        names = _unique_names([p.op for p in sketch.plans])
        knobs: list[Knob] = []
        for plan in sketch.plans:
            knobs.extend(cls._knobs_for(plan, names[plan.op]))
        return cls(list(inputs), outputs, sketch, KnobSet(cls.sketch_version, tuple(knobs)), names)

    @property
    def args(self) -> list[Tensor]:
        return self.inputs + self.outputs

    # ------------------------------------------------------------ per-role hooks (CPU)

    @staticmethod
    def _knobs_for(plan: StagePlan, name: str) -> list[Knob]:
        return _plan_knobs(plan, name)

    def _plan_problem(self, plan: StagePlan, name: str, v: dict) -> str | None:
        """Why the decisions ``v`` break a limit for ``plan``'s stage (None: they do not)."""
        nbytes = dtypes.bits(plan.op.output(0).dtype) // 8
        if plan.role == MULTI_LEVEL:
            tiles = [v[f"{name}.tile.{iv.name}"] for iv in plan.op.axis]
            register = _prod(t[2] for t in tiles)
            if register > MAX_REGISTER_TILE:
                return f"{name}: register tile of {register} elements exceeds {MAX_REGISTER_TILE}"
            if tiles[-1][2] * nbytes > MAX_VECTOR_BYTES:
                return f"{name}: vector of {tiles[-1][2]} lanes exceeds {MAX_VECTOR_BYTES} bytes"
            local = _prod(t[1] * t[2] * (t[0] if v[f"{name}.at"] == "a" else 1) for t in tiles)
            if local * nbytes > MAX_LOCAL_BYTES:
                return f"{name}: local tile of {local * nbytes} bytes exceeds {MAX_LOCAL_BYTES}"
        elif plan.role == SIMPLE:
            last = v[f"{name}.tile.{plan.op.axis[-1].name}"]
            if last * nbytes > MAX_VECTOR_BYTES * 4:
                return f"{name}: inner loop of {last} elements is too long to vectorize well"
        return None

    @staticmethod
    def _appliers() -> dict:
        """role -> ``apply(s, plan, name, values)`` for the stages this sketch schedules."""
        return {MULTI_LEVEL: _apply_multi_level, SIMPLE: _apply_simple}

    @staticmethod
    def _describe_plan(plan: StagePlan) -> str:
        if plan.role == MULTI_LEVEL:
            how = f"fused into {plan.owner.name}" if plan.owner is not None else "accumulated in a cache_write local tile"
            return f"{plan.name}: multi-level tiling S1 R0 S2 R1 S3, {how}"
        if plan.role == FUSED:
            return f"{plan.name}: owns the tiles of {plan.produces.name} (epilogue fused at its a/b loops)"
        if plan.role == INLINE:
            return f"{plan.name}: inlined into its readers"
        kind = "reduction" if plan.op.is_reduction else "element-wise"
        return f"{plan.name}: simple {kind} (parallel outer loops, vectorized inner loop)"

    # ------------------------------------------------------------ validity and replay

    def problem(self, config: Config) -> str | None:
        for plan in self.sketch.plans:
            reason = self._plan_problem(plan, self.names[plan.op], config.values)
            if reason is not None:
                return reason
        return None

    def apply(self, config: Config) -> tuple[Schedule, list[Tensor]]:
        """A fresh schedule with ``config``'s decisions, and the argument list to build it with."""
        reason = self.check(config)
        if reason is not None:
            raise ConfigError(f"invalid config: {reason}")
        s = create_schedule(self.outputs)
        for plan in self.sketch.plans:
            if plan.role == INLINE:
                s[plan.op].compute_inline()
        appliers = self._appliers()
        for plan in self.sketch.plans:
            if plan.role in appliers:
                appliers[plan.role](s, plan, self.names[plan.op], config.values)
        return s, self.args

    # ------------------------------------------------------------ explanation

    def describe(self) -> str:
        lines = [f"sketch {self.sketch_version}:"]
        lines += ["  " + self._describe_plan(p) for p in self.sketch.plans]
        lines.append(f"knobs ({self.size} combinations):")
        for k in self.knobs.knobs:
            lines.append(f"  {k.name}: {len(k.candidates)} candidates - {k.doc}")
        return "\n".join(lines)

    def describe_config(self, config: Config) -> str:
        v = config.values
        lines = []
        for plan in self.sketch.plans:
            name = self.names[plan.op]
            if plan.role == MULTI_LEVEL:
                tiles = ", ".join(f"{iv.name}: {'x'.join(map(str, v[f'{name}.tile.{iv.name}']))}" for iv in plan.op.axis)
                red = ", ".join(f"{iv.name}: {v[f'{name}.rtile.{iv.name}']}" for iv in plan.op.reduce_axis)
                pack = v[f"{name}.pack"]
                lines.append(
                    f"{name}: tiles (b x S2 x S3) {tiles}; inner reduction {red}; "
                    f"{'no packing' if pack == 'none' else 'packs ' + pack}; computed at the "
                    f"{v[f'{name}.at']}-level loop; {v[f'{name}.parallel']} outer loop(s) fused in parallel; "
                    f"unroll budget {v[f'{name}.unroll']}"
                )
            elif plan.role == SIMPLE:
                tiles = ", ".join(f"{iv.name}: {v[f'{name}.tile.{iv.name}']}" for iv in plan.op.axis)
                order = f"; reduction {v[f'{name}.order']}" if plan.op.is_reduction else ""
                lines.append(f"{name}: inner tiles {tiles}; {v[f'{name}.parallel']} outer loop(s) in parallel{order}")
            elif plan.role == INLINE:
                lines.append(f"{name}: inlined")
        return "\n".join(lines)


def _prod(xs) -> int:
    n = 1
    for x in xs:
        n *= x
    return n


# ---------------------------------------------------------------- knobs per role


def _plan_knobs(plan: StagePlan, name: str) -> list[Knob]:
    op = plan.op
    lanes = max(1, MAX_VECTOR_BYTES // (dtypes.bits(op.output(0).dtype) // 8))
    knobs: list[Knob] = []
    if plan.role == MULTI_LEVEL:
        for n, iv in enumerate(op.axis):
            inner = lanes if n == len(op.axis) - 1 else 16
            knobs.append(Knob(f"{name}.tile.{iv.name}", tile_candidates(iv.extent, inner),
                              "tile sizes (b, S2, S3) of this spatial axis; the rest is the outer a level"))
        for iv in op.reduce_axis:
            knobs.append(Knob(f"{name}.rtile.{iv.name}", tuple(factor_candidates(iv.extent, 512)),
                              "inner reduction tile R1 of this reduce axis"))
        knobs.append(Knob(f"{name}.at", ("a", "b"), "loop level of the owner where the tile is computed"))
        knobs.append(Knob(f"{name}.parallel", tuple(range(1, len(op.axis) + 1)),
                          "outer a-level loops fused into the parallel loop"))
        knobs.append(Knob(f"{name}.unroll", UNROLL_STEPS, "unroll budget for the innermost loops"))
        knobs.append(Knob(f"{name}.pack", ("none",) + tuple(t.name for t in op.input_tensors),
                          "input copied into a contiguous local tile at the outer reduction loop (packing)"))
    elif plan.role == SIMPLE:
        for n, iv in enumerate(op.axis):
            limit = 4 * lanes if n == len(op.axis) - 1 else 64
            knobs.append(Knob(f"{name}.tile.{iv.name}", tuple(factor_candidates(iv.extent, limit)),
                              "inner split of this spatial axis (the last one is vectorized)"))
        knobs.append(Knob(f"{name}.parallel", tuple(range(1, len(op.axis) + 1)),
                          "outer loops fused into the parallel loop"))
        if op.is_reduction:
            knobs.append(Knob(f"{name}.order", ("reduce_inner", "reduce_outer"),
                              "reduction loops inside the spatial tile, or outside it (then the tile vectorizes)"))
    return knobs


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


def _apply_multi_level(s: Schedule, plan: StagePlan, name: str, v: dict) -> None:
    op = plan.op
    tiles = [v[f"{name}.tile.{iv.name}"] for iv in op.axis]
    if plan.owner is None:
        cache = s.cache_write(op.output(0), "local")
        owner, tiled = s[op], s[cache]
    else:
        owner, tiled = s[plan.owner], s[op]
        tiled.set_scope("local")  # a per-tile temporary of the fused epilogue
    # The owner: a (outer, parallel) / b (cache block) / c (register tile) per spatial axis.
    levels = [_split_levels(owner, iv, [t[0], t[1] * t[2]]) for iv, t in zip(owner.op.axis, tiles)]
    a_axes, b_axes, c_axes = ([lv[n] for lv in levels] for n in range(3))
    owner.reorder(*a_axes, *b_axes, *c_axes)
    if tiles[-1][1] * tiles[-1][2] > 1:
        owner.vectorize(c_axes[-1])
    a_axes = _parallel_outer(owner, a_axes, v[f"{name}.parallel"])
    at = v[f"{name}.at"]
    tiled.compute_at(owner, a_axes[-1] if at == "a" else b_axes[-1])
    # The tiled stage over its region: S1 R0 S2 R1 S3.
    s1, s2, s3 = [], [], []
    for iv, t in zip(tiled.op.axis, tiles):
        if at == "a":
            x1, x2, x3 = _split_levels(tiled, iv, [t[1], t[2]])
            s1.append(x1)
        else:
            x2, x3 = _split_levels(tiled, iv, [t[2]])
        s2.append(x2)
        s3.append(x3)
    r0, r1 = [], []
    for iv in tiled.op.reduce_axis:
        x0, x1 = tiled.split(iv, factor=v[f"{name}.rtile.{iv.name}"])
        r0.append(x0)
        r1.append(x1)
    tiled.reorder(*s1, *r0, *s2, *r1, *s3)
    _pack_input(s, tiled, v[f"{name}.pack"], r0[-1])
    if tiles[-1][2] > 1:
        tiled.vectorize(s3[-1])
    extents = {id(x): t[2] for x, t in zip(s3, tiles)}
    extents.update({id(x): t[1] for x, t in zip(s2, tiles)})
    extents.update({id(x): v[f"{name}.rtile.{iv.name}"] for x, iv in zip(r1, tiled.op.reduce_axis)})
    budget = v[f"{name}.unroll"]
    body = max(1, -(-tiles[-1][2] // 16))  # the vector loop's body, in 16-lane instructions
    for loop in list(reversed(s3[:-1])) + list(reversed(r1)) + list(reversed(s2)):
        body *= extents[id(loop)]
        if body > budget:
            break
        if extents[id(loop)] > 1:
            tiled.unroll(loop)


def _pack_input(s: Schedule, tiled, tensor_name: str, at) -> None:
    """Copy the tile of input ``tensor_name`` that one outer reduction step reads into a
    contiguous local buffer (GotoBLAS-style packing; the copy is reused by the S2 loops)."""
    if tensor_name == "none":
        return
    tensor = next(t for t in tiled.op.input_tensors if t.name == tensor_name)
    packed = s.cache_read(tensor, "local", [tiled])
    s[packed].compute_at(tiled, at)


def _apply_simple(s: Schedule, plan: StagePlan, name: str, v: dict) -> None:
    stage = s[plan.op]
    op = stage.op
    outer, inner = [], []
    for iv in op.axis:
        o, i = stage.split(iv, factor=v[f"{name}.tile.{iv.name}"])
        outer.append(o)
        inner.append(i)
    reduce_inner = not op.is_reduction or v[f"{name}.order"] == "reduce_inner"
    if reduce_inner:
        stage.reorder(*outer, *inner, *op.reduce_axis)
    else:
        stage.reorder(*outer, *op.reduce_axis, *inner)
    if not op.is_reduction or not reduce_inner:
        if v[f"{name}.tile.{op.axis[-1].name}"] > 1:
            stage.vectorize(inner[-1])
    _parallel_outer(stage, outer, v[f"{name}.parallel"])
