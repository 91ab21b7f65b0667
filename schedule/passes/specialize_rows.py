"""Short loops whose variable picks a branch of a select: one copy of the body per iteration.

A constant matrix written into an expression (Winograd's transforms, ``te.ops.winograd``)
is a chain of ``if_then_else(row == 0, ..., if_then_else(row == 1, ...))``, one sum per row.
Left as a loop over ``row``, the chain is evaluated for every element; inside a vectorized
loop the compiler evaluates every branch and blends them. With one copy of the body per
value of ``row`` (substituted and simplified), each copy keeps the one sum its row needs.

A loop is specialized when it is serial or unrolled, its trip count is a constant of at
most ``MAX_COPIES``, its variable is compared for equality in a select's condition, and
substituting its first value removes a select of its body (so a loop whose variable only
bounds padding, which no single value decides, is left alone).
"""
from __future__ import annotations

import dataclasses

from te.expr import Compare, Const, Select, Var, post_order

from .. import ir
from ..ir import For, LoweredFunc, Stmt
from ..simplify import Analyzer
from .base import PassContext, StmtMutator, lowering_pass
from .ir_tools import stmt_exprs, subst_stmt

#: The longest loop copied out: the transforms' rows (alpha = 6 for F(4, 3)).
MAX_COPIES = 8


def _selects(s: Stmt) -> int:
    return sum(isinstance(n, Select) for e in stmt_exprs(s) for n in post_order(e))


def row_variables(exprs) -> set:
    """Variables compared for equality in the condition of some select of ``exprs``: what
    picks a row of a constant matrix (``te.ops.winograd``)."""
    return {v for e in exprs for n in post_order(e) if isinstance(n, Select)
            for c in post_order(n.cond) if isinstance(c, Compare) and c.op == "eq"
            for v in post_order(c) if isinstance(v, Var)}


class _SpecializeRows(StmtMutator):
    def __init__(self, analyzer: Analyzer, candidates: set):
        super().__init__()
        self.an = analyzer
        self.candidates = candidates

    def visit_For(self, s: For) -> Stmt:
        trips = ir.const_int(s.extent)
        if (s.var in self.candidates and s.kind in (ir.SERIAL, ir.UNROLLED)
                and trips is not None and 1 < trips <= MAX_COPIES):
            before = _selects(s.body)
            if before:
                first = subst_stmt(s.body, {s.var: Const(0)}, simplify=True, analyzer=self.an)
                if _selects(first) < before:
                    copies = [first] + [subst_stmt(s.body, {s.var: Const(v)}, simplify=True, analyzer=self.an)
                                        for v in range(1, trips)]
                    return ir.seq(*(self.visit(c) for c in copies))
        return super().visit_For(s)


def specialize_rows(s: Stmt, analyzer: Analyzer | None = None) -> Stmt:
    """``s`` with every short loop whose variable decides a select copied out per iteration."""
    candidates = row_variables(stmt_exprs(s))
    return _SpecializeRows(analyzer or Analyzer(), candidates).visit(s) if candidates else s


@lowering_pass("specialize_rows")
def specialize_rows_pass(func: LoweredFunc, ctx: PassContext) -> LoweredFunc:
    """A row of a constant matrix is chosen once per copy of the loop, not per element."""
    body = specialize_rows(func.body, ctx.analyzer)
    return func if body is func.body else dataclasses.replace(func, body=body)
