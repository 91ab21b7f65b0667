"""``compute_at`` into a consumer that reads the stage through other stages.

The host of an attached stage may read it through a chain of stages; bound inference
then carries the region the host needs back through every stage attached inside the
attach loop (as TVM does, consumers first). Each schedule here is lowered, built for the
CPU and compared with NumPy, and the lowered IR is checked for where the attached
buffers live and how large they are.
"""
from __future__ import annotations

import numpy as np
import pytest

import schedule
import te
from schedule import ScheduleError, ir
from sched_helpers import assert_matches, check, tensor, workload

# ---------------------------------------------------------------- IR helpers


def loop_over(func, axis) -> ir.For:
    """The loop of ``func`` over axis ``axis`` (an IterVar with one loop)."""
    loops = [n for n in ir.walk(func.body) if isinstance(n, ir.For) and n.var is axis.var]
    assert len(loops) == 1, f"expected one loop over {axis.name}\n{func}"
    return loops[0]


def allocations(stmt) -> dict[str, ir.Buffer]:
    """Buffers allocated anywhere inside ``stmt``, by name."""
    return {n.buffer.name: n.buffer for n in ir.walk(stmt) if isinstance(n, ir.Allocate)}


def assert_allocated_inside(func, axis, shapes: dict[str, tuple[int, ...]]) -> None:
    """Each named buffer is allocated (once) inside the loop over ``axis``, with the given shape."""
    loop = loop_over(func, axis)
    inside = allocations(loop.body)
    everywhere = allocations(func.body)
    for name, shape in shapes.items():
        assert name in inside, f"{name} is not allocated inside loop {axis.name}\n{func}"
        assert inside[name].shape == shape, f"{name}: {inside[name].shape} != {shape}\n{func}"
        assert everywhere[name] is inside[name], f"{name} is allocated twice\n{func}"


# ---------------------------------------------------------------- softmax


def numpy_softmax(x: np.ndarray) -> np.ndarray:
    x = x.astype(np.float64)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def softmax_schedule(shape, inline_exp: bool, sum_first: bool):
    """Softmax with its max and sum (and exp, when stored) computed per row inside the
    output's parallel row loop, the inner element-wise loops vectorized."""
    wl = te.create_workload("softmax", shape=list(shape))
    Y = wl.outputs[0]
    mx, E, S = (tensor(wl, n) for n in ("softmax_max", "softmax_exp", "softmax_sum"))
    s = schedule.create_schedule(Y)
    row, col = Y.op.axis
    if inline_exp:
        s[E].compute_inline()
        attached = [mx, S]
    else:
        attached = [mx, E, S]
        s[E].vectorize(E.op.axis[1])
    for t in reversed(attached) if sum_first else attached:
        s[t].compute_at(s[Y], row)
    s[Y].parallel(row)
    s[Y].vectorize(col)
    return wl, s, row, col


@pytest.mark.parametrize("shape", [(37, 1001), (64, 64)], ids=["37x1001", "64x64"])
@pytest.mark.parametrize("inline_exp", [True, False], ids=["exp-inlined", "exp-stored"])
@pytest.mark.parametrize("sum_first", [False, True], ids=["max-attached-first", "sum-attached-first"])
def test_softmax_max_and_sum_per_row(shape, inline_exp, sum_first):
    wl, s, row, col = softmax_schedule(shape, inline_exp, sum_first)
    module = check(s, wl)  # lowers, verifies, builds for the CPU, compares with the reference
    (x,) = wl.random_inputs(seed=1)
    out = np.full(shape, np.nan, dtype=np.float32)
    module(x, out)
    assert_matches(out, numpy_softmax(x), "float32", shape[1], what=str(module.func))

    func = module.func
    assert loop_over(func, row).kind == ir.PARALLEL, func
    assert loop_over(func, col).kind == ir.VECTORIZED, func
    shapes = {"softmax_max": (1,), "softmax_sum": (1,)}
    if not inline_exp:
        shapes["softmax_exp"] = (1, shape[1])
    assert_allocated_inside(func, row, shapes)  # one row each, per iteration of the row loop


def test_softmax_max_attached_while_exp_and_sum_are_at_root():
    """Attaching max while exp and sum (the stages between it and the output) are at the
    root is legal at the call: they may be attached next. Left at the root, exp would read
    max outside the row loop where max lives, and lowering refuses naming exp (as TVM's
    bound inference does: "cannot find the producer ... along the loop nest specified by
    compute_at of consumer"). Once they are attached too, it lowers and matches."""
    wl = te.create_workload("softmax", shape=[37, 101])
    Y = wl.outputs[0]
    mx, S = tensor(wl, "softmax_max"), tensor(wl, "softmax_sum")
    s = schedule.create_schedule(Y)
    s[mx].compute_at(s[Y], Y.op.axis[0])  # Y reads max only through exp and sum
    with pytest.raises(ScheduleError, match=r"softmax_exp is computed at the root\); .*: attach softmax_exp at 'softmax' inside loop 'i0'"):
        schedule.lower(s, wl.args)
    s[tensor(wl, "softmax_exp")].compute_at(s[Y], Y.op.axis[0])
    s[S].compute_at(s[Y], Y.op.axis[0])
    check(s, wl)


def test_host_reads_directly_and_through_a_stage_attached_later():
    """C reads A directly and through B (a row sum of A). Attaching A while B is at the
    root is legal at the call; left so, B would read A outside C's row loop where A
    lives, and lowering names B. With B attached at the same loop, A's region is the
    union of what C and B need: one whole row."""
    X = te.placeholder((13, 29), name="X")
    A = te.compute((13, 29), lambda i, j: X[i, j] * 2.0, name="A")
    k = te.reduce_axis((0, 29), "k")
    B = te.compute((13,), lambda i: te.sum(A[i, k], axis=k), name="B")
    C = te.compute((13, 29), lambda i, j: A[i, j] - B[i], name="C")
    wl = workload([X, C])
    s = schedule.create_schedule(C)
    row = C.op.axis[0]
    s[A].compute_at(s[C], row)  # C reads A directly and through B (root, for now)
    with pytest.raises(ScheduleError, match=r"'A' is computed at 'C' inside loop 'i' .*B is computed at the root"):
        schedule.lower(s, wl.args)
    s[B].compute_at(s[C], row)
    func = check(s, wl).func
    assert_allocated_inside(func, row, {"A": (1, 29), "B": (1,)})


# ---------------------------------------------------------------- a 2-d blur chain


N = 45  # no tile factor below divides it: every tiled loop has a guarded tail


def blur_chain():
    """X -> A (element-wise) -> B (3x3 stencil, element-wise) -> C (3x3 box, a reduction).

    C at (i, j) reads B rows i..i+2, columns j..j+2; B at (i, j) reads A the same way: a
    tile of C needs a 2-wide halo of B and a 4-wide halo of A.
    """
    X = te.placeholder((N + 4, N + 4), name="X")
    A = te.compute((N + 4, N + 4), lambda i, j: X[i, j] * 2.0 + 1.0, name="A")
    B = te.compute(
        (N + 2, N + 2),
        lambda i, j: A[i, j] + A[i + 1, j + 1] * 4.0 + A[i + 2, j + 2] - A[i, j + 2] - A[i + 2, j],
        name="B",
    )
    ry, rx = te.reduce_axis((0, 3), "ry"), te.reduce_axis((0, 3), "rx")
    C = te.compute((N, N), lambda i, j: te.sum(B[i + ry, j + rx], axis=[ry, rx]), name="C")
    return workload([X, C]), A, B, C


def tiled_blur(ti: int = 8, tj: int = 16, b_split: int | None = None):
    """C tiled (io, jo, ii, ry, rx, ji): io parallel, ji vectorized; A's and B's column
    loops vectorized (B's inner part of a split by ``b_split`` when given)."""
    wl, A, B, C = blur_chain()
    s = schedule.create_schedule(C)
    i, j = C.op.axis
    ry, rx = C.op.reduce_axis
    io, jo, ii, ji = s[C].tile(i, j, ti, tj)
    s[C].reorder(ii, ry, rx, ji)
    s[C].parallel(io)
    s[C].vectorize(ji)
    s[A].vectorize(A.op.axis[1])
    bj = B.op.axis[1]
    if b_split is not None:
        bj = s[B].split(bj, factor=b_split)[1]
    s[B].vectorize(bj)
    return wl, s, A, B, C, (io, jo, ii, ji)


def test_first_stage_at_tile_loop_middle_stage_deeper():
    """A at C's column-tile loop, B (A's only reader) deeper, at C's row-in-tile loop: A's
    region is what B needs over every row of the tile, B's region being one row of C."""
    wl, s, A, B, C, (io, jo, ii, ji) = tiled_blur()
    s[A].compute_at(s[C], jo)  # before B is attached: C reads A only through the root B
    s[B].compute_at(s[C], ii)
    func = check(s, wl).func
    assert_allocated_inside(func, jo, {"A": (8 + 4, 16 + 4)})
    assert_allocated_inside(func, ii, {"B": (1 + 2, 16 + 2)})


@pytest.mark.parametrize("a_first", [True, False], ids=["A-attached-first", "B-attached-first"])
def test_first_two_stages_at_the_same_tile_loop(a_first):
    """A and B both at C's column-tile loop: B holds the tile plus a 2-wide halo, A the
    tile plus a 4-wide halo (B's region widened by B's own stencil)."""
    wl, s, A, B, C, (io, jo, ii, ji) = tiled_blur()
    for t in ([A, B] if a_first else [B, A]):
        s[t].compute_at(s[C], jo)
    func = check(s, wl).func
    assert_allocated_inside(func, jo, {"A": (8 + 4, 16 + 4), "B": (8 + 2, 16 + 2)})


def test_whole_chain_inside_the_parallel_loop_with_a_split_middle_stage():
    """B split itself (its columns in vector-width chunks, not dividing its region): A's
    region still covers every column B's tail reads, so the result matches."""
    wl, s, A, B, C, (io, jo, ii, ji) = tiled_blur(ti=4, tj=8, b_split=4)
    s[B].compute_at(s[C], jo)
    s[A].compute_at(s[C], io)
    func = check(s, wl).func
    assert_allocated_inside(func, io, {"A": (4 + 4, N + 4)})  # every column: the whole width
    assert_allocated_inside(func, jo, {"B": (4 + 2, 8 + 2)})


def test_blur_chain_matches_numpy_directly():
    """The chain's result against a NumPy blur written independently of the te reference."""
    wl, s, A, B, C, (io, jo, ii, ji) = tiled_blur()
    s[A].compute_at(s[C], jo)
    s[B].compute_at(s[C], ii)
    module = check(s, wl)
    (x,) = wl.random_inputs(seed=3)
    out = np.full((N, N), np.nan, dtype=np.float32)
    module(x, out)
    a = x.astype(np.float64) * 2.0 + 1.0
    n2 = N + 2
    b = a[:n2, :n2] + 4.0 * a[1:n2 + 1, 1:n2 + 1] + a[2:, 2:] - a[:n2, 2:] - a[2:, :n2]
    c = sum(b[dy:dy + N, dx:dx + N] for dy in range(3) for dx in range(3))
    assert_matches(out, c, "float32", 9 * 5)
