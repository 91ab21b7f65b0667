"""Index arithmetic simplified under the ranges of the enclosing loops.

Every expression is re-simplified knowing each enclosing loop's variable lies in
``[0, extent)``: the div/mod that ``split`` and ``fuse`` introduce cancel, and guards
whose outcome the ranges decide (splits that divide their extent) disappear.
"""
from __future__ import annotations

import dataclasses

from te.expr import Const, Expr, Logical

from .. import ir
from ..ir import For, IfThenElse, LoweredFunc, Stmt
from ..simplify import Analyzer, Bounds, interval
from .base import Loop, PassContext, StmtMutator, lowering_pass


class _SimplifyBounds(StmtMutator):
    """``self.bounds``: inclusive range of each enclosing loop variable with a known extent."""

    def __init__(self, analyzer: Analyzer):
        super().__init__()
        self.an = analyzer
        self.bounds: Bounds = {}

    def visit_expr(self, e: Expr) -> Expr:
        return self.an.simplify_under(e, self.bounds)

    def visit_For(self, s: For) -> Stmt:
        outer = self.bounds
        extent = self.an.simplify(s.extent, outer)
        r = interval(extent, outer)
        if r is not None:
            self.bounds = {**outer, s.var: (0, r[1] - 1)}
        try:
            with self.in_loop(Loop.of(s, extent)):
                body = self.visit(s.body)
        finally:
            self.bounds = outer
        if extent is s.extent and body is s.body:
            return s
        return For(s.var, extent, s.kind, body, s.thread_tag)

    def visit_IfThenElse(self, s: IfThenElse) -> Stmt:
        cond = self._guard(s.condition)
        if isinstance(cond, Const):
            chosen = s.then_case if cond.value else s.else_case
            return self.visit(chosen) if chosen is not None else ir.seq()
        then = self.visit(s.then_case)
        other = None if s.else_case is None else self.visit(s.else_case)
        if cond is s.condition and then is s.then_case and other is s.else_case:
            return s
        return IfThenElse(cond, then, other)

    def _guard(self, cond: Expr) -> Expr:
        """Simplify a conjunction term by term so provable parts drop out."""
        if isinstance(cond, Logical) and cond.op == "and":
            a, b = self._guard(cond.a), self._guard(cond.b)
            return self.an.simplify(Logical("and", a, b), self.bounds)
        return self.an.simplify(cond, self.bounds)


def simplify_bounds(s: Stmt, analyzer: Analyzer | None = None) -> Stmt:
    """``s`` with every expression simplified under its loops' ranges and decided guards dropped."""
    return _SimplifyBounds(analyzer or Analyzer()).visit(s)


@lowering_pass("simplify_bounds")
def simplify_bounds_pass(func: LoweredFunc, ctx: PassContext) -> LoweredFunc:
    """Loop ranges decide tail guards of dividing splits and undo the div/mod of split and fuse."""
    return dataclasses.replace(func, body=simplify_bounds(func.body, ctx.analyzer))
