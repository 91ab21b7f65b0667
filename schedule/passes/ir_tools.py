"""Small queries and rewrites of the loop IR that several passes (and the emulator) share."""
from __future__ import annotations

from typing import Iterator

from te.expr import Expr, Var, as_expr, post_order, substitute, transform

from .. import ir
from ..ir import Buffer, BufferLoad, BufferStore, For, IfThenElse, Stmt
from ..simplify import Analyzer
from .base import ExprMutator, StmtMutator


def stmt_exprs(s: Stmt) -> Iterator[Expr]:
    """Every expression of ``s`` (extents, conditions, indices, values), outermost first."""
    for node in ir.walk(s):
        if isinstance(node, For):
            yield node.extent
        elif isinstance(node, IfThenElse):
            yield node.condition
        elif isinstance(node, BufferStore):
            yield from node.indices
            yield node.value


def expr_uses(e: Expr, names: set) -> bool:
    """Whether ``e`` reads any variable of ``names``."""
    return any(isinstance(n, Var) and n in names for n in post_order(e))


def uses(s: Stmt, names: set) -> bool:
    """Whether any expression of ``s`` reads a variable of ``names``."""
    return any(expr_uses(e, names) for e in stmt_exprs(s))


def contains(s: Stmt, kind) -> bool:
    """Whether ``s`` holds a statement of type ``kind`` (itself included)."""
    return any(isinstance(n, kind) for n in ir.walk(s))


def subst_stmt(s: Stmt, mapping: dict, simplify: bool = False, analyzer: Analyzer | None = None) -> Stmt:
    """``s`` with variables replaced in every expression (and the changed ones simplified)."""
    if not simplify:
        return ExprMutator(lambda e: substitute(e, mapping)).visit(s)
    an = analyzer or Analyzer()
    table = {v: as_expr(e, v.dtype) for v, e in mapping.items()}
    return ExprMutator(lambda e: an.substitute(e, table)).visit(s)


class RemapAccesses(StmtMutator):
    """Every access of a buffer that ``remap`` answers for, ``buf[idx]``, as
    ``new[indices(idx)]`` for ``remap(buf) == (new, indices)`` (None: left as it is)."""

    def __init__(self, remap):
        super().__init__()
        self.remap = remap

    def _load(self, n: Expr):
        if isinstance(n, BufferLoad):
            to = self.remap(n.buffer)
            if to is not None:
                return BufferLoad(to[0], to[1](n.indices), n.dtype)
        return None

    def visit_expr(self, e: Expr) -> Expr:
        return transform(e, self._load)

    def visit_BufferStore(self, s: BufferStore) -> Stmt:
        s = super().visit_BufferStore(s)
        to = self.remap(s.buffer)
        return s if to is None else BufferStore(to[0], to[1](s.indices), s.value)


def retarget(s: Stmt, old: Buffer, new: Buffer, lead: tuple[Expr, ...]) -> Stmt:
    """``s`` with every access ``old[idx]`` turned into ``new[*lead, *idx]``."""
    return RemapAccesses(lambda buf: (new, lambda idx: lead + tuple(idx)) if buf is old else None).visit(s)


def expand(buf: Buffer, n: int, name_suffix: str = "") -> Buffer:
    """``buf`` with a new leading dimension of ``n``."""
    return Buffer(buf.name + name_suffix, (n,) + tuple(buf.shape), buf.dtype, buf.scope, buf.is_arg,
                  buf.in_registers)
