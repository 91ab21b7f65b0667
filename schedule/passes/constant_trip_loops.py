"""Constant trip counts for every non-thread loop of a kernel.

A tail loop ``for v in range(min(c, rest))`` becomes ``for v in range(c): if v < rest``
and loops of extent 1 disappear, so every unrolled loop has a constant trip count
(NVVM otherwise unrolls runtime-bounded loops into remainder code and takes minutes).
Thread-bound loops stay as they are.
"""
from __future__ import annotations

from te.expr import Const

from .. import ir
from ..ir import For, IfThenElse, Stmt
from ..simplify import Analyzer
from .base import PassContext, StmtMutator, lowering_pass
from .gpu_program import GPUProgram
from .ir_tools import subst_stmt


class _ConstantTrips(StmtMutator):
    """Bottom-up: a loop's body is rewritten before the loop itself."""

    def __init__(self, analyzer: Analyzer):
        super().__init__()
        self.an = analyzer

    def visit_For(self, s: For) -> Stmt:
        node = super().visit_For(s)
        if node.kind == ir.THREAD_BINDING:
            return node
        n = ir.const_int(node.extent)
        tail = ir.tail_bound(node.extent) if n is None else None
        if tail is not None:
            n, rest = tail
            body = IfThenElse(self.an.simplify(node.var < rest), node.body)
            node = For(node.var, Const(n), node.kind, body, node.thread_tag)
        if n == 1:
            return self._drop_unit_guard(subst_stmt(node.body, {node.var: 0}, simplify=True, analyzer=self.an))
        return node

    def _drop_unit_guard(self, s: Stmt) -> Stmt:
        """A guard that became a constant after substitution goes away (or takes its branch)."""
        if not isinstance(s, IfThenElse):
            return s
        cond = self.an.simplify(s.condition)
        c = cond.value if isinstance(cond, Const) else None
        if c is True:
            return s.then_case
        if c is False:
            return s.else_case if s.else_case is not None else ir.seq()
        return IfThenElse(cond, s.then_case, s.else_case)


def constant_trip_loops(s: Stmt, analyzer: Analyzer | None = None) -> Stmt:
    """Tail bounds back into guards, unit loops removed (thread-bound loops untouched)."""
    return _ConstantTrips(analyzer or Analyzer()).visit(s)


@lowering_pass("constant_trip_loops")
def constant_trip_loops_pass(program: GPUProgram, ctx: PassContext) -> GPUProgram:
    """NVVM unrolls only constant-trip loops quickly: tail bounds become guards again."""
    return program.map_bodies(lambda body: constant_trip_loops(body, ctx.analyzer))
