"""Loops of one iteration removed: their variable is 0 in the body."""
from __future__ import annotations

import dataclasses

from te.expr import Const

from .. import ir
from ..ir import For, LoweredFunc, Stmt
from .base import PassContext, StmtMutator, lowering_pass
from .ir_tools import subst_stmt


class _RemoveUnitLoops(StmtMutator):
    def visit_For(self, s: For) -> Stmt:
        if ir.const_int(s.extent) == 1 and s.kind != ir.THREAD_BINDING:
            return self.visit(subst_stmt(s.body, {s.var: Const(0)}))
        return super().visit_For(s)


def remove_unit_loops(s: Stmt) -> Stmt:
    """``s`` with every non-thread loop of extent 1 replaced by its body (its variable as 0)."""
    return _RemoveUnitLoops().visit(s)


@lowering_pass("remove_unit_loops")
def remove_unit_loops_pass(func: LoweredFunc, ctx: PassContext) -> LoweredFunc:
    """A loop of one iteration is no loop: with its variable 0 the indices stay plain."""
    body = remove_unit_loops(func.body)
    return func if body is func.body else dataclasses.replace(func, body=body)
