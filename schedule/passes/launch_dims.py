"""gridDim / blockDim of each kernel, read off its thread-bound loops."""
from __future__ import annotations

import dataclasses

from .. import ir
from ..ir import For, Stmt
from .base import PassContext, StmtVisitor, lowering_pass
from .gpu_program import VTHREAD, GPUError, GPUProgram


class _Launch(StmtVisitor):
    def __init__(self):
        super().__init__()
        self.launch: dict = {}

    def visit_For(self, s: For) -> None:
        if s.kind == ir.THREAD_BINDING and s.thread_tag != VTHREAD:
            n = ir.const_int(s.extent)
            if n is None:
                raise GPUError(f"loop {s.var.name!r} bound to {s.thread_tag} needs a constant extent")
            self.launch[s.thread_tag] = max(self.launch.get(s.thread_tag, 1), n)
        super().visit_For(s)


def launch_dims(s: Stmt) -> dict:
    """Tag -> the largest extent of the loops bound to it (gridDim / blockDim)."""
    visitor = _Launch()
    visitor.visit(s)
    return visitor.launch


@lowering_pass("launch_dims")
def launch_dims_pass(program: GPUProgram, ctx: PassContext) -> GPUProgram:
    """A launch needs one grid and block shape: the largest extent bound to each tag."""
    return program.map_kernels(lambda k: dataclasses.replace(k, launch=launch_dims(k.body)))
