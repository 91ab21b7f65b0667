"""Neural-network operators: softmax and 2-d pooling.

- ``softmax(X, axis)``: any rank, float dtypes; four stages, numerically stable:
  ``softmax_max`` (max over the axis), ``softmax_exp`` (exp(x - max)), ``softmax_sum``
  and ``softmax`` (the division).
- ``pool2d``: NCHW or NHWC, max or avg, over a (kh, kw) window. Padding is a separate
  "pad" stage (the dtype's lowest value for max, 0 for avg). Average pooling divides by
  the full window size kh*kw, padded elements included (count_include_pad=True, as in
  TVM and PyTorch's default) and needs a float dtype.
"""
from __future__ import annotations

import te

from . import _checks
from .conv import _pad2d, _window


def softmax(X, axis: int = -1):
    """``exp(X - max) / sum(exp(X - max))`` along ``axis`` (negative counts from the end)."""
    _checks.tensor("softmax", "X", X)
    _checks.float_dtype("softmax", "the dtype of X", X.dtype)
    if not _checks.is_int(axis) or not -X.ndim <= axis < X.ndim:
        raise te.ShapeError(f"softmax: axis must be an int in [{-X.ndim}, {X.ndim}) for X {X.shape}, got {axis!r}")
    ax = axis % X.ndim
    rest_shape = X.shape[:ax] + X.shape[ax + 1:]

    def rest(idx):  # index of a reduced tensor (1-d X reduces to shape (1,))
        r = idx[:ax] + idx[ax + 1:]
        return r if r else (0,)

    def full(r, k):  # index of X from a reduced index and the axis variable
        r = r if rest_shape else ()
        return r[:ax] + (k,) + r[ax:]

    red_shape = rest_shape or (1,)
    k1 = te.reduce_axis((0, X.shape[ax]), "k")
    Mx = te.compute(red_shape, lambda *r: te.max(X[full(r, k1)], axis=k1), name="softmax_max")
    E = te.compute(X.shape, lambda *i: te.exp(X[i] - Mx[rest(i)]), name="softmax_exp")
    k2 = te.reduce_axis((0, X.shape[ax]), "k")
    S = te.compute(red_shape, lambda *r: te.sum(E[full(r, k2)], axis=k2), name="softmax_sum")
    return te.compute(X.shape, lambda *i: E[i] / S[rest(i)], name="softmax", tag="softmax")


def pool2d(data, kernel, stride=None, padding=0, pool_type: str = "max", layout: str = "NCHW"):
    """Max or average pooling of 4-d ``data`` (NCHW or NHWC); kernel/stride/padding an int or [h, w].

    ``stride`` defaults to the kernel. Padding must be smaller than the kernel, so every
    window holds at least one real element.
    """
    op = "pool2d"
    _checks.tensor(op, "data", data, 4)
    _checks.choice(op, "pool_type", pool_type, ("max", "avg"))
    _checks.choice(op, "layout", layout, ("NCHW", "NHWC"))
    if pool_type == "avg":
        _checks.float_dtype(op, "the dtype of data for avg pooling", data.dtype)
    kh, kw = _checks.int_pair(op, "kernel", kernel, 1)
    sh, sw = _checks.int_pair(op, "stride", kernel if stride is None else stride, 1)
    ph, pw = _checks.int_pair(op, "padding", padding, 0)
    if ph >= kh or pw >= kw:
        raise te.ShapeError(f"{op}: padding {padding!r} must be smaller than the kernel {kernel!r}")
    h_dim = 2 if layout == "NCHW" else 1
    H, W = data.shape[h_dim], data.shape[h_dim + 1]
    OH = _checks.out_size(op, "height", H, kh, ph, sh, kernel_name="kernel height")
    OW = _checks.out_size(op, "width", W, kw, pw, sw, kernel_name="kernel width")
    value = te.dtypes.min_value(data.dtype) if pool_type == "max" else 0
    P = _pad2d(data, h_dim, (ph, pw, ph, pw), value)
    ry, rx = te.reduce_axis((0, kh), "ry"), te.reduce_axis((0, kw), "rx")
    shape = list(data.shape)
    shape[h_dim], shape[h_dim + 1] = OH, OW

    def window(*i):
        idx = list(i)
        idx[h_dim] = _window(i[h_dim], sh, ry)
        idx[h_dim + 1] = _window(i[h_dim + 1], sw, rx)
        return P[tuple(idx)]

    if pool_type == "max":
        return te.compute(shape, lambda *i: te.max(window(*i), axis=[ry, rx]), name="pool_max", tag="pool")
    S = te.compute(shape, lambda *i: te.sum(window(*i), axis=[ry, rx]), name="pool_sum", tag="pool")
    return te.compute(shape, lambda *i: S[i] / float(kh * kw), name="pool_avg", tag="elementwise")


@te.register_workload("softmax")
def softmax_workload(shape, axis=-1, dtype="float32"):
    """[X, Y]: softmax of X of ``shape`` along ``axis``."""
    shape = _checks.shape_list("softmax", "shape", shape)
    dtype = _checks.float_dtype("softmax", "dtype", dtype)
    X = te.placeholder(shape, dtype, "X")
    return [X, softmax(X, axis)]


@te.register_workload("pool2d")
def pool2d_workload(N, C, H, W, kernel, stride=None, padding=0, pool_type="max", layout="NCHW", dtype="float32"):
    """[data, out]: max/avg pooling of NCHW or NHWC data (see ``pool2d``)."""
    dims = dict(N=N, C=C, H=H, W=W)
    N, C, H, W = (_checks.positive_int("pool2d", n, v) for n, v in dims.items())
    _checks.choice("pool2d", "layout", layout, ("NCHW", "NHWC"))
    dtype = _checks.dtype("pool2d", "dtype", dtype)
    data = te.placeholder((N, C, H, W) if layout == "NCHW" else (N, H, W, C), dtype, "data")
    return [data, pool2d(data, kernel, stride, padding, pool_type, layout)]
