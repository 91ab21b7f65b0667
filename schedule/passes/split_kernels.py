"""One kernel per top-level statement, global temporaries as workspace parameters."""
from __future__ import annotations

import re

from .. import ir
from ..ir import Allocate, Buffer, LoweredFunc
from .base import PassContext, lowering_pass
from .gpu_program import GPUError, GPUKernel, GPUProgram


def split_kernels(func: LoweredFunc) -> GPUProgram:
    """One kernel per top-level statement of ``func``; root allocations become workspace."""
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", func.name):
        raise GPUError(f"kernel name {func.name!r} is not a C identifier")
    body = func.body
    workspace: list[Buffer] = []
    while isinstance(body, Allocate):
        if body.buffer.scope != "global":
            raise GPUError(
                f"stage {body.buffer.name!r} has scope {body.buffer.scope!r} but is computed at the root; "
                f"compute_at it inside the loops of the stage that reads it"
            )
        workspace.append(body.buffer)
        body = body.body
    bodies = list(body.stmts) if isinstance(body, ir.Seq) else [body]
    kernels = tuple(GPUKernel(func.name if len(bodies) == 1 else f"{func.name}_{n}", b, {})
                    for n, b in enumerate(bodies))
    return GPUProgram(func.name, func.params, tuple(workspace), kernels)


@lowering_pass("split_kernels")
def split_kernels_pass(func: LoweredFunc, ctx: PassContext) -> GPUProgram:
    """Each root stage's loop nest becomes a kernel (a kernel cannot allocate global memory)."""
    return split_kernels(func)
