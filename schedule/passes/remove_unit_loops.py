"""Loops of one iteration removed: their variable is 0 in the body."""
from __future__ import annotations

import dataclasses

from te.expr import Const, Expr

from .. import ir
from ..ir import For, LoweredFunc, Stmt
from ..simplify import Analyzer
from .base import PassContext, StmtMutator, lowering_pass


class _RemoveUnitLoops(StmtMutator):
    """One walk: the variables of the unit loops around a statement are 0 in its expressions,
    which are simplified again where a 0 reached them (``0 * 8 + j`` -> ``j``): later passes
    compare indices structurally and re-simplify only what bounds can change."""

    def __init__(self, analyzer: Analyzer):
        super().__init__()
        self.an = analyzer
        self.zeros: dict = {}  # variable of an enclosing unit loop -> Const(0)

    def visit_expr(self, e: Expr) -> Expr:
        return self.an.substitute(e, self.zeros) if self.zeros else e

    def visit_For(self, s: For) -> Stmt:
        if ir.const_int(s.extent) == 1 and s.kind != ir.THREAD_BINDING:
            self.zeros[s.var] = Const(0, s.var.dtype)
            try:
                return self.visit(s.body)
            finally:
                del self.zeros[s.var]
        return super().visit_For(s)


def remove_unit_loops(s: Stmt, analyzer: Analyzer | None = None) -> Stmt:
    """``s`` with every non-thread loop of extent 1 replaced by its body (its variable as 0)."""
    return _RemoveUnitLoops(analyzer or Analyzer()).visit(s)


@lowering_pass("remove_unit_loops")
def remove_unit_loops_pass(func: LoweredFunc, ctx: PassContext) -> LoweredFunc:
    """A loop of one iteration is no loop: with its variable 0 the indices stay plain."""
    body = remove_unit_loops(func.body, ctx.analyzer)
    return func if body is func.body else dataclasses.replace(func, body=body)
