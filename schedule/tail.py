"""Turning tail guards into loop bounds.

A split whose factor does not divide the extent guards the body:

    for i.inner in range(8):                      for i.inner in range(min(8, 13 - i.outer*8)):
      if i.outer*8 + i.inner < 13:          ->      C[...] = ...
        C[...] = ...

When every statement under a loop carries the same guard ``rest + v < E`` (``v`` the
loop's variable with coefficient 1, ``rest`` made of variables of enclosing loops), the
guard becomes the loop's bound: the body is branch-free again, so the inner loop still
vectorizes and unrolls, and the tail iterations are simply not run.
"""
from __future__ import annotations

from te.expr import Binary, Compare, Const, Expr, Logical, free_vars

from . import ir
from .ir import Allocate, For, IfThenElse, Stmt
from .simplify import linearize, simplify, structural_key


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


def _bound_for(loop: For, cond: Expr, outer: set) -> Expr | None:
    """The extent that replaces ``cond`` for ``loop``, if ``cond`` is ``rest + var < E``."""
    if not (isinstance(cond, Compare) and cond.op == "lt" and isinstance(cond.b, Const)):
        return None
    lin = linearize(cond.a)
    key = structural_key(loop.var)
    if lin.terms.get(key, (None, 0))[1] != 1:
        return None
    rest_terms = {k: tv for k, tv in lin.terms.items() if k != key}
    for term, _ in rest_terms.values():
        if not free_vars(term) <= outer:
            return None
    from .simplify import Linear

    rest = Linear(rest_terms, lin.const).to_expr()
    return Binary("min", loop.extent, Binary("sub", cond.b, rest, "int32"), "int32")


def _drop(s: Stmt, key) -> Stmt:
    """``s`` with the guard term of structural ``key`` removed from every guard."""
    def fstmt(node):
        if isinstance(node, IfThenElse) and node.else_case is None:
            kept = [c for c in _conjuncts(node.condition) if structural_key(c) != key]
            if len(kept) == len(_conjuncts(node.condition)):
                return None
            cond = _join(kept)
            return node.then_case if cond is None else IfThenElse(cond, node.then_case)
        return None

    return ir.map_stmt(s, fstmt)


def guards_to_bounds(s: Stmt, outer: frozenset = frozenset()) -> Stmt:
    """Apply the rewrite everywhere in ``s`` (outer loops first)."""
    if isinstance(s, For) and s.kind != ir.THREAD_BINDING:
        body = s.body
        extent = s.extent
        leaves = _leaves(body)
        if leaves and all(isinstance(x, IfThenElse) and x.else_case is None for x in leaves):
            first = _conjuncts(leaves[0].condition)
            for cond in first:
                key = structural_key(cond)
                if not all(any(structural_key(c) == key for c in _conjuncts(x.condition)) for x in leaves[1:]):
                    continue
                bound = _bound_for(For(s.var, extent, s.kind, body), cond, set(outer))
                if bound is not None:
                    extent = simplify(bound)
                    body = _drop(body, key)
                    break
        return For(s.var, extent, s.kind, guards_to_bounds(body, outer | {s.var}), s.thread_tag)
    if isinstance(s, For):
        return For(s.var, s.extent, s.kind, guards_to_bounds(s.body, outer | {s.var}), s.thread_tag)
    if isinstance(s, ir.Seq):
        return ir.seq(*[guards_to_bounds(x, outer) for x in s.stmts])
    if isinstance(s, Allocate):
        return Allocate(s.buffer, guards_to_bounds(s.body, outer))
    if isinstance(s, IfThenElse):
        return IfThenElse(s.condition, guards_to_bounds(s.then_case, outer),
                          None if s.else_case is None else guards_to_bounds(s.else_case, outer))
    return s
