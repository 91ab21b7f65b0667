"""Virtual threads: a ``vthread`` loop pushed down to the statements that use it.

    for v in range(2) (vthread):            allocate acc[2, 4] local
      allocate acc[4] local                  A.shared[...] = ...          (once for all v)
      A.shared[...] = ...           ->       for v in range(2) (unrolled):
      acc[j] += A.shared[v*4 + j]...            acc[v, j] += A.shared[v*4 + j]...

The loop becomes small unrolled loops around the statements that read its variable,
local buffers under it get a leading vthread dimension, and what does not use it (the
shared-memory fetch) runs once for every virtual thread. Where that cannot be done
(a barrier or a shared store would end up under the unrolled loop, or every virtual
thread would write the same element) the loop stays a plain serial loop: correct,
only without the reuse.
"""
from __future__ import annotations

from te.expr import Var

from .. import ir
from ..ir import Allocate, Barrier, BufferStore, For, IfThenElse, Stmt
from ..simplify import Analyzer
from .base import PassContext, StmtMutator, lowering_pass
from .gpu_program import VTHREAD, GPUError, GPUProgram
from .ir_tools import contains, expand, expr_uses, retarget, subst_stmt, uses


class _CannotInject(Exception):
    """The vthread loop stays a serial loop (correct, only without the reuse)."""


class _PushDown(StmtMutator):
    """``for v in range(n): body`` with the iterations independent, pushed into ``body``."""

    def __init__(self, var: Var, n: int):
        super().__init__()
        self.var, self.n = var, n

    def wrap(self, s: Stmt) -> Stmt:
        if contains(s, Barrier) or any(isinstance(x, BufferStore) and x.buffer.scope == "shared" for x in ir.walk(s)):
            raise _CannotInject
        return For(self.var, ir.Const(self.n), ir.UNROLLED, s)

    def visit(self, s: Stmt) -> Stmt:
        if not uses(s, {self.var}):
            return s  # the same for every virtual thread: run it once
        return super().visit(s)

    def visit_Allocate(self, s: Allocate) -> Stmt:
        if s.buffer.scope == "shared":
            return Allocate(s.buffer, self.visit(s.body))
        new = expand(s.buffer, self.n)
        return Allocate(new, self.visit(retarget(s.body, s.buffer, new, (self.var,))))

    def visit_For(self, s: For) -> Stmt:
        if expr_uses(s.extent, {self.var}):
            return self.wrap(s)
        return super().visit_For(s)

    def visit_IfThenElse(self, s: IfThenElse) -> Stmt:
        if expr_uses(s.condition, {self.var}):
            return self.wrap(s)
        return super().visit_IfThenElse(s)

    def visit_BufferStore(self, s: BufferStore) -> Stmt:
        if not any(expr_uses(i, {self.var}) for i in s.indices):
            raise _CannotInject  # every virtual thread would write the same element
        return self.wrap(s)


class _Inject(StmtMutator):
    """Every vthread loop replaced, innermost first."""

    def __init__(self, analyzer: Analyzer):
        super().__init__()
        self.an = analyzer

    def visit_For(self, s: For) -> Stmt:
        loop = super().visit_For(s)
        if loop.thread_tag != VTHREAD:
            return loop
        n = ir.const_int(loop.extent)
        if n is None:
            raise GPUError(f"vthread loop {loop.var.name!r} needs a constant extent")
        if n == 1:
            return subst_stmt(loop.body, {loop.var: 0}, simplify=True, analyzer=self.an)
        try:
            return _PushDown(loop.var, n).visit(loop.body)
        except _CannotInject:
            return For(loop.var, loop.extent, ir.SERIAL, loop.body)


def inject_virtual_threads(s: Stmt, analyzer: Analyzer | None = None) -> Stmt:
    """Replace every vthread loop (innermost first); see the module docstring."""
    return _Inject(analyzer or Analyzer()).visit(s)


@lowering_pass("inject_virtual_threads")
def inject_virtual_threads_pass(program: GPUProgram, ctx: PassContext) -> GPUProgram:
    """Virtual threads share one fetch of shared memory and keep their own accumulators."""
    return program.map_bodies(lambda body: inject_virtual_threads(body, ctx.analyzer))
