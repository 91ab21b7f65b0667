"""Sketch rules: the structure of a schedule, derived from the expression DAG (CPU).

Following Ansor, every compute stage gets one role, decided from the DAG alone:

    inline       element-wise, not an output, no expensive math, no tensor read at two
                 indices (padding, bias add): substituted into its readers; a multi_level stage may instead have
                 the ones with a condition (padding) stored before it runs
    multi_level  a reduction with data reuse (some input ignores a spatial axis, as
                 both inputs of matmul or conv2d do): "SSRSRS" tiling. Its output
                 tile is written by an *owner* stage: its only consumer when that is
                 element-wise over the same index space (the epilogue is fused), or else
                 a ``cache_write`` copy (the tile accumulates in a local buffer)
    fused        the element-wise consumer that owns a multi_level stage's tiles
    simple       everything else (element-wise outputs, reductions without reuse):
                 outer loops fused and parallel, inner spatial loop vectorized
    precomputed  (CPU) a simple stage computed from one constant input (a placeholder
                 some stage declares layout-free) and nothing else: Winograd's kernel
                 transform. Computed once, at build time (``Schedule.precompute``); the
                 kernel reads its result

A simple stage that is not an output and whose results all flow into one simple
element-wise stage (its *host*: softmax's max, exp and sum flow into the division,
layernorm's two row sums into the normalisation) may instead be computed at one of the
host's outer loops (Ansor's compute-location choice): the host's rows are then produced
with their statistics in one pass, while the row is still in cache. A multi-level stage
that tiles on its own (no fused owner) hosts the same way at its outer ``a`` loops, and
such a stage can itself be computed at a host's loop: attention's scores, their softmax
statistics and exponentials computed per block of query rows inside the loop of the
product with V, so the score matrix never exists in full (a block holds its rows' scores
over every key). A stage that ``combines_online`` (``te.softmax_sum``,
``te.ops.flash_attention``'s combine) hosts the stages whose results flow into it at its
loop over the outer tile of its reduction: one key block's scores, statistics and product
with V per step (FlashAttention with its online rescaling).

The owner's loops are tiled in three levels per spatial axis, ``a`` (outer,
parallel), ``b`` (cache block) and ``c`` (register tile); the multi_level stage is
computed at the owner's last ``a`` or ``b`` loop and tiles its own region as
``S1 R0 S2 R1 S3`` (``S3`` innermost, vectorized; small inner loops unrolled).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from te.expr import Call, Const, Reduce, Select, TensorRead, Var, post_order, structural_equal, substitute
from te.tensor import ComputeOp, PlaceholderOp, Tensor
from te.dag import topological_order

INLINE = "inline"
MULTI_LEVEL = "multi_level"
FUSED = "fused"
SIMPLE = "simple"
PRECOMPUTED = "precomputed"


@dataclass
class StagePlan:
    """The role of one compute op and, for tiled stages, who owns its output tile."""

    op: ComputeOp
    role: str
    owner: ComputeOp | None = None  # multi_level: the fused consumer (None: cache_write)
    produces: ComputeOp | None = None  # fused: the multi_level stage it owns
    host: ComputeOp | None = None  # the stage at whose outer loops it may be computed
    readers: tuple = ()  # with a host: the stored stages that read it (maybe the host)
    guarded: tuple = ()  # multi_level: inlined producers it reads that hold a condition (padding)
    siblings: tuple = ()  # multi_level: later stages computing the same thing from a shared input
    leader: ComputeOp | None = None  # a sibling: the stage whose loops it may share
    sibling_inputs: dict = field(default_factory=dict)  # a sibling: leader's input name -> its own

    @property
    def name(self) -> str:
        return self.op.name


@dataclass
class Sketch:
    """Roles of every compute op of a DAG, in topological order."""

    plans: list[StagePlan] = field(default_factory=list)

    def plan_of(self, op) -> StagePlan:
        return next(p for p in self.plans if p.op is op)


def _has_expensive_math(op: ComputeOp) -> bool:
    return any(isinstance(n, Call) for n in post_order(op.body))


def _reads_a_tensor_twice(op: ComputeOp) -> bool:
    """Some tensor is read at more than one index (a stencil, Winograd's transforms): inlined,
    every reader would redo those reads and their arithmetic for each element it reads."""
    seen: dict = {}
    for n in post_order(op.body):
        if isinstance(n, TensorRead):
            first = seen.setdefault(n.tensor.op, n)
            if first is not n and not structural_equal(first, n):
                return True
    return False


def _is_inlinable(op: ComputeOp, outputs: set) -> bool:
    return (op not in outputs and not op.is_reduction and not _has_expensive_math(op)
            and not _reads_a_tensor_twice(op))


def _has_data_reuse(op: ComputeOp, inline_ops: set) -> bool:
    """Some tensor read (through inlined stages) ignores at least one spatial axis."""
    if not op.is_reduction:
        return False
    spatial = {iv.var for iv in op.axis}
    for read in _reads_through_inline(op.body, inline_ops):
        used = {n for idx in read.indices for n in post_order(idx) if isinstance(n, Var)}
        if spatial - used:
            return True
    return False


def _reads_through_inline(body, inline_ops: set):
    """Tensor reads of ``body``, looking through inlined producers: their reads count, with
    the producer's axes replaced by the indices it is read at (as inlining substitutes)."""
    out = []
    stack = [body]
    while stack:
        e = stack.pop()
        for n in post_order(e):
            if isinstance(n, TensorRead):
                if n.tensor.op in inline_ops:
                    producer = n.tensor.op
                    stack.append(substitute(producer.body, {iv.var: idx for iv, idx in zip(producer.axis, n.indices)}))
                else:
                    out.append(n)
    return out


def _guarded_producers(op: ComputeOp, inline_ops: set) -> tuple:
    """Inlined producers ``op`` reads (directly or through other inlined ones) whose body
    holds a condition: padding's ``if_then_else``. Inlined, the condition is evaluated at
    every read inside the micro-kernel; the space may store them instead."""
    found: list = []
    stack = [op.body]
    while stack:
        for n in post_order(stack.pop()):
            if isinstance(n, TensorRead) and n.tensor.op in inline_ops and n.tensor.op not in found:
                producer = n.tensor.op
                found.append(producer)
                stack.append(producer.body)
    return tuple(p for p in found if any(isinstance(n, Select) for n in post_order(p.body)))


def _effective_readers(op, ops: list, inline_ops: set) -> list:
    """Stored ops that read ``op``'s output, directly or through inlined ops."""
    readers = []
    for other in ops:
        if other is op or other in inline_ops or not isinstance(other, ComputeOp):
            continue
        if any(r.tensor.op is op for r in _reads_through_inline(other.body, inline_ops)):
            readers.append(other)
    return readers


def _reads_identity(reader: ComputeOp, op: ComputeOp, inline_ops: set) -> bool:
    """Every read of ``op`` in ``reader`` is ``op[reader's axes]`` in order (same index space)."""
    if reader.is_reduction or tuple(iv.extent for iv in reader.axis) != op.output(0).shape:
        return False
    axes = [iv.var for iv in reader.axis]
    reads = [r for r in _reads_through_inline(reader.body, inline_ops) if r.tensor.op is op]
    return bool(reads) and all(list(r.indices) == axes for r in reads)


def _constant_source(op: ComputeOp, constants: set, out_ops: set) -> bool:
    """Whether ``op`` is computed, through stages that are no outputs, from exactly one
    placeholder, and that one among ``constants``."""
    sources, todo, seen = set(), [op], set()
    while todo:
        current = todo.pop()
        if current in seen:
            continue
        seen.add(current)
        if isinstance(current, PlaceholderOp):
            sources.add(current)
        elif current in out_ops:
            return False
        else:
            todo.extend(t.op for t in current.input_tensors)
    return len(sources) == 1 and next(iter(sources)).name in constants


def _find_precomputed(sketch: Sketch, ops: list, out_ops: set) -> None:
    """Give the precomputed role to the simple stages computed from one constant input
    alone, where that leaves the kernel one stage to read per constant (the last of the
    chain) and no other reader of the constant: ``Schedule.precompute`` takes the chain
    out of the kernel whole and hands the kernel the last stage's result in its place."""
    constants = {name for op in ops for name in op.attrs.get("layout_free_placeholders", ())}
    chosen = {p.op for p in sketch.plans if p.role == SIMPLE and p.op not in out_ops
              and _constant_source(p.op, constants, out_ops)}
    for source in {t.op for op in chosen for t in op.input_tensors if isinstance(t.op, PlaceholderOp)}:
        chain = {op for op in chosen if _constant_source(op, {source.name}, out_ops)}
        readers = {op for op in ops if op not in chain and any(t.op in chain | {source} for t in op.input_tensors)}
        frontier = {t.op for op in readers for t in op.input_tensors if t.op in chain}
        if len(frontier) != 1 or any(t.op is source for op in readers for t in op.input_tensors):
            chosen -= chain
    for plan in sketch.plans:
        if plan.op in chosen:
            plan.role = PRECOMPUTED


def derive_sketch(outputs: list[Tensor], precompute: bool = True) -> Sketch:
    """The CPU sketch of the DAG behind ``outputs``; ``precompute=False`` gives no stage the
    precomputed role (targets that cannot run code at build time)."""
    ops = [op for op in topological_order(outputs) if isinstance(op, ComputeOp)]
    out_ops = {t.op for t in outputs}
    inline_ops = {op for op in ops if _is_inlinable(op, out_ops)}
    sketch = Sketch()
    owners: dict = {}
    for op in ops:
        if op in inline_ops:
            sketch.plans.append(StagePlan(op, INLINE))
        elif _has_data_reuse(op, inline_ops):
            readers = _effective_readers(op, ops, inline_ops)
            owner = None
            if len(readers) == 1 and _reads_identity(readers[0], op, inline_ops) and readers[0] not in owners.values():
                owner = readers[0]
                owners[op] = owner
            sketch.plans.append(StagePlan(op, MULTI_LEVEL, owner=owner, guarded=_guarded_producers(op, inline_ops)))
        else:
            sketch.plans.append(StagePlan(op, SIMPLE))
    for plan in sketch.plans:
        if plan.op in owners.values():
            plan.role = FUSED
            plan.produces = next(p for p, o in owners.items() if o is plan.op)
    if precompute:
        _find_precomputed(sketch, ops, out_ops)
    _find_hosts(sketch, ops, inline_ops, out_ops)
    _find_siblings(sketch)
    return sketch


def _find_siblings(sketch: Sketch) -> None:
    """Group multi-level stages that compute the same thing from one shared input: the Q, K
    and V projections of an activation, the 1x1 branches of an inception block. Each
    group's first stage (its *leader*) lists the others as ``siblings``; the space may run
    them inside the leader's outer loops with its tiles (horizontal fusion), so each block
    of the shared input is read once from memory for all of them."""
    plans = [p for p in sketch.plans if p.role == MULTI_LEVEL and p.host is None]
    for n, leader in enumerate(plans):
        if leader.leader is not None:
            continue
        for other in plans[n + 1:]:
            if other.leader is None and not other.siblings:
                names = _sibling_inputs(leader, other)
                if names is not None:
                    leader.siblings += (other.op,)
                    other.leader, other.sibling_inputs = leader.op, names


def _sibling_inputs(leader: StagePlan, other: StagePlan) -> dict[str, str] | None:
    """leader's input name -> ``other``'s, when ``other`` computes what ``leader`` does over
    the same axes, with the same fused epilogue (or none), reading at least one tensor of
    ``leader``'s as it does and, in place of the others, placeholders of the same shape
    (weights) that it declares layout-free alike. None when it does not."""
    tensors: dict = {}
    if not _same_op(leader.op, other.op, tensors):
        return None
    if (leader.owner is None) != (other.owner is None):
        return None
    if leader.owner is not None:
        tensors[other.op.output(0)] = leader.op.output(0)
        if not _same_op(leader.owner, other.owner, tensors):
            return None
    names = {}
    for theirs, mine in tensors.items():
        if theirs is mine or mine is leader.op.output(0):
            continue
        if not (isinstance(theirs.op, PlaceholderOp) and isinstance(mine.op, PlaceholderOp)
                and theirs.shape == mine.shape and theirs.dtype == mine.dtype):
            return None
        names[mine.name] = theirs.name
    shared = [t for t in other.op.input_tensors if tensors.get(t) is t]
    if not shared or len(set(names.values())) != len(names):
        return None
    free_mine = leader.op.attrs.get("layout_free_placeholders", ())
    free_theirs = other.op.attrs.get("layout_free_placeholders", ())
    if sorted(names.get(n, n) for n in free_mine) != sorted(free_theirs):
        return None
    return names


def _same_op(mine: ComputeOp, theirs: ComputeOp, tensors: dict) -> bool:
    """Whether ``theirs`` computes ``mine``'s body over axes of the same extents, reading
    tensors as ``tensors`` maps them (theirs -> mine; extended with the reads it meets)."""
    if mine.output(0).shape != theirs.output(0).shape or mine.output(0).dtype != theirs.output(0).dtype:
        return False
    variables = {t.var: m.var for t, m in zip(theirs.axis, mine.axis)}
    return _same_expr(mine.body, theirs.body, variables, tensors)


def same_dag(mine: Tensor, theirs: Tensor) -> bool:
    """Whether ``theirs`` is computed as ``mine`` is, stage by stage, from the same
    placeholders (up to the names of stages and variables)."""
    tensors: dict = {theirs: mine}  # theirs -> mine, extended by each comparison
    done = 0
    while done < len(tensors):  # dicts keep insertion order: compare the pairs in the order found
        t, m = list(tensors.items())[done]
        done += 1
        if t is not m and not (isinstance(t.op, ComputeOp) and isinstance(m.op, ComputeOp)
                               and _same_op(m.op, t.op, tensors)):
            return False
    return True


def _same_expr(a, b, variables: dict, tensors: dict) -> bool:
    """``structural_equal`` up to a renaming of variables and tensors (b's -> a's)."""
    if type(a) is not type(b) or a.dtype != b.dtype:
        return False
    if isinstance(a, Var):
        return variables.get(b) is a
    if isinstance(a, Const):
        return a.value == b.value
    for attr in ("op", "func", "combiner"):
        if getattr(a, attr, None) != getattr(b, attr, None):
            return False
    if isinstance(a, TensorRead) and tensors.setdefault(b.tensor, a.tensor) is not a.tensor:
        return False
    if isinstance(a, Reduce):
        if len(a.axes) != len(b.axes) or any((x.start, x.extent) != (y.start, y.extent) for x, y in zip(a.axes, b.axes)):
            return False
        variables.update({y.var: x.var for x, y in zip(a.axes, b.axes)})
    ca, cb = a.children(), b.children()
    return len(ca) == len(cb) and all(_same_expr(x, y, variables, tensors) for x, y in zip(ca, cb))


def combines_online(op) -> bool:
    """Whether ``op`` reduces with ``te.softmax_sum``: it combines partial results (a key
    block's sums in FlashAttention) one step of its reduction at a time, so the stages that
    produce them can be computed inside that loop, one block per step."""
    return isinstance(op, ComputeOp) and isinstance(op.body, Reduce) and op.body.combiner == "softmax_sum"


def _find_hosts(sketch: Sketch, ops: list, inline_ops: set, out_ops: set) -> None:
    """Give each non-output simple stage, and each multi-level one without a fused owner,
    the one stage all its results flow into (through stored stages, stopping at a stage
    that ``combines_online``) when that stage can host it: a simple element-wise stage,
    or a multi-level one without a fused owner."""
    readers = {op: _effective_readers(op, ops, inline_ops) for op in ops if op not in inline_ops}
    plan_of = {p.op: p for p in sketch.plans}

    def sinks(op, seen=()) -> set:  # a combine of blocks hosts what flows into it
        if op in out_ops or not readers[op] or (seen and combines_online(op)):
            return {op}
        return set().union(*(sinks(r, seen + (op,)) for r in readers[op] if r not in seen))

    def tiles_on_its_own(plan: StagePlan) -> bool:  # simple, or multi-level with its own tile loops
        return plan.role == SIMPLE or (plan.role == MULTI_LEVEL and plan.owner is None)

    for plan in sketch.plans:
        if not tiles_on_its_own(plan) or plan.op in out_ops or not readers.get(plan.op):
            continue
        (sink, *others) = sinks(plan.op)
        host = plan_of[sink]
        if not others and tiles_on_its_own(host) and not (host.role == SIMPLE and sink.is_reduction):
            plan.host = sink
            plan.readers = tuple(readers[plan.op])
