"""Checks of a finished kernel: thread loops fit their enclosing ones, barriers are reached by all."""
from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

from .. import ir
from ..ir import Barrier, For, IfThenElse
from .base import PassContext, StmtVisitor, lowering_pass
from .gpu_program import THREAD_TAGS, VTHREAD, GPUError, GPUKernel, GPUProgram
from .ir_tools import expr_uses


class _KernelVerifier(StmtVisitor):
    """``self.divergent`` names the innermost control flow not every thread of a block takes."""

    def __init__(self, kernel: GPUKernel):
        super().__init__()
        self.kernel = kernel
        self.divergent: str | None = None

    @contextmanager
    def _diverging(self, why: str | None) -> Iterator[None]:
        saved = self.divergent
        if self.divergent is None:
            self.divergent = why
        try:
            yield
        finally:
            self.divergent = saved

    def _thread_vars(self) -> set:
        return {loop.var for loop in self.loops if loop.kind == ir.THREAD_BINDING and loop.thread_tag in THREAD_TAGS}

    def _enclosing_extent(self, tag: str) -> int | None:
        """Extent of the innermost enclosing loop bound to ``tag``."""
        for loop in reversed(self.loops):
            if loop.kind == ir.THREAD_BINDING and loop.thread_tag == tag:
                return ir.const_int(loop.extent)
        return None

    def visit_Barrier(self, s: Barrier) -> None:
        if self.divergent is not None:
            raise GPUError(
                f"kernel {self.kernel.name!r}: a barrier (__syncthreads) sits under {self.divergent}, which not "
                f"every thread of the block takes; bind fewer threads there or make the loop extents match"
            )

    def visit_For(self, s: For) -> None:
        name = self.kernel.name
        tag = s.thread_tag if s.kind == ir.THREAD_BINDING else None
        if tag == VTHREAD:
            raise GPUError(f"kernel {name!r}: vthread loop {s.var.name!r} survived injection")
        if s.kind == ir.PARALLEL:
            raise GPUError(
                f"kernel {name!r}: loop {s.var.name!r} is marked parallel; on cuda bind it to "
                f"blockIdx/threadIdx instead"
            )
        why = None
        if tag is None:
            if expr_uses(s.extent, self._thread_vars()):
                why = f"loop {s.var.name!r} whose extent depends on the thread index"
        else:
            n = ir.const_int(s.extent)
            outer = self._enclosing_extent(tag)
            if outer is not None and n > outer:
                raise GPUError(
                    f"kernel {name!r}: loop {s.var.name!r} binds {n} values of {tag} inside a loop that "
                    f"binds only {outer}; the extra iterations would never run"
                )
            launched = self.kernel.launch.get(tag)
            if tag in THREAD_TAGS and n < launched:
                why = f"loop {s.var.name!r} ({tag} < {n} of {launched})"
        with self._diverging(why):
            super().visit_For(s)

    def visit_IfThenElse(self, s: IfThenElse) -> None:
        why = None
        if self.divergent is None and expr_uses(s.condition, self._thread_vars()):
            why = "a condition that depends on the thread index"
        with self._diverging(why):
            super().visit_IfThenElse(s)


def verify_kernel(kernel: GPUKernel) -> None:
    """Raise GPUError unless thread loops fit and every barrier is reached by all threads."""
    _KernelVerifier(kernel).visit(kernel.body)


@lowering_pass("verify_kernel")
def verify_kernel_pass(program: GPUProgram, ctx: PassContext) -> GPUProgram:
    """A barrier some threads skip hangs the block; catch it (and stray loop kinds) here."""
    for kernel in program.kernels:
        verify_kernel(kernel)
    return program
