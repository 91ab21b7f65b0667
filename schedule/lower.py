"""Lowering a schedule to the loop IR.

The pipeline, one step per line of ``lower``:

1. check the kernel arguments against the schedule;
2. inline ``compute_inline`` stages into their readers (their bodies substitute in);
3. check every ``compute_at`` (the host still has the loop, and every reader of the
   attached stage runs inside it: the host itself or stages attached there or deeper);
4. infer the region each stage computes (outputs: all of it; attached stages: what their
   readers read within one iteration of the attach loop, so the region needed by a chain
   of attached stages is carried back stage by stage) and from it every loop's extent;
5. build each stage's loop nest: loops from its leaf axes, the body with reads turned
   into buffer loads, guards for splits that do not divide, a reduction's init nest,
   attached stages and their buffers placed inside the host's loop, and the stages
   computed with it (``compute_with``) after its body inside the loops they share;
6. run a pipeline of passes on the loop nest (``schedule.passes``): by default the "cpu"
   list, which removes unit loops, simplifies with the loop bounds, turns tail guards
   into loop bounds, promotes accumulators to registers and verifies the result.

One ``PassContext`` (the simplifier's memo tables) serves the whole lowering, steps 4-6.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from te import dtypes
from te.expr import Binary, Call, Const, Expr, Reduce, TensorRead, Var, free_vars, post_order, substitute, transform
from te.tensor import REDUCE, IterVar, PlaceholderOp, Tensor

from . import ir, passes
from .bounds import infer_region
from .ir import Allocate, Buffer, BufferLoad, BufferStore, For, IfThenElse, LoweredFunc, Prepack, Stmt, seq
from .passes import Pass, PassContext, Trace
from .simplify import Analyzer, interval
from .stage import Fuse, Schedule, ScheduleError, Split, Stage, create_schedule

_LOOP_KIND = {"vectorize": ir.VECTORIZED, "unroll": ir.UNROLLED, "parallel": ir.PARALLEL, "bind": ir.THREAD_BINDING}


@dataclass
class _StageInfo:
    """Everything lowering derives for one stored stage."""

    stage: Stage
    body: Expr  # effective body: inlined producers substituted
    buffer: Buffer | None = None
    state: Buffer | None = None  # a softmax_sum's running maximum, shaped as its accumulator
    root_min: dict[IterVar, Expr] = field(default_factory=dict)
    root_extent: dict[IterVar, int] = field(default_factory=dict)
    extent: dict[IterVar, int] = field(default_factory=dict)  # every iter var of the stage
    local: dict[IterVar, Expr] = field(default_factory=dict)  # value in terms of leaf vars
    guards: list[Expr] = field(default_factory=list)


class _Infos(dict):
    """Stage -> _StageInfo, plus the buffers of the placeholder arguments and the simplifier."""

    def __init__(self, items, analyzer: Analyzer):
        super().__init__(items)
        self.placeholder_buffers: dict = {}
        self.an = analyzer
        self._tensor_reads: dict = {}  # stage body -> its TensorRead nodes

    def tensor_reads(self, body: Expr) -> list[TensorRead]:
        """The tensor reads of a stage's body, found once per body (lowering asks for each
        producer's reads in every reader)."""
        reads = self._tensor_reads.get(body)
        if reads is None:
            reads = self._tensor_reads[body] = [n for n in post_order(body) if isinstance(n, TensorRead)]
        return reads


def lower(s: Schedule, args, name: str = "kernel", trace: Trace = False,
          pipeline: str | list[Pass] = "cpu"):
    """Lower schedule ``s`` to a function taking ``args`` (inputs, then outputs).

    ``pipeline`` names the passes run on the loop nest: "cpu" (``passes.CPU_PIPELINE``,
    the default: a ``LoweredFunc``), "gpu" (the "cpu" list, then ``passes.GPU_PIPELINE``: a
    ``GPUProgram`` of CUDA kernels), or a list of passes. ``trace=True`` prints the IR as
    built (section "build") and after every pass; a callable ``trace(pass_name, ir_text)``
    receives the same sections instead.
    """
    ctx = PassContext()
    func = build_loop_nest(s, args, name, ctx.analyzer)
    emit = passes.tracer(trace)
    if emit is not None:
        emit("build", str(func))
    steps = passes.pipeline(pipeline) if isinstance(pipeline, str) else list(pipeline)
    lowered = passes.run(steps, func, ctx, trace)
    if not s.layout_rewrites:
        return lowered
    if not isinstance(lowered, LoweredFunc):
        raise ScheduleError("rewrite_layout: inputs packed at build time are supported on the CPU only")
    return dataclasses.replace(lowered, prepacks=_prepacks(s, _check_args(s, args), name, steps))


def _prepacks(s: Schedule, args: list[Tensor], name: str, steps) -> tuple[Prepack, ...]:
    """The packing function of each input whose layout ``s`` rewrote (``Schedule.rewrite_layout``):
    the copy in parallel over panels (fused with the next axis when there are few), the panel's
    width vectorized. It runs once per packed input, not per call, so it has no knobs."""
    out = []
    for n, arg in enumerate(args):
        rw = s.layout_rewrites.get(arg.op)
        if rw is None:
            continue
        ps = create_schedule(rw.packing)
        stage = ps[rw.packing]
        outer, *middle, inner = stage.op.axis
        stage.parallel(stage.fuse(outer, middle[0]) if outer.extent < 64 and middle else outer)
        stage.vectorize(inner)
        pctx = PassContext()
        pfunc = passes.run(steps, build_loop_nest(ps, [rw.source, rw.packing], f"{name}_pack{n}", pctx.analyzer), pctx)
        out.append(Prepack(n, pfunc.params[0], pfunc))
    return tuple(out)


def build_loop_nest(s: Schedule, args, name: str = "kernel", analyzer: Analyzer | None = None) -> LoweredFunc:
    """Steps 1-5: the loop nest of ``s`` as built, before any pass ran (not yet verified)."""
    args = _check_args(s, args)
    an = analyzer or Analyzer()
    infos = _Infos(((st, _StageInfo(st, _inline_body(s, st))) for st in s.stages if st.attach != "inline"), an)
    _check_attachments(s, infos)
    params = _assign_arg_buffers(s, infos, args)
    for st in reversed(s.stages):  # hosts come after their producers in stage order
        if st in infos:
            _infer_stage_bounds(s, infos, infos[st])
    _check_shared_loops(s, infos)
    return LoweredFunc(name, tuple(params), _root_body(s, infos))


# ---------------------------------------------------------------- 1. arguments


def _check_args(s: Schedule, args) -> list[Tensor]:
    if isinstance(args, Tensor):
        args = [args]
    args = list(args)
    for t in args:
        if not isinstance(t, Tensor):
            raise ScheduleError(f"lower/build: arguments must be te.Tensors, got {t!r}")
    if len(set(args)) != len(args):
        raise ScheduleError("lower/build: a tensor is listed twice in the arguments")
    for out in s.outputs:
        if out not in args and s[out].origin_op.output(0) not in args:
            raise ScheduleError(f"lower/build: output {out.name!r} of the schedule is missing from the arguments")
    return args


# ---------------------------------------------------------------- 2. inlining


def _inline_body(s: Schedule, stage: Stage) -> Expr:
    """``stage``'s body with every read of an inlined stage replaced by that stage's body."""

    def rewrite(node):
        if not isinstance(node, TensorRead):
            return None
        producer = s.stage_of(node.tensor)
        if producer is None or producer.attach != "inline":
            return None
        op = producer.op
        inner = substitute(op.body, {iv.var: idx for iv, idx in zip(op.axis, node.indices)})
        return transform(inner, rewrite)

    return transform(stage.op.body, rewrite)


def _reads_of(infos, body: Expr, s: Schedule, producer: Stage) -> list[tuple[Expr, ...]]:
    return [n.indices for n in infos.tensor_reads(body) if s.stage_of(n.tensor) is producer]


# ---------------------------------------------------------------- 3. attachments


def _check_attachments(s: Schedule, infos: dict[Stage, _StageInfo]) -> None:
    attached = [st for st in infos if st.attach == "at"]
    for st in attached:
        _check_attach_point(st)
    for st in attached:  # every attach point is a loop now, so readers' placements compare
        _check_readers_inside(s, infos, st)


def _check_attach_point(st: Stage) -> None:
    """The host of ``st`` is stored and still has the loop ``st`` is attached at."""
    host = st.attach_stage
    if host.attach == "inline":
        raise ScheduleError(f"stage {st.name!r} is computed at {host.name!r}, which was later inlined")
    if st.attach_ivar not in host.leaf_iter_vars:
        raise ScheduleError(
            f"stage {st.name!r} is computed at axis {st.attach_ivar.name!r} of {host.name!r}, which is no "
            f"longer a loop there (split or fused afterwards); call compute_at after shaping the host's loops"
        )


def _check_readers_inside(s: Schedule, infos, st: Stage) -> None:
    """Every reader of attached ``st`` runs inside its attach loop, where its buffer lives."""
    host, ivar = st.attach_stage, st.attach_ivar
    readers = _readers(s, infos, st)
    if not readers:  # the host stopped reading it (a cache stage took over the reads)
        raise ScheduleError(f"stage {st.name!r} is computed at {host.name!r} but no stage reads it any more")
    outside = [r for r in readers if _path_inside(r, host, ivar) is None]
    if outside:
        raise ScheduleError(
            f"stage {st.name!r} is computed at {host.name!r} inside loop {ivar.name!r} but read by "
            f"{', '.join(r.name for r in readers)}, and not every reader runs inside that loop "
            f"({'; '.join(f'{r.name} {_placement(r)}' for r in outside)}); compute_at needs every reader "
            f"inside it: attach {', '.join(r.name for r in outside)} at {host.name!r} inside loop "
            f"{ivar.name!r} or deeper, or compute {st.name!r} at the root"
        )


def _placement(st: Stage) -> str:
    if st.attach == "at":
        return f"is computed at {st.attach_stage.name!r} inside loop {st.attach_ivar.name!r}"
    return "is computed at the root"


def _readers(s: Schedule, infos, producer: Stage) -> list[Stage]:
    """Stored stages whose (inlined) body reads ``producer``, in stage order."""
    return [r for r, info in infos.items() if r is not producer and _reads_of(infos, info.body, s, producer)]


def _path_inside(reader: Stage, host: Stage, ivar: IterVar) -> list[Stage] | None:
    """The stages from ``reader`` up to ``host`` (excluded) when ``reader`` runs inside loop
    ``ivar`` of ``host``: it is ``host`` (path ``[]``) or is attached, through a chain of
    attachments, at ``ivar`` or a loop nested in it. None when it runs outside that loop."""
    path: list[Stage] = []
    st = reader
    while st is not host:
        if st.attach != "at":
            return None
        path.append(st)
        if st.attach_stage is host:
            leaves = host.leaf_iter_vars
            if leaves.index(st.attach_ivar) < leaves.index(ivar):
                return None
        st = st.attach_stage
    return path


def _check_shared_loops(s: Schedule, infos) -> None:
    """Every ``compute_with`` still joins loops that can be shared, once the loops' extents
    are known: the host is stored at the root and still has the loop, the shared loops
    are spatial with equal extents and kinds in both stages, no stage it reads needs the
    host's results, and no stage that reads it runs before the host."""
    order = {st: n for n, st in enumerate(s.stages)}
    for st, info in infos.items():
        host = st.with_stage
        if host is None:
            continue
        if host not in infos or host.attach != "root" or st.attach != "root":
            moved = st if st.attach != "root" else host
            raise ScheduleError(f"stage {st.name!r} is computed with {host.name!r}, but {moved.name!r} was later "
                                f"inlined or computed at another stage")
        if st.with_ivar not in host.leaf_iter_vars:
            raise ScheduleError(
                f"stage {st.name!r} is computed with {host.name!r} down to axis {st.with_ivar.name!r}, which is no "
                f"longer a loop there (split or fused afterwards); call compute_with after shaping both stages' loops")
        pos = host.leaf_iter_vars.index(st.with_ivar)
        if len(st.leaf_iter_vars) <= pos:
            raise ScheduleError(f"stage {st.name!r} has {len(st.leaf_iter_vars)} loops, fewer than the {pos + 1} "
                                f"it shares with {host.name!r}")
        for mine, theirs in zip(st.leaf_iter_vars[:pos + 1], host.leaf_iter_vars[:pos + 1]):
            what = f"stages {st.name!r} and {host.name!r} share loops {mine.name!r} and {theirs.name!r}"
            if REDUCE in (mine.kind, theirs.kind):
                raise ScheduleError(f"{what}, but a shared loop must be spatial in both (a reduction loop there "
                                    f"would interleave one stage's partial sums with the other's)")
            if info.extent[mine] != infos[host].extent[theirs]:
                raise ScheduleError(f"{what}, whose extents differ ({info.extent[mine]} and "
                                    f"{infos[host].extent[theirs]}); split both alike")
            if (st.iter_kinds.get(mine), st.thread_tags.get(mine)) != (host.iter_kinds.get(theirs),
                                                                        host.thread_tags.get(theirs)):
                raise ScheduleError(f"{what}, which are not marked alike ({st.iter_kinds.get(mine) or 'serial'} "
                                    f"and {host.iter_kinds.get(theirs) or 'serial'})")
        for other in infos:
            if other.attach != "root" or other in (st, host):
                continue
            if s.reads_through_chain(st, other) and (other.with_stage is host or s.reads_through_chain(other, host)):
                raise ScheduleError(f"stage {st.name!r} is computed with {host.name!r} but reads {other.name!r}, "
                                    f"which needs {host.name!r}'s results first")
            if s.reads_through_chain(other, st) and order[other] < order[host]:
                raise ScheduleError(f"stage {st.name!r} is computed with {host.name!r} but {other.name!r}, "
                                    f"computed before {host.name!r}, reads it")


def _assign_arg_buffers(s: Schedule, infos, args: list[Tensor]) -> list[Buffer]:
    params = []
    for t in args:
        rewrite = s.layout_rewrites.get(t.op)
        if rewrite is not None:  # the kernel takes the input in its packed layout
            t = rewrite.packed
        stage = s.stage_of(t)
        if stage is None:
            buf = Buffer(t.name, t.shape, t.dtype, "global", is_arg=True)
            infos.placeholder_buffers[t.op] = buf
            params.append(buf)
            continue
        if stage.attach == "inline":
            raise ScheduleError(f"argument {t.name!r} is computed by an inlined stage, so it is never stored")
        if stage.attach == "at":
            raise ScheduleError(f"argument {t.name!r} is computed at another stage; arguments must be computed at the root")
        buf = Buffer(t.name, t.shape, t.dtype, "global", is_arg=True)
        infos[stage].buffer = buf
        params.append(buf)
    needed = {op for st in infos.values() for op in _placeholders_read(st.body)}
    given = {t.op for t in args} | {s.layout_rewrites[t.op].packed.op for t in args if t.op in s.layout_rewrites}
    missing = [op.name for op in needed if op not in given]
    if missing:
        raise ScheduleError(f"lower/build: placeholder(s) {', '.join(sorted(missing))} are read but not in the arguments")
    return params


def _placeholders_read(body: Expr):
    return {n.tensor.op for n in post_order(body) if isinstance(n, TensorRead) and isinstance(n.tensor.op, PlaceholderOp)}


# ---------------------------------------------------------------- 4. bounds


def _infer_stage_bounds(s: Schedule, infos, info: _StageInfo) -> None:
    st = info.stage
    op = st.op
    if st.attach == "at":
        reads, varying, inner_stages = _reads_in_attach_loop(s, infos, st)
        if st.scope == "shared":
            reads, varying = _unfuse_varying(infos, st.attach_stage, inner_stages, reads, varying)
        region = infer_region(op.output(0).shape, reads, varying, infos.an)
        for iv, lo, ext in zip(op.axis, region.mins, region.extents):
            info.root_min[iv], info.root_extent[iv] = lo, ext
    else:
        for iv in op.axis:
            info.root_min[iv], info.root_extent[iv] = Const(0), iv.extent
    for iv in op.reduce_axis:
        info.root_min[iv], info.root_extent[iv] = Const(iv.start), iv.extent
    _derive_loops(info, infos.an)
    if info.buffer is None:
        shape = tuple(info.root_extent[iv] for iv in op.axis)
        info.buffer = Buffer(op.name, shape, op.output(0).dtype, st.scope)
    if isinstance(info.body, Reduce) and info.body.combiner == "softmax_sum":
        info.state = Buffer(f"{op.name}_running_max", info.buffer.shape, info.buffer.dtype, st.scope)
    # Each axis of a region that may pass the tensor's edge, in tensor coordinates.
    clipped = {iv: infos.an.simplify(Binary("add", info.root_min[iv], info.local[iv], "int32"))
               for iv in op.axis if info.root_extent[iv] != iv.extent}
    padded = _overcomputed_axes(s, infos, info, clipped)
    for iv, value in clipped.items():  # a region past the tensor's edge is not computed, unless harmless
        if iv not in padded:
            info.guards.append(infos.an.simplify(value < iv.extent))
            info.guards.append(infos.an.simplify(value >= 0))


def _overcomputed_axes(s: Schedule, infos, info: _StageInfo, clipped: dict[IterVar, Expr]) -> set[IterVar]:
    """Axes of an attached local stage computed over its whole region, past the tensor's edge.

    A region that overhangs the tensor's edge (a cache block or register tile that does
    not divide the extent) is guarded axis by axis, and those guards become variable trip
    counts that keep a register tile from unrolling and staying in registers. The guard of
    an axis is not needed when computing the overhang harms nothing: the buffer is this
    stage's own scratch (its readers only read elements inside the tensor), and every
    read the axis indexes stays inside a whole buffer for every value the axis then takes
    (a panel-packed input is zero-padded to whole panels, so a register tile's overhang
    reads zeros). Reads of another attached stage's region do not qualify: its overhang
    is not computed. The result is a fixed point: an axis whose reads fail keeps its
    guard, and the others are checked again with its range back inside the tensor.
    """
    if info.stage.attach != "at" or info.stage.scope != "local" or not clipped:
        return set()
    op = info.stage.op
    bounds = {iv.var: (0, other.extent[iv] - 1)
              for other in infos.values() if other.extent for iv in other.stage.leaf_iter_vars}
    overhang = {}
    for iv, value in clipped.items():
        span = interval(value, bounds)
        if span is not None:
            overhang[iv] = span
    reads = [n for n in post_order(info.body) if isinstance(n, TensorRead)]
    while overhang:
        ranges = {iv.var: overhang.get(iv, (0, iv.extent - 1)) for iv in op.axis}
        ranges.update({iv.var: (iv.start, iv.start + iv.extent - 1) for iv in op.reduce_axis})
        failing = {iv for iv in overhang if not all(_read_inside(s, r, ranges) for r in reads if iv.var in _vars_of(r))}
        if not failing:
            break
        for iv in failing:
            del overhang[iv]
    return set(overhang)


def _vars_of(read: TensorRead) -> set:
    return set().union(*(free_vars(i) for i in read.indices))


def _read_inside(s: Schedule, read: TensorRead, ranges) -> bool:
    """Whether ``read`` stays inside its tensor for the given axis ranges (whole buffers only)."""
    producer = s.stage_of(read.tensor)
    if producer is not None and producer.attach != "root":
        return False
    for idx, n in zip(read.indices, read.tensor.shape):
        span = interval(idx, ranges)
        if span is None or span[0] < 0 or span[1] >= n:
            return False
    return True


def _reads_in_attach_loop(s: Schedule, infos, producer: Stage):
    """(reads, varying loops, stages nested in the attach loop) for attached ``producer``.

    The readers are the host and stages attached inside the attach loop (checked in step 3);
    their reads are in tensor coordinates over their leaf loops and their regions' mins,
    which in turn are expressions over their own hosts' loops. Within one iteration of the
    attach loop, the host's loops below it vary, and so does every loop of every stage
    between a reader and the host (the reader included): they all run inside it. So the
    union of the reads over those loops is what ``producer`` must compute there, whether
    a reader is the host, attached at the same loop or deeper, or itself a chain away.
    """
    host = infos[producer.attach_stage]
    varying = _varying_loops(infos, host, producer)
    reads: list[tuple[Expr, ...]] = []
    inner_stages: list[Stage] = []
    for reader in _readers(s, infos, producer):
        for st in _path_inside(reader, host.stage, producer.attach_ivar):
            if st not in inner_stages:
                inner_stages.append(st)
                varying.update({iv.var: infos[st].extent[iv] for iv in st.leaf_iter_vars})
        reads += _reader_reads(s, infos, infos[reader], producer)
    return reads, varying, inner_stages


def _reader_reads(s: Schedule, infos, reader: _StageInfo, producer: Stage) -> list[tuple[Expr, ...]]:
    """The producer's indices as ``reader`` reads them, over the reader's leaf loops."""
    env = _root_values(reader, infos.an)
    return [tuple(substitute(i, env) for i in idx) for idx in _reads_of(infos, reader.body, s, producer)]


def _varying_loops(infos, host: _StageInfo, producer: Stage) -> dict[Var, int]:
    """Loops that run inside the attach point: the host's leaves below the attach axis.

    A shared-memory buffer serves every thread of a block, so the thread-bound loops
    of the host and of the stages enclosing it vary too, and so do their virtual
    threads (the CUDA passes run a vthread-independent fetch once for all of them).
    """
    leaves = host.stage.leaf_iter_vars
    below = leaves[leaves.index(producer.attach_ivar) + 1:]
    varying = {iv.var: host.extent[iv] for iv in below}
    if producer.scope == "shared":
        st: Stage | None = host.stage
        while st is not None:
            for iv, tag in st.thread_tags.items():
                if tag.startswith("threadIdx") or tag == "vthread":
                    varying[iv.var] = infos[st].extent[iv]
            st = st.attach_stage
    return varying


def _unfuse_varying(infos, host: Stage, inner_stages: list[Stage], reads, varying: dict[Var, int]):
    """Reads and varying loops with every varying *fused* loop split back into its parts.

    The fused loops are those of ``host``, the stages enclosing it, and ``inner_stages``
    (the stages attached inside the attach loop whose loops vary).

    A fused loop ``f`` over its whole range is the same as its parts ``o``, ``i`` over
    theirs, and the parts index linearly where ``f`` needs ``f // n`` and ``f % n``: the
    region of a shared tile under fused thread loops stays a tight box instead of
    falling back to the whole tensor.
    """
    fuses: dict[Var, tuple[Fuse, _StageInfo]] = {}
    enclosing: list[Stage] = []
    st: Stage | None = host
    while st is not None:
        enclosing.append(st)
        st = st.attach_stage
    for st in enclosing + inner_stages:
        for rel in st.relations:
            if isinstance(rel, Fuse):
                fuses[rel.fused.var] = (rel, infos[st])
    todo = [v for v in varying if v in fuses]
    if not todo:
        return reads, varying
    varying = dict(varying)
    mapping: dict[Var, Expr] = {}
    while todo:
        rel, info = fuses[todo.pop()]
        del varying[rel.fused.var]
        mapping[rel.fused.var] = rel.outer.var * info.extent[rel.inner] + rel.inner.var
        for part in (rel.outer, rel.inner):
            varying[part.var] = info.extent[part]
            if part.var in fuses:
                todo.append(part.var)
    bounds = {v: (0, n - 1) for v, n in varying.items()}

    def unfuse(e: Expr) -> Expr:
        while free_vars(e) & mapping.keys():
            e = substitute(e, mapping)
        return infos.an.simplify(e, bounds)

    return [tuple(unfuse(i) for i in idx) for idx in reads], varying


def _derive_loops(info: _StageInfo, an: Analyzer) -> None:
    """Extents of every split/fused axis, leaf-var values of every axis, tail guards."""
    st = info.stage
    ext = info.extent
    ext.update(info.root_extent)
    for rel in st.relations:
        if isinstance(rel, Split):
            parent = ext[rel.parent]
            inner = min(rel.factor, parent) if rel.factor is not None else -(-parent // min(rel.nparts, parent))
            ext[rel.inner], ext[rel.outer] = inner, -(-parent // inner)
        else:
            ext[rel.fused] = ext[rel.outer] * ext[rel.inner]
    local = info.local
    for iv in st.leaf_iter_vars:
        local[iv] = iv.var
    for rel in reversed(st.relations):
        if isinstance(rel, Split):
            local[rel.parent] = an.simplify(local[rel.outer] * ext[rel.inner] + local[rel.inner])
            if ext[rel.outer] * ext[rel.inner] != ext[rel.parent]:
                info.guards.append(local[rel.parent] < ext[rel.parent])
        else:
            local[rel.outer] = local[rel.fused] // ext[rel.inner]
            local[rel.inner] = local[rel.fused] % ext[rel.inner]


def _root_values(info: _StageInfo, an: Analyzer) -> dict[Var, Expr]:
    """Each root axis variable of the op -> its index in the full tensor's coordinates."""
    return {iv.var: an.simplify(info.root_min[iv] + info.local[iv]) for iv in info.root_min}


# ---------------------------------------------------------------- 5. loop nests


def _root_body(s: Schedule, infos) -> Stmt:
    nests = [_stage_nest(s, infos, infos[st]) for st in _root_order(s, infos)]
    body = seq(*nests)
    for st in reversed(s.stages):
        info = infos.get(st)
        if info is not None and st.attach == "root":
            body = _allocated(info, body)
    return body


def _allocated(info: _StageInfo, body: Stmt) -> Stmt:
    """``body`` inside the allocations of ``info``'s stage: its buffer unless a kernel
    argument holds it, and a softmax_sum's running maximum."""
    if info.state is not None:
        body = Allocate(info.state, body)
    return body if info.buffer.is_arg else Allocate(info.buffer, body)


def _root_order(s: Schedule, infos) -> list[Stage]:
    """The stages whose nests run at the top level, in stage order, except that what a stage
    computed with a host reads (a panel packing of its own weights) runs before that host."""
    roots = [st for st in s.stages if st in infos and st.attach == "root" and st.with_stage is None]
    if not any(st.with_stage is not None for st in s.stages):
        return roots
    order: list[Stage] = []
    for st in roots:
        if st in order:
            continue
        joined = [other for other in s.stages if other.with_stage is st]
        order += [p for p in roots if p not in order and p is not st
                  and any(s.reads_through_chain(j, p) for j in joined)]
        order.append(st)
    return order


def _stage_nest(s: Schedule, infos, info: _StageInfo, start: int = 0) -> Stmt:
    """The loops of ``info``'s stage from its leaf ``start`` inwards, with its update, its
    reduction's init nest, and the stages attached at or computed with its loops."""
    st = info.stage
    leaves = st.leaf_iter_vars
    store_idx = tuple(info.local[iv] for iv in st.op.axis)
    update = _update_stmt(s, infos, info, store_idx)
    first_reduce = next((n for n, iv in enumerate(leaves) if iv.kind == REDUCE), None)
    inner: Stmt = update
    for pos in range(len(leaves) - 1, start - 1, -1):
        inner = _with_attached(s, infos, st, leaves[pos], inner)  # stages computed inside this loop
        inner = seq(inner, *_joined_nests(s, infos, st, pos))  # stages sharing the loops down to this one
        inner = _loop(st, info, leaves[pos], inner)
        if pos == first_reduce:
            inner = seq(_init_nest(info, store_idx, leaves[pos + 1:], leaves[:pos]), inner)
    return inner


def _loop(st: Stage, info: _StageInfo, iv: IterVar, body: Stmt) -> For:
    kind = _LOOP_KIND.get(st.iter_kinds.get(iv), ir.SERIAL)
    return For(iv.var, Const(info.extent[iv]), kind, body, st.thread_tags.get(iv))


def _with_attached(s: Schedule, infos, host: Stage, iv: IterVar, body: Stmt) -> Stmt:
    """``body`` of host loop ``iv`` preceded by the stages attached there, inside their buffers."""
    attached = [st for st in s.stages if st.attach == "at" and st.attach_stage is host and st.attach_ivar is iv]
    if not attached:
        return body
    body = seq(*[_stage_nest(s, infos, infos[st]) for st in attached], body)
    for st in reversed(attached):
        body = _allocated(infos[st], body)
    return body


def _joined_nests(s: Schedule, infos, host: Stage, pos: int) -> list[Stmt]:
    """The stages computed with ``host`` down to its loop ``pos`` (``compute_with``), each
    its loops below the shared ones, over the host's loop variables, after the host's."""
    out = []
    for st in s.stages:
        if st.with_stage is not host or host.leaf_iter_vars.index(st.with_ivar) != pos:
            continue
        nest = _stage_nest(s, infos, infos[st], start=pos + 1)
        leaves = st.leaf_iter_vars
        for q in range(pos, -1, -1):  # stages attached at its shared loops run once per shared iteration
            nest = _with_attached(s, infos, st, leaves[q], nest)
        shared = {leaves[q].var: host.leaf_iter_vars[q].var for q in range(pos + 1)}
        out.append(ir.map_stmt(nest, fexpr=lambda e, shared=shared: substitute(e, shared)))
    return out


def _guarded(stmt: Stmt, guards: list[Expr]) -> Stmt:
    cond = None
    for g in guards:
        cond = g if cond is None else cond & g
    return stmt if cond is None else IfThenElse(cond, stmt)


def _update_stmt(s: Schedule, infos, info: _StageInfo, store_idx) -> Stmt:
    env = _root_values(info, infos.an)
    body = info.body
    if isinstance(body, Reduce):
        source = _loads(s, infos, substitute(body.source, env))
        acc = BufferLoad(info.buffer, store_idx, body.dtype)
        if body.combiner == "softmax_sum":
            stmt: Stmt = _rescaled_update(info, store_idx, acc, source, _loads(s, infos, substitute(body.logit, env)))
        else:
            stmt = BufferStore(info.buffer, store_idx, Binary({"sum": "add"}.get(body.combiner, body.combiner), acc, source, body.dtype))
        if body.condition is not None:
            stmt = IfThenElse(_loads(s, infos, substitute(body.condition, env)), stmt)
    else:
        stmt = BufferStore(info.buffer, store_idx, _loads(s, infos, substitute(body, env)))
    return _guarded(stmt, info.guards)


def _rescaled_update(info: _StageInfo, store_idx, acc: Expr, value: Expr, logit: Expr) -> Stmt:
    """A softmax_sum's step: with ``m`` the running maximum and ``m' = max(m, logit)``,
    ``acc = acc * exp(m - m') + value * exp(logit - m')``, then ``m = m'``. The first step
    (``m`` = -inf) gives ``acc = value``."""
    dtype = acc.dtype
    m = BufferLoad(info.state, store_idx, dtype)
    top = Binary("max", m, logit, dtype)

    def weight(x: Expr) -> Expr:
        return Call("exp", (Binary("sub", x, top, dtype),), dtype)

    rescaled = Binary("add", Binary("mul", acc, weight(m), dtype), Binary("mul", value, weight(logit), dtype), dtype)
    return seq(BufferStore(info.buffer, store_idx, rescaled), BufferStore(info.state, store_idx, top))


def _init_nest(info: _StageInfo, store_idx, spatial_below: list[IterVar], outer: list[IterVar]) -> Stmt:
    """Set the accumulator to the reduction's identity before the first reduce loop."""
    st = info.stage
    loops = [iv for iv in spatial_below if iv.kind != REDUCE]
    allowed = {iv.var for iv in loops + outer}
    guards = [g for g in info.guards if free_vars(g) <= allowed]
    stmt: Stmt = BufferStore(info.buffer, store_idx, info.body.identity)
    if info.state is not None:
        stmt = seq(stmt, BufferStore(info.state, store_idx, Const(dtypes.min_value(info.state.dtype), info.state.dtype)))
    stmt = _guarded(stmt, guards)
    for iv in reversed(loops):
        stmt = _loop(st, info, iv, stmt)
    return stmt


def _loads(s: Schedule, infos, e: Expr) -> Expr:
    """Turn tensor reads into loads of the buffers that hold them (region-relative)."""

    def rewrite(node):
        if not isinstance(node, TensorRead):
            return None
        producer = s.stage_of(node.tensor)
        if producer is None:
            return BufferLoad(_placeholder_buffer(infos, node.tensor), node.indices, node.dtype)
        pinfo = infos[producer]
        mins = [pinfo.root_min[iv] for iv in producer.op.axis]
        idx = tuple(infos.an.simplify(i - m) for i, m in zip(node.indices, mins))
        return BufferLoad(pinfo.buffer, idx, node.dtype)

    return transform(e, rewrite)


def _placeholder_buffer(infos, tensor: Tensor) -> Buffer:
    return infos.placeholder_buffers[tensor.op]
