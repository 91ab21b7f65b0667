"""The schedule object and its primitives.

A ``Schedule`` holds one ``Stage`` per compute operation. A stage starts with one loop
per axis (spatial axes, then reduce axes) and primitives rewrite that loop nest:

    s = create_schedule(C)                       for i in 0..M:
                                                   for j in 0..N:
                                                     for k in 0..K: C[i,j] += ...
    io, ii = s[C].split(i, factor=32)            for i.outer in 0..ceil(M/32):
                                                   for i.inner in 0..32:
                                                     if i.outer*32 + i.inner < M: ...

A split whose factor does not divide the extent is legal: the body is guarded so the
tail iterations past the extent do nothing (the guard vanishes when the factor divides).

Every primitive checks its arguments at the call and raises ``ScheduleError`` with a
message naming the stage and axis, so an illegal schedule never reaches lowering.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from te.dag import topological_order
from te.errors import TEError
from te.expr import TensorRead, Var, as_expr, if_then_else, transform
from te.tensor import REDUCE, SPATIAL, ComputeOp, IterVar, Operation, PlaceholderOp, Tensor, compute, placeholder

THREAD_TAGS = (
    "blockIdx.x", "blockIdx.y", "blockIdx.z", "threadIdx.x", "threadIdx.y", "threadIdx.z", "vthread",
)


class ScheduleError(TEError):
    """An illegal schedule primitive call."""


# ---------------------------------------------------------------- relations


@dataclass(frozen=True, eq=False)
class Split:
    """``parent = outer * inner_extent + inner``; exactly one of factor/nparts is set."""

    parent: IterVar
    outer: IterVar
    inner: IterVar
    factor: int | None
    nparts: int | None


@dataclass(frozen=True, eq=False)
class Fuse:
    """``fused = outer * inner_extent + inner``."""

    outer: IterVar
    inner: IterVar
    fused: IterVar


def _ceildiv(a: int, b: int) -> int:
    return -(-a // b)


def _positive_int(value, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ScheduleError(f"{what} must be a positive int, got {value!r}")
    if value <= 0:
        raise ScheduleError(f"{what} must be positive, got {value}")
    return value


def panel_layout(tensor: Tensor, dim: int, width: int, panels: int | None = None) -> Tensor:
    """``tensor`` as panels ``width`` wide along ``dim``: a compute ``<name>.panels`` of shape
    (ceil(extent/width), other dims..., width), zero past the extent (``Schedule.pack_panels``);
    ``panels`` (at least ceil(extent/width)) pads it with panels of zeros."""
    extent = tensor.shape[dim]
    others = [n for n in range(len(tensor.shape)) if n != dim]
    whole = -(-extent // width)
    if panels is None:
        panels = whole
    elif _positive_int(panels, f"panels of {tensor.name!r}") < whole:
        raise ScheduleError(f"panels of {tensor.name!r}: {panels} panels of {width} do not hold its {extent} "
                            f"elements along dimension {dim}; at least {whole}")
    shape = (panels, *(tensor.shape[n] for n in others), width)

    def element(outer, *rest):
        *kept, inner = rest
        index = [None] * len(tensor.shape)
        for n, v in zip(others, kept):
            index[n] = v
        index[dim] = outer * width + inner
        value = tensor[tuple(index)]
        if panels * width > extent:
            return if_then_else(index[dim] < extent, value, as_expr(0, tensor.dtype))
        return value

    return compute(shape, element, name=f"{tensor.name}.panels", tag="pack_panels")


@dataclass(frozen=True, eq=False)
class LayoutRewrite:
    """An input the schedule's stages read in another layout, packed once before the kernel
    runs (``Schedule.rewrite_layout``): ``packed`` is the placeholder they read, ``packing``
    the compute of ``packed`` from ``source`` (its own schedule makes the packing function)."""

    source: Tensor
    packed: Tensor
    packing: Tensor


# ---------------------------------------------------------------- stage


class Stage:
    """The loop nest of one operation and how it is placed in its consumers."""

    def __init__(self, op: ComputeOp, schedule: "Schedule"):
        self.op = op
        self.origin_op = op
        self.schedule = schedule
        self.relations: list[Split | Fuse] = []
        self.leaf_iter_vars: list[IterVar] = list(op.axis) + list(op.reduce_axis)
        self.iter_kinds: dict[IterVar, str] = {}  # "vectorize" | "unroll" | "parallel" | "bind"
        self.thread_tags: dict[IterVar, str] = {}
        self.attach: str = "root"  # "root" | "inline" | "at"
        self.attach_stage: Stage | None = None
        self.attach_ivar: IterVar | None = None
        self.with_stage: Stage | None = None  # compute_with: the stage whose outer loops it shares
        self.with_ivar: IterVar | None = None
        self.scope = "global"
        self.is_output = False

    @property
    def name(self) -> str:
        return self.op.name

    @property
    def root_iter_vars(self) -> list[IterVar]:
        return list(self.op.axis) + list(self.op.reduce_axis)

    def __repr__(self):
        return f"Stage({self.name})"

    # ------------------------------------------------------------ checks

    def _check_not_inlined(self, primitive: str) -> None:
        if self.attach == "inline":
            raise ScheduleError(f"{primitive} on stage {self.name!r}, which is inlined (compute_inline)")

    def _check_leaf(self, ivar, primitive: str) -> IterVar:
        self._check_not_inlined(primitive)
        if not isinstance(ivar, IterVar):
            raise ScheduleError(f"{primitive} on stage {self.name!r}: expected an axis (IterVar), got {ivar!r}")
        if ivar not in self.leaf_iter_vars:
            if any(ivar in self._all_vars_of(r) for r in self.relations) or ivar in self.root_iter_vars:
                raise ScheduleError(
                    f"{primitive} on stage {self.name!r}: axis {ivar.name!r} was already split or fused; "
                    f"use the axes that split/fuse returned"
                )
            raise ScheduleError(f"{primitive} on stage {self.name!r}: axis {ivar.name!r} is not an axis of this stage")
        return ivar

    @staticmethod
    def _all_vars_of(rel) -> tuple[IterVar, ...]:
        if isinstance(rel, Split):
            return (rel.parent, rel.outer, rel.inner)
        return (rel.outer, rel.inner, rel.fused)

    def _check_annotation_free(self, ivar: IterVar, primitive: str) -> None:
        if ivar in self.iter_kinds:
            raise ScheduleError(
                f"{primitive} on stage {self.name!r}: axis {ivar.name!r} is already marked {self.iter_kinds[ivar]}"
            )

    # ------------------------------------------------------------ loop structure

    def split(self, axis: IterVar, factor: int | None = None, nparts: int | None = None):
        """Split ``axis`` into (outer, inner) with inner extent ``factor`` or ``nparts`` outer parts."""
        self._check_leaf(axis, "split")
        if (factor is None) == (nparts is None):
            raise ScheduleError(f"split on stage {self.name!r}: give exactly one of factor= or nparts=")
        if factor is not None:
            factor = _positive_int(factor, f"split factor of {axis.name!r}")
            inner_ext, outer_ext = factor, _ceildiv(axis.extent, factor)
        else:
            nparts = _positive_int(nparts, f"split nparts of {axis.name!r}")
            outer_ext, inner_ext = nparts, _ceildiv(axis.extent, nparts)
        if axis in self.iter_kinds:
            raise ScheduleError(f"split on stage {self.name!r}: axis {axis.name!r} is already {self.iter_kinds[axis]}")
        outer = IterVar(Var(axis.name + ".outer"), 0, outer_ext, axis.kind)
        inner = IterVar(Var(axis.name + ".inner"), 0, inner_ext, axis.kind)
        self.relations.append(Split(axis, outer, inner, factor, nparts))
        pos = self.leaf_iter_vars.index(axis)
        self.leaf_iter_vars[pos:pos + 1] = [outer, inner]
        return outer, inner

    def tile(self, x: IterVar, y: IterVar, x_factor: int, y_factor: int):
        """Split ``x`` and ``y`` and order the loops (x.outer, y.outer, x.inner, y.inner)."""
        xo, xi = self.split(x, factor=x_factor)
        yo, yi = self.split(y, factor=y_factor)
        self.reorder(xo, yo, xi, yi)
        return xo, yo, xi, yi

    def reorder(self, *axes: IterVar) -> None:
        """Put ``axes`` in this order, in the loop positions they occupy now."""
        if len(axes) == 1 and isinstance(axes[0], (list, tuple)):
            axes = tuple(axes[0])
        for ax in axes:
            self._check_leaf(ax, "reorder")
        if len(set(axes)) != len(axes):
            dup = next(a for a in axes if axes.count(a) > 1)
            raise ScheduleError(f"reorder on stage {self.name!r}: axis {dup.name!r} is listed twice")
        positions = sorted(self.leaf_iter_vars.index(a) for a in axes)
        for pos, ax in zip(positions, axes):
            self.leaf_iter_vars[pos] = ax

    def fuse(self, *axes: IterVar) -> IterVar:
        """Fuse adjacent loops (outermost first) into one loop over their product."""
        if len(axes) == 1 and isinstance(axes[0], (list, tuple)):
            axes = tuple(axes[0])
        if len(axes) < 2:
            if len(axes) == 1:
                return self._check_leaf(axes[0], "fuse")
            raise ScheduleError(f"fuse on stage {self.name!r}: needs at least one axis")
        fused = axes[0]
        for nxt in axes[1:]:
            fused = self._fuse_pair(fused, nxt)
        return fused

    def _fuse_pair(self, outer: IterVar, inner: IterVar) -> IterVar:
        self._check_leaf(outer, "fuse")
        self._check_leaf(inner, "fuse")
        po, pi = self.leaf_iter_vars.index(outer), self.leaf_iter_vars.index(inner)
        if pi != po + 1:
            raise ScheduleError(
                f"fuse on stage {self.name!r}: axes {outer.name!r} and {inner.name!r} are not adjacent "
                f"with {outer.name!r} directly outside; reorder them first"
            )
        if outer.kind != inner.kind:
            raise ScheduleError(
                f"fuse on stage {self.name!r}: cannot fuse spatial and reduce axes ({outer.name!r}, {inner.name!r})"
            )
        for ax in (outer, inner):
            self._check_annotation_free(ax, "fuse")
        fused = IterVar(Var(f"{outer.name}.{inner.name}.fused"), 0, outer.extent * inner.extent, outer.kind)
        self.relations.append(Fuse(outer, inner, fused))
        self.leaf_iter_vars[po:pi + 1] = [fused]
        return fused

    # ------------------------------------------------------------ loop annotations

    def _annotate(self, axis: IterVar, kind: str, spatial_only: bool) -> None:
        self._check_leaf(axis, kind)
        self._check_annotation_free(axis, kind)
        if spatial_only and axis.kind == REDUCE:
            raise ScheduleError(
                f"{kind} on stage {self.name!r}: axis {axis.name!r} is a reduction axis; "
                f"iterations of a reduction depend on each other"
            )
        self.iter_kinds[axis] = kind

    def vectorize(self, axis: IterVar) -> None:
        """Run ``axis`` (innermost, spatial) as SIMD lanes."""
        self._annotate(axis, "vectorize", spatial_only=True)

    def unroll(self, axis: IterVar) -> None:
        """Fully unroll ``axis``."""
        self._annotate(axis, "unroll", spatial_only=False)

    def parallel(self, axis: IterVar) -> None:
        """Run iterations of ``axis`` (spatial) on parallel threads."""
        self._annotate(axis, "parallel", spatial_only=True)

    def bind(self, axis: IterVar, thread_tag: str) -> None:
        """Map ``axis`` to a GPU index (``blockIdx.x``, ``threadIdx.y``, ...)."""
        if thread_tag not in THREAD_TAGS:
            raise ScheduleError(f"bind on stage {self.name!r}: unknown thread tag {thread_tag!r}; use one of {', '.join(THREAD_TAGS)}")
        if thread_tag in self.thread_tags.values():
            raise ScheduleError(f"bind on stage {self.name!r}: {thread_tag} is already bound to another axis")
        self._annotate(axis, "bind", spatial_only=True)
        self.thread_tags[axis] = thread_tag

    # ------------------------------------------------------------ placement

    def compute_at(self, parent: "Stage", axis: IterVar) -> None:
        """Compute this stage inside loop ``axis`` of ``parent``, only the region it needs there.

        ``parent`` must read this stage, directly or through other stages (inlined, attached
        or not): bound inference carries the region ``parent`` needs back through the chain.
        Lowering checks that every reader then runs inside that loop (attached there or
        deeper); the call cannot, since the readers between may be attached afterwards.
        """
        self._check_not_inlined("compute_at")
        if not isinstance(parent, Stage):
            parent = self.schedule[parent]
        if parent is self:
            raise ScheduleError(f"compute_at: stage {self.name!r} cannot be computed at itself")
        if self.is_output:
            raise ScheduleError(f"compute_at: stage {self.name!r} is an output of the schedule; it must stay at the root")
        if self.with_stage is not None or any(st.with_stage is self for st in self.schedule.stages):
            raise ScheduleError(f"compute_at: stage {self.name!r} shares loops with another (compute_with); "
                                f"it must stay at the root")
        parent._check_leaf(axis, "compute_at")
        if not self.schedule.reads_through_chain(parent, self):
            raise ScheduleError(
                f"compute_at: stage {parent.name!r} does not read {self.name!r} "
                f"(directly or through other stages), so it cannot host it"
            )
        stage = parent
        while stage is not None:
            if stage is self:
                raise ScheduleError(f"compute_at: attaching {self.name!r} at {parent.name!r} makes a cycle")
            stage = stage.attach_stage
        self.attach, self.attach_stage, self.attach_ivar = "at", parent, axis

    def compute_with(self, parent: "Stage", axis: IterVar) -> None:
        """Run this stage inside ``parent``'s loops: horizontal fusion (Halide's ``compute_with``).

        This stage's outer loops, down to the one at ``axis``'s position in ``parent``'s loop
        nest, become ``parent``'s loops; inside the innermost shared loop this stage's
        remaining loops run after ``parent``'s. Siblings that read one input (the Q, K and V
        projections of an activation) then compute in one loop nest, one parallel region,
        each block of the shared input still in cache for the next sibling.

        Both stages are stored at the root and neither reads the other (directly or through
        other stages). Lowering checks what the loops look like by then: the shared loops
        are spatial in both, with the same extents and the same kinds (parallel, serial...).
        """
        self._check_not_inlined("compute_with")
        if not isinstance(parent, Stage):
            parent = self.schedule[parent]
        if parent is self:
            raise ScheduleError(f"compute_with: stage {self.name!r} cannot be computed with itself")
        parent._check_leaf(axis, "compute_with")
        for st, role in ((self, "it"), (parent, "its parent")):
            if st.attach != "root":
                raise ScheduleError(f"compute_with: stage {st.name!r} ({role}) is computed at another stage; "
                                    f"compute_with joins two stages stored at the root")
        if parent.with_stage is not None:
            raise ScheduleError(f"compute_with: stage {parent.name!r} is itself computed with "
                                f"{parent.with_stage.name!r}; compute {self.name!r} with that one instead")
        joined = [st.name for st in self.schedule.stages if st.with_stage is self]
        if joined:
            raise ScheduleError(f"compute_with: stages {', '.join(joined)} are computed with {self.name!r}; "
                                f"join them to {parent.name!r} directly")
        for reader, producer in ((parent, self), (self, parent)):
            if self.schedule.reads_through_chain(reader, producer):
                raise ScheduleError(
                    f"compute_with: stage {reader.name!r} reads {producer.name!r}, so their loops cannot be "
                    f"shared (one would read values the other has not computed yet)")
        position = parent.leaf_iter_vars.index(axis)
        if len(self.leaf_iter_vars) <= position:
            raise ScheduleError(f"compute_with: stage {self.name!r} has {len(self.leaf_iter_vars)} loops, "
                                f"fewer than the {position + 1} it would share with {parent.name!r}")
        self.with_stage, self.with_ivar = parent, axis

    def compute_inline(self) -> None:
        """Substitute this element-wise stage into every reader; it gets no loops of its own."""
        self._check_not_inlined("compute_inline")
        if self.is_output:
            raise ScheduleError(f"compute_inline: stage {self.name!r} is an output and must be stored")
        if self.op.is_reduction:
            raise ScheduleError(f"compute_inline: stage {self.name!r} is a reduction; only element-wise stages inline")
        hosted = [s.name for s in self.schedule.stages if s.attach_stage is self or s.with_stage is self]
        if hosted:
            raise ScheduleError(f"compute_inline: stages {', '.join(hosted)} are computed at {self.name!r}; move them first")
        self.attach, self.attach_stage, self.attach_ivar = "inline", None, None
        self.with_stage = self.with_ivar = None

    def compute_root(self) -> None:
        """Compute this stage in full at the top level (the default)."""
        self._check_not_inlined("compute_root")
        self.attach, self.attach_stage, self.attach_ivar = "root", None, None
        self.with_stage = self.with_ivar = None

    def set_scope(self, scope: str) -> None:
        from .ir import SCOPES

        if scope not in SCOPES:
            raise ScheduleError(f"set_scope on stage {self.name!r}: unknown scope {scope!r}; use one of {', '.join(SCOPES)}")
        self.scope = scope


# ---------------------------------------------------------------- schedule


class Schedule:
    """Stages of every compute operation behind ``outputs``, in topological order."""

    def __init__(self, outputs: Sequence[Tensor]):
        self.outputs = list(outputs)
        self.stages: list[Stage] = []
        self._by_op: dict[Operation, Stage] = {}
        #: source placeholder's op -> its LayoutRewrite (``rewrite_layout``)
        self.layout_rewrites: dict[Operation, LayoutRewrite] = {}
        for op in topological_order(self.outputs):
            if isinstance(op, ComputeOp):
                self._add_stage(Stage(op, self))
        for t in self.outputs:
            self[t].is_output = True

    def _add_stage(self, stage: Stage, before: Stage | None = None) -> Stage:
        if before is None:
            self.stages.append(stage)
        else:
            self.stages.insert(self.stages.index(before), stage)
        self._by_op[stage.op] = stage
        return stage

    def __getitem__(self, key) -> Stage:
        op = key.op if isinstance(key, Tensor) else key
        if isinstance(key, Stage):
            return key
        stage = self._by_op.get(op)
        if stage is None:
            if isinstance(op, PlaceholderOp):
                raise ScheduleError(f"{op.name!r} is a placeholder (an input); it has no stage to schedule")
            raise ScheduleError(f"{getattr(op, 'name', op)!r} is not part of this schedule")
        return stage

    def stage_of(self, tensor: Tensor) -> Stage | None:
        """The stage computing ``tensor``, or None for a placeholder."""
        return self._by_op.get(tensor.op)

    def reader_stages(self, stage: Stage) -> list[Stage]:
        """Stages that read ``stage``'s output, looking through inlined stages."""
        readers = []
        for s in self.stages:
            if s is stage or s.attach == "inline":
                continue
            if stage in self.effective_producers(s):
                readers.append(s)
        return readers

    def reads_through_chain(self, consumer: Stage, producer: Stage) -> bool:
        """Whether ``consumer`` reads ``producer``'s output directly or through any stages between."""
        todo = list(consumer.op.input_tensors)
        seen: set[int] = set()
        while todo:
            stage = self.stage_of(todo.pop())
            if stage is None or id(stage) in seen:
                continue
            if stage is producer:
                return True
            seen.add(id(stage))
            todo.extend(stage.op.input_tensors)
        return False

    def effective_producers(self, stage: Stage) -> list[Stage]:
        """Stored (non-inlined) stages whose output ``stage`` reads, through inlined stages."""
        out: list[Stage] = []
        todo = [t for t in stage.op.input_tensors]
        seen: set[int] = set()
        while todo:
            t = todo.pop()
            producer = self.stage_of(t)
            if producer is None or id(producer) in seen:
                continue
            seen.add(id(producer))
            if producer.attach == "inline":
                todo.extend(producer.op.input_tensors)
            else:
                out.append(producer)
        return out

    # ------------------------------------------------------------ caches

    def _replace_reads(self, stage: Stage, old: Tensor, new: Tensor) -> None:
        """Make ``stage`` read ``new`` wherever it read ``old`` (keeping its axes)."""
        old_op = old.op
        body = transform(
            stage.op.body,
            lambda n: TensorRead(new, n.indices, n.dtype) if isinstance(n, TensorRead) and n.tensor.op is old_op else None,
        )
        self._set_op(stage, ComputeOp(stage.op.name, stage.op.axis, body, stage.op.tag, stage.op.attrs))

    def _set_op(self, stage: Stage, op: ComputeOp) -> None:
        self._by_op[op] = stage
        stage.op = op

    def cache_read(self, tensor: Tensor, scope: str, readers) -> Tensor:
        """A copy ``tensor.<scope>`` of ``tensor`` that ``readers`` read instead.

        Attach the copy with ``compute_at`` to stage only the tile a loop needs
        (packing on CPU, shared-memory staging on GPU).
        """
        from .ir import SCOPES

        if scope not in SCOPES:
            raise ScheduleError(f"cache_read: unknown scope {scope!r}; use one of {', '.join(SCOPES)}")
        reader_stages = [self[r] for r in (readers if isinstance(readers, (list, tuple)) else [readers])]
        if not reader_stages:
            raise ScheduleError("cache_read: give at least one reader")
        for r in reader_stages:
            r._check_not_inlined("cache_read")
            if tensor.op not in [t.op for t in r.op.input_tensors]:
                raise ScheduleError(f"cache_read: stage {r.name!r} does not read {tensor.name!r}")
        cache = compute(tensor.shape, lambda *i: tensor[i], name=f"{tensor.name}.{scope}", tag="cache_read")
        first_reader = min(reader_stages, key=self.stages.index)
        stage = self._add_stage(Stage(cache.op, self), before=first_reader)
        stage.scope = scope
        for r in reader_stages:
            self._replace_reads(r, tensor, cache)
        return cache

    def pack_panels(self, tensor: Tensor, dim: int, width: int, readers, panels: int | None = None) -> Tensor:
        """A copy of ``tensor`` laid out as panels ``width`` wide along ``dim``, read by ``readers``.

        For ``B`` of shape (K, N), ``pack_panels(B, 1, 16, [C])`` makes ``B.panels`` of shape
        (ceil(N/16), K, 16) with ``B.panels[jo, k, ji] = B[k, jo*16 + ji]`` (zero past N), and
        ``C`` reads ``B.panels[j // 16, k, j % 16]`` where it read ``B[k, j]``. A micro-kernel
        whose register tile is 16 wide along ``j`` then streams one contiguous panel as ``k``
        advances, instead of touching a new row (and page) of ``B`` at every step: the
        GotoBLAS packing of B, done once per call as a stage of its own (TVM's x86 dense
        schedules do the same; ``rewrite_layout`` packs once, at build time, instead). The
        copy is a root stage; split, vectorize and parallelize it like any other.

        ``panels`` pads the copy with panels of zeros up to that many: a reader whose cache
        blocks overhang the extent by more than one panel then reads zeros there too, so its
        register tiles compute whole (``schedule.lower`` drops the guards of an axis whose
        overhang reads stay inside whole buffers).
        """
        reader_stages = self._panel_readers("pack_panels", tensor, dim, width, readers)
        packed = panel_layout(tensor, dim, width, panels)
        self._add_stage(Stage(packed.op, self), before=min(reader_stages, key=self.stages.index))
        self._read_panels(reader_stages, tensor, dim, width, packed)
        return packed

    def rewrite_layout(self, tensor: Tensor, dim: int, width: int, readers, panels: int | None = None) -> Tensor:
        """Make ``readers`` read input ``tensor`` as panels (the layout of ``pack_panels``) that
        the caller supplies, packed once rather than on every call: TVM's layout rewrite of
        constant weights. Returns the new placeholder ``<name>.panels`` that ``readers`` read.

        A function lowered from this schedule still lists ``tensor`` among its arguments, but
        its parameter there is the packed placeholder, and its ``prepacks`` hold the function
        that packs ``tensor`` (``schedule.ir.Prepack``): the built module packs it when
        called with ``tensor`` as is, or takes the panels packed once beforehand. ``panels``
        pads them with panels of zeros, as in ``pack_panels``.
        """
        if not isinstance(tensor.op, PlaceholderOp):
            raise ScheduleError(f"rewrite_layout: {tensor.name!r} is computed; only inputs (placeholders) "
                                f"can be packed once before the kernel runs (use pack_panels)")
        if tensor.op in self.layout_rewrites:
            raise ScheduleError(f"rewrite_layout: the layout of {tensor.name!r} is rewritten already")
        reader_stages = self._panel_readers("rewrite_layout", tensor, dim, width, readers)
        others = [st.name for st in self.stages if st not in reader_stages and st.attach != "inline"
                  and tensor.op in [t.op for t in st.op.input_tensors]]
        if others:  # the kernel no longer receives the input as laid out: nobody may read it so
            raise ScheduleError(f"rewrite_layout: stage(s) {', '.join(others)} also read {tensor.name!r}; "
                                f"list every reader")
        packing = panel_layout(tensor, dim, width, panels)
        packed = placeholder(packing.shape, tensor.dtype, packing.name)
        self._read_panels(reader_stages, tensor, dim, width, packed)
        self.layout_rewrites[tensor.op] = LayoutRewrite(tensor, packed, packing)
        return packed

    def precompute(self, tensor: Tensor) -> Tensor:
        """Compute ``tensor`` once, before the kernel runs, rather than on every call: the
        stages behind it (itself and every stage it reads) leave the kernel, and its readers
        read a new placeholder of the same name instead. For a tensor computed from
        constant weights alone, as Winograd's kernel transform is (TVM folds the same
        transform into the weights at build time). Returns the new placeholder.

        The stages behind ``tensor`` must read exactly one input, which no other stage reads,
        and no other stage may read them: the kernel no longer receives that input as laid
        out. As with ``rewrite_layout``, a function lowered from this schedule lists the
        input among its arguments, its parameter there is the precomputed tensor, and its
        ``prepacks`` hold the function computing it from the input.
        """
        stage = self[tensor]
        if stage.is_output:
            raise ScheduleError(f"precompute: {tensor.name!r} is an output of the schedule")
        group, sources, todo = [], [], [tensor]
        while todo:
            t = todo.pop()
            producer = self.stage_of(t)
            if producer is None:
                if t.op not in [x.op for x in sources]:
                    sources.append(t)
            elif producer not in group:
                group.append(producer)
                todo.extend(producer.op.input_tensors)
        if len(sources) != 1:
            names = ", ".join(sorted(t.name for t in sources))
            raise ScheduleError(f"precompute: {tensor.name!r} is computed from {names}; it must be computed from "
                                f"exactly one input")
        (source,) = sources
        if source.op in self.layout_rewrites or source.op in [rw.packed.op for rw in self.layout_rewrites.values()]:
            raise ScheduleError(f"precompute: {source.name!r} is packed or precomputed already")
        for other in self.stages:
            if other in group or other.attach == "inline":
                continue
            read = {t.op for t in other.op.input_tensors}
            if source.op in read:
                raise ScheduleError(f"precompute: stage {other.name!r} also reads {source.name!r}, which the "
                                    f"kernel no longer receives")
            inner = [g.name for g in group if g is not stage and g.op in read]
            if inner:
                raise ScheduleError(f"precompute: stage {other.name!r} reads {', '.join(inner)}, computed "
                                    f"before the kernel runs with {tensor.name!r}")
        packed = placeholder(tensor.shape, tensor.dtype, tensor.name)
        for reader in [st for st in self.stages if st not in group and tensor.op in [t.op for t in st.op.input_tensors]]:
            self._replace_reads(reader, tensor, packed)
        for g in group:
            self.stages.remove(g)
            del self._by_op[g.op]
        self.layout_rewrites[source.op] = LayoutRewrite(source, packed, tensor)
        return packed

    def _panel_readers(self, primitive: str, tensor: Tensor, dim: int, width: int, readers) -> list[Stage]:
        reader_stages = [self[r] for r in (readers if isinstance(readers, (list, tuple)) else [readers])]
        if not reader_stages:
            raise ScheduleError(f"{primitive}: give at least one reader")
        if not 0 <= dim < len(tensor.shape):
            raise ScheduleError(f"{primitive}: {tensor.name!r} has no dimension {dim} (it has {len(tensor.shape)})")
        if width < 1:
            raise ScheduleError(f"{primitive}: panel width must be positive, got {width}")
        for r in reader_stages:
            r._check_not_inlined(primitive)
            if tensor.op not in [t.op for t in r.op.input_tensors]:
                raise ScheduleError(f"{primitive}: stage {r.name!r} does not read {tensor.name!r}")
        return reader_stages

    def _read_panels(self, reader_stages: list[Stage], tensor: Tensor, dim: int, width: int, panels: Tensor) -> None:
        """Make ``reader_stages`` read ``panels[j // width, ..., j % width]`` for ``tensor[..., j, ...]``."""
        old_op = tensor.op
        others = [n for n in range(len(tensor.shape)) if n != dim]

        def reindex(n):
            if not (isinstance(n, TensorRead) and n.tensor.op is old_op):
                return None
            idx = n.indices
            kept = tuple(idx[k] for k in others)
            return TensorRead(panels, (idx[dim] // width, *kept, idx[dim] % width), n.dtype)

        for r in reader_stages:
            body = transform(r.op.body, reindex)
            self._set_op(r, ComputeOp(r.op.name, r.op.axis, body, r.op.tag, r.op.attrs))

    def cache_write(self, tensor: Tensor, scope: str) -> Tensor:
        """Compute ``tensor`` into a ``<name>.<scope>`` buffer and copy it out afterwards.

        The cache stage takes over the computation (and the reduce axes); the original
        stage becomes an element-wise copy keeping its spatial axes, so tiles of the
        cache can accumulate in registers and be written back once.
        """
        from .ir import SCOPES

        if scope not in SCOPES:
            raise ScheduleError(f"cache_write: unknown scope {scope!r}; use one of {', '.join(SCOPES)}")
        stage = self[tensor]
        stage._check_not_inlined("cache_write")
        if stage.relations or stage.iter_kinds:
            raise ScheduleError(f"cache_write on {stage.name!r} must come before split/fuse/annotations of that stage")
        op = stage.op
        names = [iv.name for iv in op.axis]
        fresh = [IterVar(Var(n), 0, iv.extent, SPATIAL) for n, iv in zip(names, op.axis)]
        mapping = {old.var: new.var for old, new in zip(op.axis, fresh)}
        from te.expr import substitute

        cache_body = substitute(op.body, mapping)
        cache_op = ComputeOp(f"{op.name}.{scope}", tuple(fresh), cache_body, op.tag, op.attrs)
        cache_stage = self._add_stage(Stage(cache_op, self), before=stage)
        cache_stage.scope = scope
        cache_tensor = cache_op.output(0)
        copy_body = TensorRead(cache_tensor, tuple(iv.var for iv in op.axis), cache_tensor.dtype)
        self._set_op(stage, ComputeOp(op.name, op.axis, copy_body, op.tag, op.attrs))
        stage.leaf_iter_vars = list(op.axis)
        return cache_tensor


def create_schedule(outputs) -> Schedule:
    """A schedule with one default stage (plain loop nest) per compute of ``outputs``."""
    if isinstance(outputs, Tensor):
        outputs = [outputs]
    outputs = list(outputs)
    if not outputs:
        raise ScheduleError("create_schedule needs at least one output tensor")
    for t in outputs:
        if not isinstance(t, Tensor):
            raise ScheduleError(f"create_schedule: expected te.Tensor outputs, got {t!r}")
        if isinstance(t.op, PlaceholderOp):
            raise ScheduleError(f"create_schedule: {t.name!r} is a placeholder; outputs must be computed tensors")
    return Schedule(outputs)
