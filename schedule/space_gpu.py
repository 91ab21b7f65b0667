"""The CUDA schedule space: Ansor's GPU sketches over the same DAG roles as the CPU.

    space = ConfigSpace.from_workload(te.create_workload("matmul", M=64, N=64, K=64), "cuda")
    config = space.sample(random.Random(0))
    space.check(config)            # threads, vthreads, local tile, shared memory: before a build
    s, args = space.apply(config)  # a fresh Schedule; backends.build(s, args, target="cuda")

Roles come from ``sketch.derive_sketch`` (inline / multi_level / fused / simple); what each
becomes on the GPU:

    multi_level   "SSSRRSRS". The owner's spatial axes (the fused epilogue, or a
                  ``cache_write(op, "local")`` copy) split into block x vthread x thread x
                  inner; the block parts fuse into ``blockIdx.x``, the vthread parts into one
                  ``vthread``, the thread parts into ``threadIdx.x``. The multi-level stage
                  (local scope: registers) is computed at the thread loop and tiles its region
                  as R0 R1 S3 R2 S4 (reduce split R0/R1/R2, spatial S3/S4). Every input it
                  reads is staged with ``cache_read(t, "shared", [local])`` at the last R0
                  loop and fetched cooperatively: the copy's axes fused, split by the thread
                  count, the inner part bound to ``threadIdx.x``. The innermost loops are
                  unrolled up to an unroll budget.
    simple        all spatial axes fused and split into ``blockIdx.x`` x ``threadIdx.x``;
                  a reduction's loops run inside each thread.
    inline        substituted into its readers, as on the CPU.

Decisions (``schedule.decisions``, which also spells their knob names):

    GPUMultiLevelDecisions  tiles: (vthread, threads, S3, S4) per spatial axis, the block
                            count is what is left of the extent; reduce_tiles: (R1, R2) per
                            reduce axis, R0 is what is left; unroll: the budget (innermost
                            loops first, while the body stays under it)
    GPUSimpleDecisions      threads: threads per block of a simple stage

``check(config)`` refuses, before any build, configs over ``GPULimits``: threads per block,
virtual threads, accumulator elements per thread, and shared memory per block (the box each
staged input needs, from the same bound inference lowering uses).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import ClassVar, Mapping

from te import dtypes
from te.expr import TensorRead, post_order
from te.tensor import ComputeOp, Tensor

from .bounds import infer_region
from .config import Config, Knob
from .decisions import (GPU_CODECS, GPU_MULTI_LEVEL, GPU_SIMPLE, GPUMultiLevelDecisions, GPUSimpleDecisions,
                        StageCodec, StageDecisions)
from .passes import GPULimits
from .sketch import FUSED, INLINE, MULTI_LEVEL, SIMPLE, StagePlan
from .space import ConfigSpace, _split_levels, factor_candidates
from .stage import Schedule

SKETCH_VERSION = "cuda-v1"
#: Unroll budgets (Ansor's auto_unroll_max_step choices for CUDA), in statements of the
#: unrolled body counting the virtual threads (each is one more unrolled copy).
UNROLL_STEPS = (0, 16, 64, 512, 1024)
#: Threads per block tried for simple stages.
THREAD_STEPS = (32, 64, 128, 256, 512, 1024)
#: Largest per-thread spatial tile level (S3 or S4) and vthread factor per axis.
MAX_INNER = 16
MAX_VTHREAD_PER_AXIS = 8


def gpu_tile_candidates(extent: int) -> tuple[tuple[int, int, int, int], ...]:
    """(vthread, threads, S3, S4) per axis with product <= extent."""
    fs = factor_candidates(extent)
    out = []
    for v in (f for f in fs if f <= MAX_VTHREAD_PER_AXIS):
        for t in (f for f in fs if f <= 1024 and v * f <= extent):
            for s3 in (f for f in fs if f <= MAX_INNER and v * t * f <= extent):
                for s4 in (f for f in fs if f <= MAX_INNER and v * t * s3 * f <= extent):
                    out.append((v, t, s3, s4))
    return tuple(out)


def reduce_tile_candidates(extent: int) -> tuple[tuple[int, int], ...]:
    """(R1, R2) per reduce axis with R1 * R2 <= extent (R2 innermost, at most 16)."""
    fs = factor_candidates(extent, 64)
    return tuple((r1, r2) for r1 in fs for r2 in fs if r2 <= MAX_INNER and r1 * r2 <= extent)


def thread_candidates(total: int) -> tuple[int, ...]:
    return tuple(sorted({min(t, total) for t in THREAD_STEPS}))


@dataclass
class GPUConfigSpace(ConfigSpace):
    """All CUDA schedules of one DAG: its sketch ("cuda-v1"), knobs, limits and replay."""

    limits: GPULimits = field(default_factory=GPULimits)

    sketch_version: ClassVar[str] = SKETCH_VERSION
    precomputes: ClassVar[bool] = False  # the GPU pipeline runs nothing at build time
    offers_alternatives: ClassVar[bool] = False  # Winograd's transforms have no GPU rules yet

    @classmethod
    def from_tensors(cls, inputs, outputs, target: str = "cuda") -> "GPUConfigSpace":
        return super().from_tensors(inputs, outputs, target)

    def starting_points(self, rng) -> list[Config]:
        """None yet: the CPU's micro-kernel shapes do not carry over to thread blocks."""
        return []

    # ------------------------------------------------------------ per-role hooks (GPU)

    @staticmethod
    def _knobs_for(plan: StagePlan, name: str, options: Mapping) -> list[Knob]:
        return _plan_knobs(plan, name)

    @staticmethod
    def _codecs() -> Mapping[str, StageCodec]:
        return GPU_CODECS

    @staticmethod
    def _unrolled_by(d: StageDecisions, budget: int) -> tuple:
        return unrolled_loops(d, budget)

    def _plan_problem(self, plan: StagePlan, d: StageDecisions) -> str | None:
        if plan.role != MULTI_LEVEL:
            return None
        lim = self.limits
        name = d.stage
        tiles = d.tiles
        threads = math.prod(t[1] for t in tiles)
        if threads > lim.max_threads_per_block:
            return f"{name}: {threads} threads per block exceed {lim.max_threads_per_block}"
        vthreads = math.prod(t[0] for t in tiles)
        if vthreads > lim.max_vthreads:
            return f"{name}: {vthreads} virtual threads exceed {lim.max_vthreads}"
        local = math.prod(t[0] * t[2] * t[3] for t in tiles)
        if local > lim.max_local_elements:
            return f"{name}: {local} accumulators per thread exceed {lim.max_local_elements}"
        shared = self.shared_bytes(plan, d)
        if shared > lim.max_shared_bytes:
            return f"{name}: {shared} bytes of shared memory per block exceed {lim.max_shared_bytes}"
        return None

    @staticmethod
    def _appliers() -> dict:
        return {MULTI_LEVEL: _apply_multi_level, SIMPLE: _apply_simple}

    @staticmethod
    def _describe_plan(p: StagePlan) -> str:
        if p.role == MULTI_LEVEL:
            owner = p.owner.name if p.owner is not None else f"a cache_write copy of {p.name}"
            return (f"{p.name}: SSSRRSRS, tiles owned by {owner}: blockIdx x vthread x threadIdx x "
                    f"inner; local accumulators; inputs staged in shared memory at R0")
        if p.role == FUSED:
            return f"{p.name}: owns the tiles of {p.produces.name} (epilogue at the thread level)"
        if p.role == INLINE:
            return f"{p.name}: inlined into its readers"
        return f"{p.name}: simple, axes fused into blockIdx.x x threadIdx.x"

    def shared_bytes(self, plan: StagePlan, decisions: GPUMultiLevelDecisions | Mapping) -> int:
        """Shared memory one block of ``plan``'s stage stages: each input's box over the block tile.

        ``decisions``: the stage's decisions, or a config's knob values to decode them from.
        """
        op = plan.op
        if isinstance(decisions, Mapping):
            decisions = GPU_MULTI_LEVEL.decode(self.names[op], op, decisions)
        varying = {}
        for iv, t in zip(op.axis, decisions.tiles):
            varying[iv.var] = min(iv.extent, t.product)
        for iv, rt in zip(op.reduce_axis, decisions.reduce_tiles):
            varying[iv.var] = min(iv.extent, rt.product)
        total = 0
        for tensor, reads in _input_reads(op).items():
            region = infer_region(tensor.shape, reads, varying)
            total += math.prod(region.extents) * dtypes.nbytes(tensor.dtype)
        return total

    @staticmethod
    def _describe_decisions(plan: StagePlan, d: StageDecisions) -> str:
        if isinstance(d, GPUSimpleDecisions):
            return f"{d.stage}: {d.threads} threads per block"
        tiles = ", ".join(f"{t.axis}: {t}" for t in d.tiles)
        red = ", ".join(f"{r.axis}: {r}" for r in d.reduce_tiles)
        return (f"{d.stage}: tiles (vthread x threads x S3 x S4) {tiles}; reduction (R1 x R2) {red}; "
                f"unroll budget {d.unroll}")


# ---------------------------------------------------------------- knobs


def _plan_knobs(plan: StagePlan, name: str) -> list[Knob]:
    """The candidates of each decision of ``plan``'s stage (names and docs: the codec's)."""
    op = plan.op
    if plan.role == MULTI_LEVEL:
        return GPU_MULTI_LEVEL.knobs(name, op, tiles=[gpu_tile_candidates(iv.extent) for iv in op.axis],
                                     reduce_tiles=[reduce_tile_candidates(iv.extent) for iv in op.reduce_axis],
                                     unroll=UNROLL_STEPS)
    if plan.role == SIMPLE:
        total = math.prod(iv.extent for iv in op.axis)
        return GPU_SIMPLE.knobs(name, op, threads=thread_candidates(total))
    return []


def _input_reads(op: ComputeOp) -> dict[Tensor, list]:
    """Index tuples of every read of each direct input of ``op``, in its own axes."""
    reads: dict[Tensor, list] = {}
    for t in op.input_tensors:
        reads.setdefault(t, [])
    for n in post_order(op.body):
        if isinstance(n, TensorRead):
            for t in reads:
                if t.op is n.tensor.op:
                    reads[t].append(n.indices)
    return reads


# ---------------------------------------------------------------- replay


def _apply_multi_level(s: Schedule, plan: StagePlan, d: GPUMultiLevelDecisions) -> None:
    op = plan.op
    tiles, rtiles = d.tiles, d.reduce_tiles
    if plan.owner is None:
        local = s.cache_write(op.output(0), "local")
        owner, tiled = s[op], s[local]
    else:
        owner, tiled = s[plan.owner], s[op]
        tiled.set_scope("local")
    inputs = list(dict.fromkeys(t for t in tiled.op.input_tensors))
    shared = [s[s.cache_read(t, "shared", [tiled])] for t in inputs]
    # The owner: block x vthread x thread x inner per spatial axis.
    levels = [_split_levels(owner, iv, [t[0], t[1], t[2] * t[3]]) for iv, t in zip(owner.op.axis, tiles)]
    blocks, vthreads, threads, inner = ([lv[n] for lv in levels] for n in range(4))
    owner.reorder(*blocks, *vthreads, *threads, *inner)
    # The copy-out reads the accumulators at constant indices only when its loops unroll.
    owner_loops, local_loops = unrolled_loops(d, d.unroll)
    per_thread = inner[::-1]
    for n in owner_loops:
        owner.unroll(per_thread[n])
    owner.bind(owner.fuse(*blocks), "blockIdx.x")
    owner.bind(owner.fuse(*vthreads), "vthread")
    thread_loop = owner.fuse(*threads)
    owner.bind(thread_loop, "threadIdx.x")
    tiled.compute_at(owner, thread_loop)
    # The local stage over its per-thread region: R0 R1 S3 R2 S4.
    s3, s4 = [], []
    for iv, t in zip(tiled.op.axis, tiles):
        x3, x4 = tiled.split(iv, factor=t[3])
        s3.append(x3)
        s4.append(x4)
    r0, r1, r2 = [], [], []
    for iv, rt in zip(tiled.op.reduce_axis, rtiles):
        x0, x1, x2 = _split_levels(tiled, iv, list(rt))
        r0.append(x0)
        r1.append(x1)
        r2.append(x2)
    tiled.reorder(*r0, *r1, *s3, *r2, *s4)
    local = s4[::-1] + r2[::-1] + s3[::-1] + r1[::-1]
    for n in local_loops:
        tiled.unroll(local[n])
    # Cooperative fetch of each staged input at the last R0 loop.
    n_threads = math.prod(t[1] for t in tiles)
    for stage in shared:
        stage.compute_at(tiled, r0[-1])
        fused = stage.fuse(*stage.op.axis)
        _, thread = stage.split(fused, factor=n_threads)
        stage.bind(thread, "threadIdx.x")


def unrolled_loops(d: GPUMultiLevelDecisions, budget: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Which loops an unroll ``budget`` unrolls, as positions: in the owner, of its
    per-thread S3*S4 loops (innermost first); in the local stage, of its S4, R2, S3 and R1
    loops (each level innermost first). Each list is unrolled innermost first while the
    copies of the body (its virtual threads' share included) stay within the budget."""
    tiles, rtiles = d.tiles, d.reduce_tiles
    body = math.prod(t[0] for t in tiles)
    owner = [t[2] * t[3] for t in tiles][::-1]
    local = ([t[3] for t in tiles][::-1] + [rt[1] for rt in rtiles][::-1]
             + [t[2] for t in tiles][::-1] + [rt[0] for rt in rtiles][::-1])
    return _unrolled_prefix(owner, budget, body), _unrolled_prefix(local, budget, body)


def _unrolled_prefix(extents: list[int], budget: int, body: int) -> tuple[int, ...]:
    """Positions of the loops of ``extents`` (innermost first) unrolled while the unrolled
    body stays within ``budget``; loops of one iteration take no unrolling."""
    out = []
    for n, extent in enumerate(extents):
        body *= extent
        if body > budget:
            break
        if extent > 1:
            out.append(n)
    return tuple(out)


def _apply_simple(s: Schedule, plan: StagePlan, d: GPUSimpleDecisions) -> None:
    stage = s[plan.op]
    axes = list(stage.op.axis)
    if not axes:
        return  # a 0-d result: one thread computes it
    fused = stage.fuse(*axes) if len(axes) > 1 else axes[0]
    block, thread = stage.split(fused, factor=d.threads)
    stage.bind(block, "blockIdx.x")
    stage.bind(thread, "threadIdx.x")
