"""Small queries and rewrites of the loop IR that several passes (and the emulator) share."""
from __future__ import annotations

from typing import Iterator

from te.expr import Expr, Var, post_order, substitute, transform

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

    def fexpr(e: Expr) -> Expr:
        new = substitute(e, mapping)
        return new if new is e else an.simplify(new)

    return ExprMutator(fexpr).visit(s)


class _Retarget(StmtMutator):
    """Every access ``old[idx]`` as ``new[*lead, *idx]``."""

    def __init__(self, old: Buffer, new: Buffer, lead: tuple[Expr, ...]):
        super().__init__()
        self.old, self.new, self.lead = old, new, lead

    def _load(self, n: Expr):
        if isinstance(n, BufferLoad) and n.buffer is self.old:
            return BufferLoad(self.new, self.lead + n.indices, n.dtype)
        return None

    def visit_expr(self, e: Expr) -> Expr:
        return transform(e, self._load)

    def visit_BufferStore(self, s: BufferStore) -> Stmt:
        s = super().visit_BufferStore(s)
        if s.buffer is self.old:
            return BufferStore(self.new, self.lead + s.indices, s.value)
        return s


def retarget(s: Stmt, old: Buffer, new: Buffer, lead: tuple[Expr, ...]) -> Stmt:
    """``s`` with every access ``old[idx]`` turned into ``new[*lead, *idx]``."""
    return _Retarget(old, new, lead).visit(s)


def expand(buf: Buffer, n: int, name_suffix: str = "") -> Buffer:
    """``buf`` with a new leading dimension of ``n``."""
    return Buffer(buf.name + name_suffix, (n,) + tuple(buf.shape), buf.dtype, buf.scope, buf.is_arg)
