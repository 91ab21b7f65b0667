"""The CPU emulator of CUDA kernels: right answers, and broken kernels caught."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import te
import schedule
from schedule import ir
from schedule.passes import lower_gpu
from schedule.ir import Barrier, IfThenElse
from backends import emulator
from backends.emulator import EmulationError, EmulationFault

from gpu_helpers import gpu_matmul, matmul_inputs


def _run(program, a, b, shape):
    c = np.full(shape, np.nan, dtype="float32")
    emulator.build_program(program)(a, b, c)
    return c


def _mutate(program, fn):
    kernels = tuple(dataclasses.replace(k, body=ir.map_stmt(k.body, fn)) for k in program.kernels)
    return dataclasses.replace(program, kernels=kernels)


@pytest.mark.parametrize("shape", [(64, 64, 64), (30, 22, 13)])
def test_hand_built_matmul_matches(shape):
    M, N, K = shape
    s, args = gpu_matmul(M, N, K, unroll=True)
    a, b = matmul_inputs(M, N, K)
    c = emulator.run(s, args, [a, b])[0]
    np.testing.assert_allclose(c, a @ b, rtol=1e-5, atol=1e-5)


def test_emulated_source_has_thread_loops_and_checks():
    s, args = gpu_matmul(64, 64, 64)
    module = emulator.build(s, args)
    src = module.source
    assert "emu_tx" in src and "emu_bx" in src and "at_check(" in src
    assert "__syncthreads" not in src and "threadIdx" not in src


def _without_barrier(program, which: int):
    """``program`` with its ``which``-th barrier (1-based, in walk order) left out."""
    barriers = []

    def drop(node):
        if isinstance(node, Barrier):
            barriers.append(node)
            return ir.seq() if len(barriers) == which else None
        return None

    broken = _mutate(program, drop)
    assert len(barriers) >= which
    return broken


def test_missing_barrier_after_the_fetch_is_a_race():
    # Skip the barrier between the cooperative fetch and the compute (read after write):
    # a thread reads tile elements another thread writes in the same barrier interval.
    M = N = K = 64
    program = lower_gpu(schedule.lower(*gpu_matmul(M, N, K)))
    a, b = matmul_inputs(M, N, K)
    good = _run(program, a, b, (M, N))
    np.testing.assert_allclose(good, a @ b, rtol=1e-5, atol=1e-5)
    with pytest.raises(EmulationFault, match=r"data race on [AB]_shared\[\d+\]: thread \d+ read it, then thread "
                                             r"\d+ writes it"):
        _run(_without_barrier(program, 2), a, b, (M, N))


def test_missing_barrier_before_the_next_fetch_is_a_race_though_the_answer_is_right():
    # Skip the barrier that keeps the next iteration's fetch from overwriting a tile other
    # threads still read (write after read). Threads run one after another here, so the
    # result is right; on a GPU it is not. The detector sees it all the same.
    M = N = K = 64
    program = lower_gpu(schedule.lower(*gpu_matmul(M, N, K)))
    broken = _without_barrier(program, 1)
    a, b = matmul_inputs(M, N, K)
    with pytest.raises(EmulationFault, match=r"data race on [AB]_shared\[\d+\]: (thread \d+|several threads) read "
                                             r"it, then thread \d+ writes it"):
        _run(broken, a, b, (M, N))


def test_two_threads_writing_one_shared_element_is_a_race():
    # Every thread of the fetch writes the tile's first element: a write-write race.
    M = N = K = 32
    program = lower_gpu(schedule.lower(*gpu_matmul(M, N, K)))

    def same_element(node):
        if isinstance(node, ir.BufferStore) and node.buffer.scope == "shared":
            return dataclasses.replace(node, indices=tuple(te.const(0) for _ in node.indices))
        return None

    with pytest.raises(EmulationFault, match=r"data race .*: thread \d+ wrote it, then thread \d+ writes it"):
        _run(_mutate(program, same_element), *matmul_inputs(M, N, K), (M, N))


def test_out_of_bounds_thread_mapping_is_caught():
    # 30x22 output with 32-wide tiles: the guards keep the extra threads out. Without
    # them (a mapping that ignores the tail) the emulator's bounds checks fire.
    M, N, K = 30, 22, 13
    program = lower_gpu(schedule.lower(*gpu_matmul(M, N, K)))

    def drop_guards(node):
        return node.then_case if isinstance(node, IfThenElse) else None

    broken = _mutate(program, drop_guards)
    a, b = matmul_inputs(M, N, K)
    with pytest.raises(EmulationFault, match="out of range"):
        _run(broken, a, b, (M, N))


def test_thread_index_off_by_one_is_caught():
    M = N = K = 32
    s, args = gpu_matmul(M, N, K)
    program = lower_gpu(schedule.lower(s, args))
    from te.expr import substitute

    (kernel,) = program.kernels
    # The owner's thread loop (the outermost threadIdx.x loop), shifted by one thread.
    owner = next(n for n in ir.walk(kernel.body) if isinstance(n, ir.For) and n.thread_tag == "threadIdx.x")

    def shift_by_var(node):  # map_stmt rebuilds bottom-up: match the loop by its variable
        if isinstance(node, ir.For) and node.var is owner.var:
            return dataclasses.replace(node, body=ir.map_stmt(
                node.body, fexpr=lambda e: substitute(e, {owner.var: owner.var + 1})))
        return None

    broken = _mutate(program, shift_by_var)
    a, b = matmul_inputs(M, N, K)
    with pytest.raises(EmulationFault):
        _run(broken, a, b, (M, N))


def test_several_kernels_run_in_order():
    wl = te.create_workload("softmax", shape=[5, 33])
    from schedule.space import ConfigSpace
    import random

    space = ConfigSpace.from_workload(wl, "cuda")
    for seed in range(3):
        s, args = space.apply(space.sample(random.Random(seed)))
        x = wl.random_inputs(seed)
        (out,) = emulator.run(s, args, x)
        np.testing.assert_allclose(out, wl.reference(*x)[0], rtol=1e-5, atol=1e-6)


def test_barrier_inside_a_partial_thread_loop_cannot_be_emulated():
    t = te.var("t")
    kernel = lower_gpu(schedule.lower(*gpu_matmul(32, 32, 32))).kernels[0]
    body = ir.For(t, ir.Const(4), ir.THREAD_BINDING, Barrier(), "threadIdx.x")
    bad = dataclasses.replace(kernel, body=ir.seq(kernel.body, body))
    with pytest.raises(EmulationError, match="threadIdx.x"):
        emulator.emulate_program(dataclasses.replace(
            lower_gpu(schedule.lower(*gpu_matmul(32, 32, 32))), kernels=(bad,)))


def test_unbound_kernel_runs_as_one_thread():
    A = te.placeholder((10,), name="A")
    B = te.compute((10,), lambda i: A[i] * 2, name="B")
    s = schedule.create_schedule(B)
    a = np.arange(10, dtype="float32")
    (b,) = emulator.run(s, [A, B], [a])
    np.testing.assert_array_equal(b, a * 2)


@pytest.mark.parametrize("shape", [(48, 40, 24), (37, 29, 19)])
def test_two_dimensional_blocks(shape):
    from gpu_helpers import gpu_matmul_2d

    M, N, K = shape
    s, args = gpu_matmul_2d(M, N, K)
    program = lower_gpu(schedule.lower(s, args))
    (kernel,) = program.kernels
    assert kernel.block == (8, 4, 1) and kernel.grid == (-(-N // 8), -(-M // 4), 1)
    a, b = matmul_inputs(M, N, K)
    np.testing.assert_allclose(_run(program, a, b, (M, N)), a @ b, rtol=1e-5, atol=1e-5)


def test_vthread_that_cannot_be_injected_stays_a_serial_loop():
    # A virtual thread writing shared memory at its own index cannot run its other
    # statements once for all: the loop stays serial (correct, without the reuse).
    from schedule.passes import inject_virtual_threads

    v = te.var("v")
    sh = ir.Buffer("S", (4,), "float32", "shared")
    out = ir.Buffer("O", (4,), "float32", is_arg=True)
    body = ir.seq(ir.BufferStore(sh, (v,), ir.Const(1.0, "float32")), Barrier(),
                  ir.BufferStore(out, (v,), ir.BufferLoad(sh, (v,), "float32")))
    loop = ir.For(v, ir.Const(4), ir.THREAD_BINDING, ir.Allocate(sh, body), "vthread")
    result = inject_virtual_threads(loop)
    assert isinstance(result, ir.For) and result.kind == ir.SERIAL and result.thread_tag is None


@pytest.mark.parametrize("level", ["blockIdx.x", "threadIdx.x"])
def test_two_projections_computed_with_one_another_are_one_kernel_that_matches(level):
    """compute_with under the GPU pipeline: the second projection inside the first's block
    (or thread) loop makes one kernel where there were two, and it computes both."""
    X = te.placeholder((16, 12), "float32", "X")
    Ws = [te.placeholder((12, 12), "float32", f"W{n}") for n in range(2)]
    outs = [te.ops.dense(X, W, name=f"p{n}") for n, W in enumerate(Ws)]

    def schedule_them(joined: bool):
        s = schedule.create_schedule(outs)
        loops = []
        for out in outs:
            st = s[out]
            block, thread = st.split(st.fuse(*st.op.axis), factor=32)
            st.bind(block, "blockIdx.x")
            st.bind(thread, "threadIdx.x")
            loops.append(block if level == "blockIdx.x" else thread)
        if joined:
            s[outs[1]].compute_with(s[outs[0]], loops[0])
        return s

    args = [X, *Ws, *outs]
    assert [len(schedule.lower(schedule_them(j), args, pipeline="gpu").kernels) for j in (False, True)] == [2, 1]
    rng = np.random.default_rng(0)
    x = rng.standard_normal((16, 12)).astype(np.float32)
    ws = [rng.standard_normal((12, 12)).astype(np.float32) for _ in range(2)]
    for y, w in zip(emulator.run(schedule_them(True), args, [x, *ws]), ws):
        np.testing.assert_allclose(y, x @ w.T, rtol=1e-5, atol=1e-5)
