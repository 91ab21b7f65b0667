"""The GPU passes over the loop IR: kernels, virtual threads, barriers, launch shapes, checks."""
from __future__ import annotations

import pytest

import te
import schedule
from schedule import ir
from schedule.passes import (
    GPUError, GPUKernel, constant_trip_loops, insert_barriers, lower_gpu, missing_barriers, verify_kernel,
)
from schedule.ir import Allocate, Barrier, BufferStore, For
from schedule.passes import verify

from gpu_helpers import gpu_matmul


def _program(s, args):
    return lower_gpu(schedule.lower(s, args))


def _allocs(body):
    return {n.buffer.name: n.buffer for n in ir.walk(body) if isinstance(n, Allocate)}


def test_shared_tiles_cover_the_block_tile_not_the_tensor():
    # 64x64 matmul, block tile = vthread 2 x threads 4 x S3*S4 4 = 32 rows/cols, K tile 8.
    program = _program(*gpu_matmul(64, 64, 64))
    (kernel,) = program.kernels
    allocs = _allocs(kernel.body)
    assert allocs["A.shared"].shape == (32, 8)
    assert allocs["B.shared"].shape == (8, 32)
    assert kernel.shared_bytes == 2 * 32 * 8 * 4


def test_virtual_threads_expand_locals_and_fetch_once():
    program = _program(*gpu_matmul(64, 64, 64))
    (kernel,) = program.kernels
    local = _allocs(kernel.body)["C.local"]
    assert local.shape == (4, 4, 4)  # 2x2 virtual threads, 4x4 accumulators each
    loops = [n for n in ir.walk(kernel.body) if isinstance(n, For)]
    assert not any(n.thread_tag == "vthread" for n in loops)
    # The cooperative fetches are not under any vthread (unrolled) loop.
    for loop in loops:
        if loop.kind == ir.UNROLLED:
            assert not any(isinstance(x, BufferStore) and x.buffer.scope == "shared" for x in ir.walk(loop))
    verify(program.kernel_func(kernel))


def test_barriers_after_the_fetch_and_at_the_top_of_the_reduction_loop():
    program = _program(*gpu_matmul(64, 64, 64))
    (kernel,) = program.kernels
    (k_outer,) = [n for n in ir.walk(kernel.body) if isinstance(n, For) and n.var.name == "k.outer"]
    body = k_outer.body
    assert isinstance(body, ir.Seq) and isinstance(body.stmts[0], Barrier)  # write after read, next iteration
    inner = body.stmts[1]
    while isinstance(inner, Allocate):
        inner = inner.body
    kinds = [type(x).__name__ for x in inner.stmts]
    assert kinds == ["For", "For", "Barrier", "For"]  # fetch A, fetch B, barrier, compute
    assert sum(isinstance(n, Barrier) for n in ir.walk(kernel.body)) == 2
    assert missing_barriers(kernel.body) == 0  # the pass is idempotent


def test_missing_barriers_finds_a_removed_barrier():
    program = _program(*gpu_matmul(64, 64, 64))
    body = program.kernels[0].body
    for keep in (0, 1):  # drop either barrier
        seen = []

        def drop(node, keep=keep, seen=seen):
            if isinstance(node, Barrier):
                seen.append(node)
                return ir.seq() if len(seen) - 1 != keep else None
            return None

        broken = ir.map_stmt(body, drop)
        assert missing_barriers(broken) == 1


def test_launch_dims_and_names():
    program = _program(*gpu_matmul(64, 64, 64))
    (kernel,) = program.kernels
    assert kernel.name == "kernel"
    assert kernel.grid == (4, 1, 1) and kernel.block == (16, 1, 1) and kernel.threads == 16


def test_several_root_stages_become_kernels_in_order_with_workspace():
    wl = te.create_workload("softmax", shape=[7, 13])
    from schedule.space import ConfigSpace
    import random

    space = ConfigSpace.from_workload(wl, "cuda")
    s, args = space.apply(space.sample(random.Random(0)))
    program = _program(s, args)
    assert len(program.kernels) >= 3
    assert [k.name for k in program.kernels] == [f"kernel_{n}" for n in range(len(program.kernels))]
    assert program.workspace and all(b.scope == "global" for b in program.workspace)
    for k in program.kernels:
        verify(program.kernel_func(k))


def test_constant_trip_loops_turn_tails_into_guards():
    n = te.var("n")
    v = te.var("v")
    from te.expr import Binary, Const

    buf = ir.Buffer("X", (8,), "float32")
    loop = For(v, Binary("min", Const(4), Const(13) - n * 4, "int32"), ir.UNROLLED,
               BufferStore(buf, (v,), Const(1.0, "float32")))
    out = constant_trip_loops(For(n, Const(4), ir.SERIAL, loop))
    inner = out.body
    assert ir.const_int(inner.extent) == 4 and isinstance(inner.body, ir.IfThenElse)
    unit = constant_trip_loops(For(v, Const(1), ir.SERIAL, BufferStore(buf, (v,), Const(1.0, "float32"))))
    assert isinstance(unit, BufferStore) and ir.const_int(unit.indices[0]) == 0


def _kernel(body, launch):
    return GPUKernel("k", body, launch)


def test_barrier_under_a_partial_thread_loop_is_refused():
    t = te.var("t")
    body = For(t, ir.Const(8), ir.THREAD_BINDING, Barrier(), "threadIdx.x")
    verify_kernel(_kernel(body, {"threadIdx.x": 8}))
    with pytest.raises(GPUError, match="barrier"):
        verify_kernel(_kernel(body, {"threadIdx.x": 16}))


def test_barrier_under_a_thread_dependent_condition_is_refused():
    t = te.var("t")
    body = For(t, ir.Const(8), ir.THREAD_BINDING, ir.IfThenElse(t < 4, Barrier()), "threadIdx.x")
    with pytest.raises(GPUError, match="condition"):
        verify_kernel(_kernel(body, {"threadIdx.x": 8}))


def test_nested_thread_loop_wider_than_its_enclosing_one_is_refused():
    t, u = te.var("t"), te.var("u")
    buf = ir.Buffer("X", (16,), "float32", is_arg=True)
    body = For(t, ir.Const(8), ir.THREAD_BINDING,
               For(u, ir.Const(16), ir.THREAD_BINDING, BufferStore(buf, (u,), ir.Const(0.0, "float32")), "threadIdx.x"),
               "threadIdx.x")
    with pytest.raises(GPUError, match="never run"):
        verify_kernel(_kernel(body, {"threadIdx.x": 16}))


def test_parallel_loops_are_refused_on_cuda():
    A = te.placeholder((64,), name="A")
    B = te.compute((64,), lambda i: A[i] + 1, name="B")
    s = schedule.create_schedule(B)
    s[B].parallel(B.op.axis[0])
    with pytest.raises(GPUError, match="parallel"):
        _program(s, [A, B])


def test_shared_stage_at_the_root_is_refused():
    A = te.placeholder((64,), name="A")
    B = te.compute((64,), lambda i: A[i] + 1, name="B")
    C = te.compute((64,), lambda i: B[i] * 2, name="C")
    s = schedule.create_schedule(C)
    s[B].set_scope("shared")
    with pytest.raises(GPUError, match="root"):
        _program(s, [A, C])


def test_barrier_insertion_leaves_kernels_without_shared_memory_alone():
    A = te.placeholder((64,), name="A")
    B = te.compute((64,), lambda i: A[i] + 1, name="B")
    s = schedule.create_schedule(B)
    bo, bi = s[B].split(B.op.axis[0], factor=16)
    s[B].bind(bo, "blockIdx.x")
    s[B].bind(bi, "threadIdx.x")
    func = schedule.lower(s, [A, B])
    assert insert_barriers(func.body) is not None
    program = lower_gpu(func)
    assert not any(isinstance(n, Barrier) for n in ir.walk(program.kernels[0].body))
    assert program.kernels[0].grid == (4, 1, 1) and program.kernels[0].block == (16, 1, 1)


def test_unfused_shared_region_matches_unfused_thread_binding():
    # The same tile bound with fused threads (threadIdx.x) and with the loops split
    # by hand give the same shared tile: fusion no longer widens the region.
    program = _program(*gpu_matmul(48, 40, 16, vthread=1, threads=4, s3=1, s4=2, r1=2, r2=2))
    allocs = _allocs(program.kernels[0].body)
    assert allocs["A.shared"].shape == (8, 4) and allocs["B.shared"].shape == (4, 8)
