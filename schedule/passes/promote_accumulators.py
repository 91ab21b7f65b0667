"""Register promotion: accumulate a small output tile in a local buffer across reduce loops.

    for k_inner in range(256):                 allocate acc[8, 32] local
      for i in range(8) (unrolled):            for i, j: acc[i, j] = C.local[s2*8 + i, j]
        for j in range(32) (vectorized):  ->   for k_inner in range(256):
          C.local[s2*8 + i, j] += A * B          for i, j: acc[i, j] += A * B
                                               for i, j: C.local[s2*8 + i, j] = acc[i, j]

When an accumulation ``buf[idx] = buf[idx] (op) value`` sits under reduce loops whose
variables ``idx`` does not use, inside a small tile of constant-extent loops that
``idx`` does use (each tile variable alone in one index dimension, so tile points map
to distinct elements), the tile is loaded once before the reduce loops and stored once
after. The compiler then keeps the small, fully indexed ``acc`` in registers, which it
does not do for a tile of a large buffer.

A tile that does not divide its extent has tail loops ``range(min(8, rest))``: a
variable trip count, which the compiler neither unrolls nor keeps in registers. Such a
tile is versioned: a full tile (every ``rest`` at least its factor, the common case)
runs a copy with constant extents, and only the tail tiles run the variable one.

    if 8 <= rest_i and 32 <= rest_j:   allocate acc[8, 32] ... (constant loops)
    else:                              allocate acc[8, 32] ... (tail loops)
"""
from __future__ import annotations

import dataclasses

from te.expr import Binary, Const, Expr, free_vars, post_order

from .. import ir
from ..ir import Allocate, Buffer, BufferLoad, BufferStore, For, IfThenElse, LoweredFunc, Stmt
from ..simplify import Analyzer
from .base import PassContext, StmtMutator, lowering_pass

#: Largest tile promoted, in elements (the register file holds 32 x 16 floats).
MAX_TILE = 512
#: The name of a promoted tile: its buffer's name and this suffix (backends recognise it).
ACC_SUFFIX = ".acc"
_ACCUMULATE = ("add", "min", "max", "mul")


def _chain(s: Stmt) -> tuple[list[For], Stmt]:
    """Perfectly nested loops from ``s`` down, and the statement under them."""
    loops = []
    while isinstance(s, For):
        loops.append(s)
        s = s.body
    return loops, s


def _prod(xs) -> int:
    n = 1
    for x in xs:
        n *= x
    return n


class _Promote(StmtMutator):
    """Promotion at the outermost loop where it fits; a promoted nest is not entered again."""

    def __init__(self, analyzer: Analyzer):
        super().__init__()
        self.an = analyzer

    def visit_For(self, s: For) -> Stmt:
        if s.kind in (ir.SERIAL, ir.UNROLLED):
            promoted = self._promote(s)
            if promoted is not None:
                return promoted
        return super().visit_For(s)

    def _accumulation(self, store: Stmt) -> Expr | None:
        """The value added in ``buf[idx] = buf[idx] op value``, or None."""
        if not isinstance(store, BufferStore) or not isinstance(store.value, Binary):
            return None
        v = store.value
        if v.op not in _ACCUMULATE:
            return None
        acc = v.a
        key = self.an.structural_key
        if not (isinstance(acc, BufferLoad) and acc.buffer is store.buffer
                and all(key(x) == key(y) for x, y in zip(acc.indices, store.indices))):
            return None
        if any(isinstance(n, BufferLoad) and n.buffer is store.buffer for n in post_order(v.b)):
            return None
        return v.b

    def _tile_dims(self, store: BufferStore, tile: list[For]) -> list[int] | None:
        """For each tile loop, the index dimension it appears in alone with coefficient 1."""
        dims = []
        for loop in tile:
            found = None
            for d, idx in enumerate(store.indices):
                if loop.var in free_vars(idx):
                    term = self.an.linearize(idx).terms.get(self.an.structural_key(loop.var))
                    if term is None or term[1] != 1 or found is not None:
                        return None
                    found = d
            if found is None or found in dims:
                return None
            dims.append(found)
        return dims

    def _promote(self, loop: For) -> Stmt | None:
        loops, store = _chain(loop)
        value = self._accumulation(store)
        if value is None:
            return None
        used = set().union(*(free_vars(i) for i in store.indices))
        split = next((n for n, l in enumerate(loops) if l.var in used), None)
        if split is None or split == 0:
            return None
        reduce_loops, tile = loops[:split], loops[split:]
        if any(l.var in used for l in reduce_loops) or not all(l.var in used for l in tile):
            return None
        if any(l.kind not in (ir.SERIAL, ir.UNROLLED) for l in reduce_loops):
            return None
        if any(l.kind not in (ir.SERIAL, ir.UNROLLED, ir.VECTORIZED) for l in tile):
            return None
        extents = [ir.max_trip_count(l.extent) for l in tile]
        if any(e is None for e in extents) or _prod(extents) > MAX_TILE:
            return None
        if self._tile_dims(store, tile) is None:
            return None
        return self._versioned(_promoted(store, value, reduce_loops, tile, extents), tile)

    def _versioned(self, promoted: Stmt, tile: list[For]) -> Stmt:
        """``promoted`` as a full-tile copy with constant tile extents and the tail copy,
        chosen by whether every tail bound ``min(factor, rest)`` reaches its factor."""
        cond, tails = None, {}
        for loop in tile:
            tail = ir.tail_bound(loop.extent)
            if tail is None:
                continue
            n, rest = tail
            whole = Const(n, "int32") <= rest
            cond = whole if cond is None else cond & whole
            tails[self.an.structural_key(loop.extent)] = n
        if cond is None:
            return promoted
        cond = self.an.simplify(cond)
        decided = cond.value if isinstance(cond, Const) else None
        constant = _ConstantExtents(self.an, tails).visit(promoted)
        if decided is True:
            return constant
        tail = _RolledTails().visit(promoted)
        if decided is False:
            return tail
        return IfThenElse(cond, constant, tail)


class _RolledTails(StmtMutator):
    """Tail loops (variable trip counts) stay rolled: unrolling one only adds remainder code,
    and the tail copy runs for the last tiles alone."""

    def visit_For(self, s: For) -> Stmt:
        node = super().visit_For(s)
        if node.kind != ir.UNROLLED or ir.const_int(node.extent) is not None:
            return node
        return For(node.var, node.extent, ir.SERIAL, node.body, node.thread_tag)


class _ConstantExtents(StmtMutator):
    """Loops whose extent is one of the given tail bounds run their full factor instead."""

    def __init__(self, analyzer: Analyzer, tails: dict):
        super().__init__()
        self.an, self.tails = analyzer, tails

    def visit_For(self, s: For) -> Stmt:
        node = super().visit_For(s)
        n = self.tails.get(self.an.structural_key(node.extent))
        if n is None:
            return node
        return For(node.var, Const(n, "int32"), node.kind, node.body, node.thread_tag)


def _promoted(store: BufferStore, value: Expr, reduce_loops: list[For], tile: list[For], extents) -> Stmt:
    """Load the tile into ``acc``, accumulate there under the reduce loops, store it back."""
    acc = Buffer(f"{store.buffer.name}{ACC_SUFFIX}", tuple(extents), store.buffer.dtype, "local", in_registers=True)
    acc_idx = tuple(l.var for l in tile)
    op = store.value.op

    def nest(body: Stmt) -> Stmt:
        for l in reversed(tile):
            body = For(l.var, l.extent, l.kind, body, l.thread_tag)
        return body

    load = nest(BufferStore(acc, acc_idx, BufferLoad(store.buffer, store.indices, store.buffer.dtype)))
    update = nest(BufferStore(acc, acc_idx, Binary(op, BufferLoad(acc, acc_idx, acc.dtype), value, acc.dtype)))
    for l in reversed(reduce_loops):
        update = For(l.var, l.extent, l.kind, update, l.thread_tag)
    write_back = nest(BufferStore(store.buffer, store.indices, BufferLoad(acc, acc_idx, acc.dtype)))
    return Allocate(acc, ir.seq(load, update, write_back))


def promote_accumulators(s: Stmt, analyzer: Analyzer | None = None) -> Stmt:
    """Apply register promotion at the outermost loop where it fits, everywhere in ``s``."""
    return _Promote(analyzer or Analyzer()).visit(s)


@lowering_pass("promote_accumulators")
def promote_accumulators_pass(func: LoweredFunc, ctx: PassContext) -> LoweredFunc:
    """Compilers keep a small, fully indexed accumulator in registers, not a tile of a large buffer."""
    body = promote_accumulators(func.body, ctx.analyzer)
    return func if body is func.body else dataclasses.replace(func, body=body)
