"""Schedules of the library's operators (several stages each), checked against NumPy."""
from __future__ import annotations

import numpy as np
import pytest

import schedule
import te
from sched_helpers import K, M, N, check, tensor, workload


def tiled_matmul(wl, ti=4, tj=8, tk=4, vectorize=True):
    """tile (i, j), split k, order (io, jo, ko, ii, ki, ji), vectorize ji, parallel io."""
    C = wl.outputs[0]
    s = schedule.create_schedule(C)
    i, j = C.op.axis[-2:]
    (k,) = C.op.reduce_axis
    io, jo, ii, ji = s[C].tile(i, j, ti, tj)
    ko, ki = s[C].split(k, factor=tk)
    s[C].reorder(io, jo, ko, ii, ki, ji)
    if vectorize:
        s[C].vectorize(ji)
    s[C].parallel(io)
    return s


# ---------------------------------------------------------------- matmul family


@pytest.mark.parametrize("ta", [False, True])
@pytest.mark.parametrize("tb", [False, True])
def test_matmul_transposed(ta, tb):
    wl = te.create_workload("matmul", M=M, N=N, K=K, transpose_a=ta, transpose_b=tb)
    check(tiled_matmul(wl), wl)


@pytest.mark.parametrize(
    "dtype, out_dtype",
    [("float16", None), ("float64", None), ("int8", "int32"), ("int32", None)],
)
def test_matmul_dtypes_tiled(dtype, out_dtype):
    wl = te.create_workload("matmul", M=M, N=N, K=K, dtype=dtype, out_dtype=out_dtype)
    C = wl.outputs[0]
    assert C.dtype == (out_dtype or dtype)
    check(tiled_matmul(wl), wl)


def test_int8_matmul_does_not_wrap():
    """int8 products summed in int32: values beyond int8's range must survive."""
    wl = te.create_workload("matmul", M=M, N=N, K=64, dtype="int8", out_dtype="int32")
    s = tiled_matmul(wl, tk=16)
    module = check(s, wl)
    a = np.full((M, 64), 100, np.int8)
    b = np.full((64, N), -100, np.int8)
    c = np.zeros((M, N), np.int32)
    module(a, b, c)
    assert (c == -640000).all()


def test_batch_matmul_tiled_with_cache_write():
    wl = te.create_workload("batch_matmul", B=3, M=M, N=N, K=K, transpose_b=True)
    C = wl.outputs[0]
    s = schedule.create_schedule(C)
    CL = s.cache_write(C, "local")
    b, i, j = C.op.axis
    io, jo, ii, ji = s[C].tile(i, j, 4, 8)
    f = s[C].fuse(b, io)
    s[C].parallel(f)
    s[CL].compute_at(s[C], jo)
    cb, ci, cj = s[CL].op.axis
    (ck,) = s[CL].op.reduce_axis
    s[CL].reorder(ck, cb, ci, cj)
    s[CL].vectorize(cj)
    check(s, wl)


# ---------------------------------------------------------------- dense + epilogue


def test_dense_computed_at_epilogue_tile():
    wl = te.create_workload("dense", M=M, N=N, K=K, bias=True, relu=True)
    Y = wl.outputs[0]
    D = tensor(wl, "dense")
    s = schedule.create_schedule(Y)
    io, jo, ii, ji = s[Y].tile(*Y.op.axis, 4, 8)
    s[Y].vectorize(ji)
    s[Y].parallel(io)
    s[D].compute_at(s[Y], jo)
    di, dj = D.op.axis
    (dk,) = D.op.reduce_axis
    s[D].reorder(dk, di, dj)
    s[D].vectorize(dj)
    func = check(s, wl).func
    assert "allocate dense[4, 8]" in str(func)


def test_dense_relu_only_with_cache_write():
    wl = te.create_workload("dense", M=M, N=N, K=K, bias=False, relu=True)
    Y = wl.outputs[0]
    D = tensor(wl, "dense")
    s = schedule.create_schedule(Y)
    jo, ji = s[Y].split(Y.op.axis[1], factor=8)
    s[D].compute_at(s[Y], jo)
    check(s, wl)


def test_dense_bias_and_relu_stages_inlined():
    """bias-add and relu as two element-wise stages: the bias-add inlines into relu."""
    X = te.placeholder((M, K), name="X")
    W = te.placeholder((N, K), name="W")
    b = te.placeholder((N,), name="bias")
    D = te.ops.dense(X, W)
    T = te.compute((M, N), lambda i, j: D[i, j] + b[j], name="bias_add")
    R = te.ops.relu(T)
    wl = workload([X, W, b, R])
    s = schedule.create_schedule(R)
    s[T].compute_inline()
    io, jo, ii, ji = s[R].tile(*R.op.axis, 4, 4)
    s[D].compute_at(s[R], jo)
    check(s, wl)


# ---------------------------------------------------------------- convolutions


CONV = dict(N=1, C=3, H=9, W=11, K=5, R=3, S=3)


@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
def test_conv2d_pad_inlined_and_tiled(layout):
    wl = te.create_workload("conv2d", **CONV, padding=1, stride=1, layout=layout)
    out = wl.outputs[0]
    P = tensor(wl, "pad")
    s = schedule.create_schedule(out)
    s[P].compute_inline()
    n, a, b, c = out.op.axis               # NCHW: n k y x; NHWC: n y x k
    bo, co, bi, ci = s[out].tile(b, c, 4, 4)
    reduce_axes = list(out.op.reduce_axis)
    s[out].reorder(n, a, bo, co, *reduce_axes, bi, ci)
    s[out].vectorize(ci)
    s[out].parallel(a)
    check(s, wl)


@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
def test_conv2d_pad_computed_at_a_conv_loop(layout):
    wl = te.create_workload("conv2d", **CONV, padding=1, stride=2, layout=layout)
    out = wl.outputs[0]
    P = tensor(wl, "pad")
    s = schedule.create_schedule(out)
    axes = out.op.axis
    y = axes[2] if layout == "NCHW" else axes[1]
    yo, yi = s[out].split(y, factor=2)
    s[P].compute_at(s[out], yo)            # only the input rows of two output rows
    check(s, wl)


def test_conv2d_pad_at_channel_loop_with_dilation():
    wl = te.create_workload("conv2d", **CONV, padding=2, dilation=2, layout="NCHW")
    out = wl.outputs[0]
    P = tensor(wl, "pad")
    s = schedule.create_schedule(out)
    n, k, y, x = out.op.axis
    rc, ry, rx = out.op.reduce_axis
    s[out].reorder(n, rc, k, y, x, ry, rx)
    s[P].compute_at(s[out], rc)            # one padded input channel per rc
    check(s, wl)


def test_conv2d_cache_write_local_tile():
    wl = te.create_workload("conv2d", **CONV, padding=1, layout="NCHW")
    out = wl.outputs[0]
    P = tensor(wl, "pad")
    s = schedule.create_schedule(out)
    s[P].compute_inline()
    OL = s.cache_write(out, "local")
    n, k, y, x = out.op.axis
    xo, xi = s[out].split(x, factor=4)
    s[OL].compute_at(s[out], xo)
    check(s, wl)


@pytest.mark.parametrize("multiplier, stride", [(1, 1), (2, 2)])
def test_depthwise_conv2d(multiplier, stride):
    wl = te.create_workload("depthwise_conv2d", N=1, C=3, H=9, W=11, R=3, S=3, padding=1,
                            stride=stride, multiplier=multiplier)
    out = wl.outputs[0]
    P = tensor(wl, "pad")
    s = schedule.create_schedule(out)
    s[P].compute_inline()
    n, c, y, x = out.op.axis
    ry, rx = out.op.reduce_axis
    xo, xi = s[out].split(x, factor=4)
    s[out].reorder(n, c, y, xo, ry, rx, xi)
    s[out].unroll(rx)
    s[out].vectorize(xi)
    s[out].parallel(c)
    check(s, wl)


def test_depthwise_conv2d_pad_at_channel():
    wl = te.create_workload("depthwise_conv2d", N=2, C=3, H=7, W=8, R=3, S=3, padding=1)
    out = wl.outputs[0]
    P = tensor(wl, "pad")
    s = schedule.create_schedule(out)
    n, c, y, x = out.op.axis
    s[P].compute_at(s[out], c)
    check(s, wl)


# ---------------------------------------------------------------- softmax


def softmax(shape=(M, N), axis=-1):
    wl = te.create_workload("softmax", shape=list(shape), axis=axis)
    Y = wl.outputs[0]
    return wl, schedule.create_schedule(Y), tensor(wl, "softmax_max"), tensor(wl, "softmax_exp"), \
        tensor(wl, "softmax_sum"), Y


def test_softmax_default_four_stages():
    wl, s, Mx, E, S, Y = softmax()
    text = str(check(s, wl).func)
    assert "allocate softmax_exp[" in text
    # the max is dead once the exponentials exist: the sum reuses its storage
    assert "allocate softmax_max_softmax_sum[" in text


def test_softmax_exp_inlined_sum_at_row():
    wl, s, Mx, E, S, Y = softmax()
    s[E].compute_inline()
    i, j = Y.op.axis
    s[S].compute_at(s[Y], i)
    jo, ji = s[Y].split(j, factor=8)
    s[Y].vectorize(ji)
    s[Y].parallel(i)
    check(s, wl)


def test_softmax_max_at_exp_row_and_sum_at_output_row():
    wl, s, Mx, E, S, Y = softmax()
    s[Mx].compute_at(s[E], E.op.axis[0])
    s[S].compute_at(s[Y], Y.op.axis[0])
    (k,) = S.op.reduce_axis
    s[S].split(k, factor=4)
    check(s, wl)


def test_softmax_first_axis_of_3d():
    wl, s, Mx, E, S, Y = softmax(shape=(5, 3, 7), axis=0)
    s[E].compute_inline()
    a, b, c = Y.op.axis
    s[S].compute_at(s[Y], b)
    s[Y].reorder(b, c, a)
    check(s, wl)


# ---------------------------------------------------------------- pooling and element-wise


@pytest.mark.parametrize("pool_type", ["max", "avg"])
@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
def test_pool2d_pad_inlined(pool_type, layout):
    wl = te.create_workload("pool2d", N=1, C=3, H=9, W=11, kernel=3, stride=2, padding=1,
                            pool_type=pool_type, layout=layout)
    out = wl.outputs[0]
    s = schedule.create_schedule(out)
    s[tensor(wl, "pad")].compute_inline()
    if pool_type == "avg":
        S = tensor(wl, "pool_sum")
        s[S].compute_at(s[out], out.op.axis[1])
    else:
        n, a, b, c = out.op.axis
        s[out].fuse(n, a)
    check(s, wl)


def test_pool2d_pad_at_row_loop():
    wl = te.create_workload("pool2d", N=1, C=2, H=9, W=9, kernel=2, padding=1, pool_type="max")
    out = wl.outputs[0]
    s = schedule.create_schedule(out)
    n, c, y, x = out.op.axis
    s[tensor(wl, "pad")].compute_at(s[out], y)
    check(s, wl)


def test_elementwise_chain_fully_inlined_fused_vectorized():
    wl = te.create_workload("elementwise_chain", shape=[3, 5, 7])
    out = wl.outputs[0]
    s = schedule.create_schedule(out)
    s[tensor(wl, "T_mul")].compute_inline()
    s[tensor(wl, "T_add1")].compute_inline()
    f = s[out].fuse(*out.op.axis)
    fo, fi = s[out].split(f, factor=16)
    s[out].parallel(fo)
    s[out].vectorize(fi)
    func = check(s, wl).func
    assert "allocate" not in str(func)


@pytest.mark.parametrize("dtype", ["int8", "int32", "float16", "float64"])
def test_elementwise_chain_dtypes(dtype):
    wl = te.create_workload("elementwise_chain", shape=[M, N], dtype=dtype)
    out = wl.outputs[0]
    s = schedule.create_schedule(out)
    s[tensor(wl, "T_mul")].compute_inline()
    jo, ji = s[out].split(out.op.axis[1], factor=8)
    s[tensor(wl, "T_add1")].compute_at(s[out], jo)
    s[out].vectorize(ji)
    check(s, wl)
