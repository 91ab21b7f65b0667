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
runs a copy with constant extents. Where the tiles sit in blocks of whole tiles, a
partial tile always has the same size (the extent modulo the factor: 2 rows of 128 in
tiles of 6), and it runs a copy of its own with that size as a constant:

    if 8 <= rest_i:   allocate acc[8, 32] ... (constant loops)
    elif 0 < rest_i:  allocate acc[2, 32] ... (constant loops; 2 = extent % 8)

Otherwise (or with tails on more than two axes) the tail tiles share one copy with the
variable loops.
"""
from __future__ import annotations

import dataclasses

from te import dtypes
from te.expr import Binary, Const, Expr, all_of, free_vars, post_order

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
        versions = self._versioned(lambda sizes: _promoted(store, value, reduce_loops, tile, sizes), tile,
                                   extents, dtypes.nbytes(store.buffer.dtype))
        return ir.seq() if versions is None else versions  # None: no tile has anything to compute

    def _versioned(self, promote, tile: list[For], extents: list[int], nbytes: int) -> Stmt | None:
        """The promoted nest (``promote(sizes)`` makes it with a tile of ``sizes``) as a copy
        with constant extents for whole tiles, and copies for the tails, chosen by whether
        each tail bound ``min(factor, rest)`` reaches its factor (``nbytes``: per element).

        A tail whose partial count is known (``_partial_count``) gets a copy with that count
        as a constant extent: the partial tile is then as regular as the whole one, so a
        backend holds it in registers too (a rolled tail of two rows, kept in memory, cost a
        quarter of 128x4096x4096's time). Other tails, and every tail where there would be
        more than ``MAX_VERSIONS`` copies, keep the variable loops in a copy of their own."""
        tails = []
        for loop in tile:
            tail = ir.tail_bound(loop.extent)
            if tail is not None:
                n, rest = tail
                part = _partial_count(self.an, n, rest)
                if part and loop.kind == ir.VECTORIZED and part * nbytes % MIN_VECTOR_BYTES:
                    part = None  # 15 of 16 lanes: no whole vectors, a loop of remainders either way
                tails.append((self.an.structural_key(loop.extent), n, rest, part))
        if 2 ** len(tails) <= MAX_VERSIONS:
            return self._versions(promote, tile, extents, tails, {}, rolled=False)
        promoted = promote(extents)
        cond = self.an.simplify(all_of(*(Const(n, "int32") <= rest for _, n, rest, _ in tails)))
        constant = _ConstantExtents(self.an, {key: n for key, n, _, _ in tails}).visit(promoted)
        return _choose(self.an, cond, constant, _RolledTails().visit(promoted))

    def _versions(self, promote, tile: list[For], extents: list[int], tails: list, chosen: dict, rolled: bool
                  ) -> Stmt | None:
        """The copies of the promoted nest for ``tails`` under the conditions that choose
        them: for each tail, a whole tile, and a partial one of constant size (where known)
        or of variable size (``rolled``). ``chosen``: tail bound -> trip count so far. None
        where no copy runs."""
        if not tails:
            key = self.an.structural_key
            copy = promote([chosen.get(key(loop.extent), e) for loop, e in zip(tile, extents)])
            if chosen:
                copy = _ConstantExtents(self.an, chosen).visit(copy)
            return _RolledTails().visit(copy) if rolled else copy
        (bound, n, rest, part), later = tails[0], tails[1:]
        whole = self._versions(promote, tile, extents, later, {**chosen, bound: n}, rolled)
        if part is None:
            return _choose(self.an, Const(n, "int32") <= rest, whole,
                           self._versions(promote, tile, extents, later, chosen, True))
        partial = self._versions(promote, tile, extents, later, {**chosen, bound: part}, rolled) if part else None
        return _choose(self.an, Const(n, "int32") <= rest, whole,
                       _choose(self.an, Const(0, "int32") < rest, partial, None))


#: Most copies of one promoted tile that ``_versioned`` makes (the whole tile and its tails).
MAX_VERSIONS = 4
#: The narrowest vector a backend holds a tile in (SSE's 128 bits; ``backends.vector_tile``
#: prints no narrower one): a vectorized tail of constant size gets its own copy only when
#: it is a whole number of them.
MIN_VECTOR_BYTES = 16


def _partial_count(an: Analyzer, factor: int, rest: Expr) -> int | None:
    """The trip count of tail loop ``min(factor, rest)`` whenever it is partial (0 < rest <
    factor), if the same for every tile; 0 if it is never partial; None if unknown.

    ``rest`` is the extent minus the tile's offset; when every term of the offset is a
    multiple of ``factor`` (blocks of whole tiles), ``rest`` is the extent modulo
    ``factor`` plus a multiple of it, so a partial tile has ``extent % factor`` elements.
    """
    form = an.linearize(an.simplify(rest))
    if any(coeff % factor for _, coeff in form.terms.values()):
        return None
    return form.const % factor


def _choose(an: Analyzer, cond: Expr, then: Stmt | None, otherwise: Stmt | None) -> Stmt | None:
    """``if cond: then else: otherwise``, folded where ``cond`` simplifies to a constant."""
    cond = an.simplify(cond)
    if isinstance(cond, Const):
        return then if cond.value else otherwise
    if then is None:
        return None if otherwise is None else IfThenElse(an.simplify(~cond), otherwise)
    return IfThenElse(cond, then, otherwise)


class _RolledTails(StmtMutator):
    """Tail loops (variable trip counts) stay rolled: unrolling one only adds remainder code,
    and the tail copy runs for the last tiles alone. Of the unrolled loops around a tail
    loop only the innermost stays unrolled: each further level copies the tail loop, with
    all its remainder code, once more per iteration (a 31-column tail under a reduction step
    of 7 and 8 rows: 56 vectorized loops with masked remainders, 7.5 s of gcc for one build
    against 1.4 s with the step rolled), for no speed measured; the innermost level is worth
    its copies (rolling it too cost that tail-heavy kernel 8 %)."""

    def visit_For(self, s: For) -> Stmt:
        node = super().visit_For(s)
        if node.kind != ir.UNROLLED:
            return node
        if ir.const_int(node.extent) is not None and not _unrolled_around_tail_loop(node.body):
            return node
        return For(node.var, node.extent, ir.SERIAL, node.body, node.thread_tag)


def _unrolled_around_tail_loop(s: Stmt) -> bool:
    """Whether ``s`` holds an unrolled loop with a loop of variable trip count inside."""
    return any(isinstance(n, For) and n.kind == ir.UNROLLED and _holds_tail_loop(n.body) for n in ir.walk(s))


def _holds_tail_loop(s: Stmt) -> bool:
    """Whether a loop of variable trip count lies anywhere in ``s``."""
    return any(isinstance(n, For) and ir.const_int(n.extent) is None for n in ir.walk(s))


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
