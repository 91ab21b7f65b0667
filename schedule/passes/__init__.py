"""Lowering passes over the loop IR, and the pipelines that run them in order.

``schedule.lower`` builds the loop nest of a schedule, then runs ``CPU_PIPELINE`` on it;
``lower_gpu`` runs ``GPU_PIPELINE`` on that result to make CUDA kernels. Each pass is a
visitor or mutator (``base.py``) in a module of its own; a pipeline is a plain list.

    schedule.lower(s, [A, B, C], trace=True)        # the IR after every pass
    lower_gpu(func, trace=print_section)            # the same for the GPU passes
"""
from __future__ import annotations

from typing import Callable, Union

from ..ir import LoweredFunc
from .base import Loop, Pass, PassContext, StmtMutator, StmtVisitor, lowering_pass
from .constant_trip_loops import constant_trip_loops, constant_trip_loops_pass
from .gpu_program import BLOCK_TAGS, THREAD_TAGS, VTHREAD, GPUError, GPUKernel, GPULimits, GPUProgram
from .insert_barriers import insert_barriers, insert_barriers_pass, missing_barriers
from .launch_dims import launch_dims, launch_dims_pass
from .promote_accumulators import promote_accumulators, promote_accumulators_pass
from .remove_unit_loops import remove_unit_loops, remove_unit_loops_pass
from .share_storage import share_storage, share_storage_pass
from .simplify_bounds import simplify_bounds, simplify_bounds_pass
from .specialize_rows import specialize_rows, specialize_rows_pass
from .split_kernels import split_kernels, split_kernels_pass
from .tail_bounds import guards_to_bounds, tail_bounds_pass
from .verify import IRVerifyError, verify, verify_pass
from .verify_kernel import verify_kernel, verify_kernel_pass
from .virtual_threads import inject_virtual_threads, inject_virtual_threads_pass

# The loop nest of a schedule -> the LoweredFunc that CPU code generation (and the GPU passes) take.
CPU_PIPELINE: list[Pass] = [
    remove_unit_loops_pass,     # a loop of one iteration is no loop: its variable becomes 0
    simplify_bounds_pass,       # loop ranges undo split/fuse div-mod and drop guards they decide
    specialize_rows_pass,       # a short loop choosing a select's branch: one copy per iteration
    tail_bounds_pass,           # a tail guard shared by a loop's body becomes its bound (branch-free)
    promote_accumulators_pass,  # a small accumulator tile stays in registers across reduce loops
    share_storage_pass,         # buffers of disjoint lifetimes share memory (root, and per loop)
    verify_pass,                # a broken invariant fails here, not as wrong code at run time
]

# A LoweredFunc -> a GPUProgram of CUDA kernels (backends.cuda prints it, backends.emulator runs it).
GPU_PIPELINE: list[Pass] = [
    split_kernels_pass,           # one kernel per root stage; global temporaries become workspace
    constant_trip_loops_pass,     # tail bounds back into guards: NVVM unrolls constant trips only
    inject_virtual_threads_pass,  # vthreads share one shared-memory fetch, keep their own accumulators
    insert_barriers_pass,         # __syncthreads where shared memory is read after write and reused
    launch_dims_pass,             # grid and block shape from the thread-bound loops
    verify_kernel_pass,           # thread loops fit the launch; every barrier is reached by all threads
]

#: Whole pipelines by name, from the loop nest as built to what code generation takes.
_PIPELINES = {"cpu": CPU_PIPELINE, "gpu": CPU_PIPELINE + GPU_PIPELINE}

#: ``trace=True`` prints each section; a callable receives ``(pass_name, ir_text)``.
Trace = Union[bool, Callable[[str, str], None], None]


def pipeline(name: str) -> list[Pass]:
    """The passes of pipeline ``name``, in order (a copy: edit it freely): "cpu" is
    ``CPU_PIPELINE`` (a ``LoweredFunc``), "gpu" is ``CPU_PIPELINE`` then ``GPU_PIPELINE``
    (a ``GPUProgram``)."""
    try:
        return list(_PIPELINES[name])
    except KeyError:
        raise ValueError(f"unknown pipeline {name!r}; use one of {', '.join(_PIPELINES)}") from None


def print_section(pass_name: str, ir_text: str) -> None:
    """The default trace: a header line with the pass name, then the IR."""
    print(f"# ---- after {pass_name}\n{ir_text}", flush=True)


def tracer(trace: Trace) -> Callable[[str, str], None] | None:
    """The section printer ``trace`` asks for: ``print_section`` for True, None for off."""
    if trace is True:
        return print_section
    return trace or None


def run(passes: list[Pass], ir_in, ctx: PassContext | None = None, trace: Trace = False):
    """``ir_in`` through every pass in order, all sharing ``ctx``; ``trace`` sees the IR after each."""
    ctx = ctx if ctx is not None else PassContext()
    emit = tracer(trace)
    out = ir_in
    for p in passes:
        out = p(out, ctx)
        if emit is not None:
            emit(p.name, str(out))
    return out


def lower_gpu(func: LoweredFunc, trace: Trace = False, ctx: PassContext | None = None) -> GPUProgram:
    """Run ``GPU_PIPELINE`` on ``func`` (the output of ``schedule.lower``)."""
    return run(GPU_PIPELINE, func, ctx, trace)


__all__ = [
    "BLOCK_TAGS", "CPU_PIPELINE", "GPU_PIPELINE", "GPUError", "GPUKernel", "GPULimits", "GPUProgram",
    "IRVerifyError", "Loop", "Pass", "PassContext", "StmtMutator", "StmtVisitor", "THREAD_TAGS", "VTHREAD",
    "constant_trip_loops", "guards_to_bounds", "inject_virtual_threads", "insert_barriers", "launch_dims",
    "lower_gpu", "lowering_pass", "missing_barriers", "pipeline", "print_section", "promote_accumulators",
    "remove_unit_loops", "run", "share_storage", "simplify_bounds", "specialize_rows", "split_kernels", "tracer", "verify",
    "verify_kernel",
]
