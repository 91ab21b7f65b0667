"""Each schedule primitive alone and combined, built for the CPU and checked against NumPy.

Shapes are small primes (M=13, N=17, K=11) so that no split factor divides: guards and
tails run in every test.
"""
from __future__ import annotations

import pytest

import schedule
import te
from sched_helpers import K, M, N, check, tensor, workload


def matmul(**params):
    wl = te.create_workload("matmul", **{"M": M, "N": N, "K": K, **params})
    C = wl.outputs[0]
    s = schedule.create_schedule(C)
    i, j = C.op.axis
    (k,) = C.op.reduce_axis
    return wl, s, s[C], i, j, k


def chain(shape=(M, N)):
    wl = te.create_workload("elementwise_chain", shape=list(shape))
    out = wl.outputs[0]
    return wl, schedule.create_schedule(out), tensor(wl, "T_mul"), tensor(wl, "T_add1"), out


# ---------------------------------------------------------------- split


def test_default_schedule():
    wl, s, *_ = matmul()
    check(s, wl)


@pytest.mark.parametrize(
    "axis, kwargs",
    [
        ("i", dict(factor=4)),        # non-dividing: 13 = 3*4 + 1
        ("i", dict(factor=13)),       # the whole extent
        ("i", dict(factor=1)),
        ("i", dict(factor=20)),       # factor > extent
        ("i", dict(nparts=3)),        # non-dividing
        ("i", dict(nparts=13)),
        ("i", dict(nparts=20)),       # nparts > extent
        ("j", dict(factor=5)),
        ("k", dict(factor=4)),        # reduction axis, non-dividing
        ("k", dict(factor=11)),
        ("k", dict(nparts=2)),
    ],
    ids=lambda v: str(v) if isinstance(v, str) else ",".join(f"{k}={x}" for k, x in v.items()),
)
def test_split(axis, kwargs):
    wl, s, st, i, j, k = matmul()
    outer, inner = st.split({"i": i, "j": j, "k": k}[axis], **kwargs)
    assert outer.kind == inner.kind
    check(s, wl)


def test_split_dividing_has_no_guard():
    wl = te.create_workload("matmul", M=12, N=8, K=6)
    C = wl.outputs[0]
    s = schedule.create_schedule(C)
    s[C].split(C.op.axis[0], factor=4)
    s[C].split(C.op.reduce_axis[0], nparts=3)
    module = check(s, wl)
    assert "if " not in str(module.func)


def test_split_twice_and_split_the_inner_part():
    wl, s, st, i, j, k = matmul()
    io, ii = st.split(i, factor=6)
    iio, iii = st.split(ii, factor=4)      # 6 = 4 + 2: a tail inside a tail
    ioo, ioi = st.split(io, nparts=2)
    ko, ki = st.split(k, factor=3)
    kio, kii = st.split(ki, factor=2)
    check(s, wl)


def test_tile():
    wl, s, st, i, j, k = matmul()
    io, jo, ii, ji = st.tile(i, j, 4, 5)
    assert st.leaf_iter_vars == [io, jo, ii, ji, k]
    check(s, wl)


def test_tile_factors_larger_than_extent():
    wl, s, st, i, j, k = matmul()
    st.tile(i, j, 32, 64)
    check(s, wl)


# ---------------------------------------------------------------- reorder


@pytest.mark.parametrize("order", ["kij", "jki", "ikj", "kji"])
def test_reorder_root_axes(order):
    wl, s, st, i, j, k = matmul()
    st.reorder(*[{"i": i, "j": j, "k": k}[c] for c in order])
    check(s, wl)


def test_reorder_split_axes_reduction_outside():
    wl, s, st, i, j, k = matmul()
    io, jo, ii, ji = st.tile(i, j, 4, 6)
    ko, ki = st.split(k, factor=4)
    st.reorder(ko, io, jo, ki, ii, ji)      # the reduction outermost: init runs before it
    check(s, wl)


def test_reorder_partial_keeps_other_positions():
    wl, s, st, i, j, k = matmul()
    io, ii = st.split(i, factor=4)
    ko, ki = st.split(k, factor=3)
    st.reorder(ki, ii)                      # only these two swap places
    assert st.leaf_iter_vars == [io, ki, j, ko, ii]
    check(s, wl)


# ---------------------------------------------------------------- fuse


def test_fuse_spatial_pair():
    wl, s, st, i, j, k = matmul()
    f = st.fuse(i, j)
    assert f.extent == M * N
    check(s, wl)


def test_fuse_then_split():
    wl, s, st, i, j, k = matmul()
    f = st.fuse(i, j)
    fo, fi = st.split(f, factor=8)
    check(s, wl)


def test_fuse_tile_outer_loops():
    wl, s, st, i, j, k = matmul()
    io, jo, ii, ji = st.tile(i, j, 4, 5)
    st.fuse(io, jo)
    check(s, wl)


def test_fuse_reduce_pair():
    wl, s, st, i, j, k = matmul()
    ko, ki = st.split(k, factor=4)
    st.fuse(ko, ki)
    check(s, wl)


def test_fuse_three_axes_of_batch_matmul():
    wl = te.create_workload("batch_matmul", B=3, M=5, N=7, K=4)
    C = wl.outputs[0]
    s = schedule.create_schedule(C)
    b, i, j = C.op.axis
    f = s[C].fuse(b, i, j)
    s[C].split(f, factor=16)
    check(s, wl)


# ---------------------------------------------------------------- annotations


def test_vectorize_innermost_spatial():
    wl, s, st, i, j, k = matmul()
    jo, ji = st.split(j, factor=8)
    st.reorder(i, jo, k, ji)
    st.vectorize(ji)
    module = check(s, wl)
    assert "#pragma omp simd" in module.source


def test_unroll():
    wl, s, st, i, j, k = matmul()
    ko, ki = st.split(k, factor=4)
    st.unroll(ki)
    module = check(s, wl)
    assert "#pragma GCC unroll 4" in module.source


def test_unroll_outer_spatial_axis_with_tail():
    wl, s, st, i, j, k = matmul()
    io, ii = st.split(i, factor=3)
    st.unroll(ii)
    st.unroll(k)
    check(s, wl)


def test_parallel_outer_axis():
    wl, s, st, i, j, k = matmul()
    io, ii = st.split(i, factor=4)
    st.parallel(io)
    module = check(s, wl)
    assert "#pragma omp parallel for" in module.source


def test_parallel_fused_vectorized_unrolled_together():
    wl, s, st, i, j, k = matmul()
    io, jo, ii, ji = st.tile(i, j, 4, 8)
    ko, ki = st.split(k, factor=4)
    st.reorder(io, jo, ko, ii, ki, ji)
    f = st.fuse(io, jo)
    st.parallel(f)
    st.unroll(ki)
    st.vectorize(ji)
    check(s, wl)


def test_parallel_below_reduction_axis():
    wl, s, st, i, j, k = matmul()
    st.reorder(k, i, j)
    st.parallel(i)                          # distinct i write distinct rows
    check(s, wl)


# ---------------------------------------------------------------- placement


def test_compute_inline_all_intermediates():
    wl, s, T1, T2, out = chain()
    s[T1].compute_inline()
    s[T2].compute_inline()
    module = check(s, wl)
    assert "allocate" not in str(module.func)


def test_compute_inline_one_of_two():
    wl, s, T1, T2, out = chain()
    s[T2].compute_inline()
    check(s, wl)


def test_compute_at_outer_loop_of_split_host():
    wl, s, T1, T2, out = chain()
    io, ii = s[out].split(out.op.axis[0], factor=4)
    s[T1].compute_inline()
    s[T2].compute_at(s[out], io)
    func = check(s, wl).func
    assert "allocate T_add1[4, 17]" in str(func)


def test_compute_at_innermost_loop():
    wl, s, T1, T2, out = chain()
    s[T2].compute_inline()
    s[T1].compute_at(s[out], out.op.axis[1])
    func = check(s, wl).func
    assert "allocate T_mul[1, 1]" in str(func)


def test_compute_at_chained():
    wl, s, T1, T2, out = chain()
    io, jo, ii, ji = s[out].tile(*out.op.axis, 4, 6)
    s[T2].compute_at(s[out], jo)
    s[T1].compute_at(s[T2], T2.op.axis[0])
    check(s, wl)


def test_compute_at_host_fused_loop():
    wl, s, T1, T2, out = chain()
    io, jo, ii, ji = s[out].tile(*out.op.axis, 4, 6)
    f = s[out].fuse(io, jo)
    s[T1].compute_inline()
    s[T2].compute_at(s[out], f)
    check(s, wl)


def test_compute_at_then_split_attached_stage():
    wl, s, T1, T2, out = chain()
    io, ii = s[out].split(out.op.axis[0], factor=5)
    s[T1].compute_inline()
    s[T2].compute_at(s[out], io)
    a, b = T2.op.axis
    bo, bi = s[T2].split(b, factor=4)       # 17 columns in tiles of 4 inside a 5-row region
    s[T2].vectorize(bi)
    check(s, wl)


def test_compute_at_region_with_negative_offsets():
    """A 3-point stencil: the region starts one before the tile; padding reads are never taken."""
    n = 13
    X = te.placeholder((n,), name="X")
    T = te.compute((n,), lambda i: X[i] * 2.0, name="T")
    Y = te.compute((n,), lambda i: te.if_then_else(i >= 1, T[i - 1], 0.0) + T[i]
                   + te.if_then_else(i < n - 1, T[i + 1], 0.0), name="Y")
    s = schedule.create_schedule(Y)
    io, ii = s[Y].split(Y.op.axis[0], factor=4)
    s[T].compute_at(s[Y], io)
    text = str(check(s, workload([X, Y])).func)
    assert "allocate T[6]" in text and "if i_outer * 4 + i - 1 >= 0:" in text


def test_compute_at_region_of_transposed_and_strided_reads():
    X = te.placeholder((7, 26), name="X")
    T = te.compute((26, 7), lambda i, j: X[j, i] + 1.0, name="T")
    Y = te.compute((7, 13), lambda i, j: T[2 * j, i] * T[2 * j + 1, i], name="Y")
    s = schedule.create_schedule(Y)
    i, j = Y.op.axis
    jo, ji = s[Y].split(j, factor=3)
    s[Y].reorder(jo, i, ji)
    s[T].compute_at(s[Y], i)
    assert "allocate T[6, 1]" in str(check(s, workload([X, Y])).func)


@pytest.mark.parametrize("read,allocated", [
    (lambda i: i // 2, "T[2]"),          # a block of 4 starting at a multiple of 2: two elements
    (lambda i: (i * i) % 13, "T[13]"),   # non-linear in the varying loop: the whole tensor
])
def test_compute_at_read_through_a_division_narrows_and_a_non_linear_one_takes_the_whole_tensor(read, allocated):
    X = te.placeholder((13,), name="X")
    T = te.compute((13,), lambda i: X[i] + 1.0, name="T")
    Y = te.compute((26,), lambda i: T[read(i)], name="Y")
    s = schedule.create_schedule(Y)
    io, ii = s[Y].split(Y.op.axis[0], factor=4)
    s[T].compute_at(s[Y], io)
    assert f"allocate {allocated}" in str(check(s, workload([X, Y])).func)


def test_compute_root_undoes_compute_at():
    wl, s, T1, T2, out = chain()
    io, ii = s[out].split(out.op.axis[0], factor=4)
    s[T2].compute_at(s[out], io)
    s[T2].compute_root()
    func = check(s, wl).func
    assert "allocate T_add1[13, 17]" in str(func)


def test_compute_root_intermediates_with_their_own_schedules():
    wl, s, T1, T2, out = chain()
    s[T1].parallel(T1.op.axis[0])
    a, b = T2.op.axis
    s[T2].reorder(b, a)
    s[T2].unroll(a)
    s[out].fuse(*out.op.axis)
    check(s, wl)


# ---------------------------------------------------------------- caches


def test_cache_write_local_register_tile():
    """The bench's schedule: a local tile of C, accumulated at the fused tile loop."""
    wl, s, st, i, j, k = matmul()
    C = wl.outputs[0]
    CL = s.cache_write(C, "local")
    io, jo, ii, ji = s[C].tile(i, j, 4, 8)
    s[C].vectorize(ji)
    f = s[C].fuse(io, jo)
    s[C].parallel(f)
    s[CL].compute_at(s[C], f)
    ci, cj = s[CL].op.axis
    (ck,) = s[CL].op.reduce_axis
    ko, ki = s[CL].split(ck, factor=4)
    s[CL].reorder(ko, ki, ci, cj)
    s[CL].unroll(ci)
    s[CL].vectorize(cj)
    func = check(s, wl).func
    assert "allocate C.local[4, 8] float32 in local" in str(func)


def test_cache_write_tiled_cache_stage_at_root():
    wl, s, st, i, j, k = matmul()
    C = wl.outputs[0]
    CL = s.cache_write(C, "local")
    ci, cj = s[CL].op.axis
    (ck,) = s[CL].op.reduce_axis
    cio, cjo, cii, cji = s[CL].tile(ci, cj, 4, 4)
    s[CL].reorder(cio, cjo, ck, cii, cji)
    s[CL].vectorize(cji)
    s[C].split(i, factor=5)
    check(s, wl)


def test_cache_write_at_inner_spatial_loop():
    wl, s, st, i, j, k = matmul()
    C = wl.outputs[0]
    CL = s.cache_write(C, "local")
    io, ii = s[C].split(i, factor=4)
    s[CL].compute_at(s[C], ii)              # one row at a time, the row a 1 x N region
    check(s, wl)


@pytest.mark.parametrize("which", ["A", "B", "both"])
def test_cache_read_pack_tile_at_reduce_outer(which):
    wl, s, st, i, j, k = matmul()
    A, B, C = wl.args
    io, jo, ii, ji = st.tile(i, j, 4, 6)
    ko, ki = st.split(k, factor=4)
    st.reorder(io, jo, ko, ii, ki, ji)
    packs = []
    if which in ("A", "both"):
        packs.append(s.cache_read(A, "local", [C]))
    if which in ("B", "both"):
        packs.append(s.cache_read(B, "local", [C]))
    for P in packs:
        s[P].compute_at(s[C], ko)
    func = check(s, wl).func
    text = str(func)
    if which in ("A", "both"):
        assert "allocate A.local[4, 4]" in text
    if which in ("B", "both"):
        assert "allocate B.local[4, 6]" in text


def test_cache_read_vectorized_copy_at_root():
    wl, s, st, i, j, k = matmul()
    A, B, C = wl.args
    BL = s.cache_read(B, "global", [C])
    r, c = BL.op.axis
    co, ci = s[BL].split(c, factor=8)
    s[BL].vectorize(ci)
    check(s, wl)


def test_cache_read_and_cache_write_together():
    wl, s, st, i, j, k = matmul()
    A, B, C = wl.args
    CL = s.cache_write(C, "local")
    AL = s.cache_read(A, "local", [CL])
    io, jo, ii, ji = s[C].tile(i, j, 4, 8)
    s[CL].compute_at(s[C], jo)
    ci, cj = s[CL].op.axis
    (ck,) = s[CL].op.reduce_axis
    ko, ki = s[CL].split(ck, factor=3)
    s[CL].reorder(ko, ci, ki, cj)
    s[AL].compute_at(s[CL], ko)
    check(s, wl)


# ---------------------------------------------------------------- several outputs


def test_two_outputs_one_read_by_the_other():
    X = te.placeholder((M, N), name="X")
    Y = te.compute((M, N), lambda i, j: X[i, j] * 2.0, name="Y")
    Z = te.compute((M, N), lambda i, j: Y[i, j] + X[i, j], name="Z")
    s = schedule.create_schedule([Y, Z])
    s[Y].split(Y.op.axis[1], factor=4)
    zo, zi = s[Z].split(Z.op.axis[0], nparts=3)
    s[Z].parallel(zo)
    check(s, workload([X, Y, Z]))


def test_intermediate_passed_as_an_argument_is_stored_there():
    wl, s, T1, T2, out = chain()
    s[T1].compute_inline()
    A, B, _ = wl.args
    check(s, workload([A, B, T2, out]))     # T_add1 becomes a kernel output too
