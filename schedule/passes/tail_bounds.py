"""Tail guards turned into loop bounds.

A split whose factor does not divide the extent guards the body:

    for i.inner in range(8):                      for i.inner in range(min(8, 13 - i.outer*8)):
      if i.outer*8 + i.inner < 13:          ->      C[...] = ...
        C[...] = ...

When every statement under a loop carries the same guard ``rest + v < E`` (``v`` the
loop's variable with coefficient 1, ``rest`` made of variables of enclosing loops), the
guard becomes the loop's bound: the body is branch-free again, so the inner loop still
vectorizes and unrolls, and the tail iterations are simply not run. Thread-bound loops
keep their guards (their extent is the launch shape).
"""
from __future__ import annotations

import dataclasses

from te.expr import Binary, Compare, Const, Expr, Logical, free_vars

from .. import ir
from ..ir import Allocate, For, IfThenElse, LoweredFunc, Stmt
from ..simplify import Analyzer, Linear
from .base import PassContext, StmtMutator, lowering_pass


def _conjuncts(cond: Expr) -> list[Expr]:
    if isinstance(cond, Logical) and cond.op == "and":
        return _conjuncts(cond.a) + _conjuncts(cond.b)
    return [cond]


def _join(conds: list[Expr]) -> Expr | None:
    out = None
    for c in conds:
        out = c if out is None else Logical("and", out, c)
    return out


def _leaves(s: Stmt) -> list[Stmt] | None:
    """Statements under ``s`` through loops and sequences; None if an allocation intervenes."""
    if isinstance(s, For):
        return _leaves(s.body)
    if isinstance(s, ir.Seq):
        out = []
        for x in s.stmts:
            sub = _leaves(x)
            if sub is None:
                return None
            out += sub
        return out
    if isinstance(s, Allocate):
        return None
    return [s]


class _DropGuard(StmtMutator):
    """The guard term of one structural key removed from every guard (children first)."""

    def __init__(self, analyzer: Analyzer, key):
        super().__init__()
        self.an, self.key = analyzer, key

    def visit_IfThenElse(self, s: IfThenElse) -> Stmt:
        node = super().visit_IfThenElse(s)
        if not isinstance(node, IfThenElse) or node.else_case is not None:
            return node
        terms = _conjuncts(node.condition)
        kept = [c for c in terms if self.an.structural_key(c) != self.key]
        if len(kept) == len(terms):
            return node
        cond = _join(kept)
        return node.then_case if cond is None else IfThenElse(cond, node.then_case)


class _TailBounds(StmtMutator):
    """Outer loops first; ``self.loops`` are the loops whose variables a bound may use."""

    def __init__(self, analyzer: Analyzer):
        super().__init__()
        self.an = analyzer

    def visit_For(self, s: For) -> Stmt:
        if s.kind != ir.THREAD_BINDING:
            s = self._guard_to_bound(s)
        return super().visit_For(s)

    def _guard_to_bound(self, loop: For) -> For:
        leaves = _leaves(loop.body)
        if not leaves or not all(isinstance(x, IfThenElse) and x.else_case is None for x in leaves):
            return loop
        key_of = self.an.structural_key
        for cond in _conjuncts(leaves[0].condition):
            key = key_of(cond)
            if not all(any(key_of(c) == key for c in _conjuncts(x.condition)) for x in leaves[1:]):
                continue
            bound = self._bound_for(loop, cond)
            if bound is not None:
                body = _DropGuard(self.an, key).visit(loop.body)
                return For(loop.var, self.an.simplify(bound), loop.kind, body, loop.thread_tag)
        return loop

    def _bound_for(self, loop: For, cond: Expr) -> Expr | None:
        """The extent that replaces ``cond`` for ``loop``, if ``cond`` is ``rest + var < E``."""
        if not (isinstance(cond, Compare) and cond.op == "lt" and isinstance(cond.b, Const)):
            return None
        lin = self.an.linearize(cond.a)
        key = self.an.structural_key(loop.var)
        if lin.terms.get(key, (None, 0))[1] != 1:
            return None
        rest_terms = {k: tv for k, tv in lin.terms.items() if k != key}
        outer = self.loop_vars()
        for term, _ in rest_terms.values():
            if not free_vars(term) <= outer:
                return None
        rest = Linear(rest_terms, lin.const).to_expr()
        return Binary("min", loop.extent, Binary("sub", cond.b, rest, "int32"), "int32")


def guards_to_bounds(s: Stmt, analyzer: Analyzer | None = None) -> Stmt:
    """Apply the rewrite everywhere in ``s`` (outer loops first)."""
    return _TailBounds(analyzer or Analyzer()).visit(s)


@lowering_pass("tail_bounds")
def tail_bounds_pass(func: LoweredFunc, ctx: PassContext) -> LoweredFunc:
    """Branch-free inner loops still vectorize and unroll: a shared tail guard becomes the bound."""
    body = guards_to_bounds(func.body, ctx.analyzer)
    return func if body is func.body else dataclasses.replace(func, body=body)
