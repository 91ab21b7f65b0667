"""Padding and 2-d convolutions (cross-correlation, as in every DL framework).

Layouts:

- ``conv2d_nchw``: data (N, C, H, W), kernel (K, C, R, S) -> (N, K, OH, OW).
- ``conv2d_nhwc``: data (N, H, W, C), kernel (R, S, C, K) -> (N, OH, OW, K).
- ``depthwise_conv2d_nchw``: data (N, C, H, W), kernel (C, multiplier, R, S) ->
  (N, C * multiplier, OH, OW); output channel ``c * multiplier + m`` reads input channel c.

``OH = (H + top + bottom - dh*(R-1) - 1) // sh + 1`` (likewise OW). ``padding`` is an int, ``[h, w]``
or ``[top, left, bottom, right]``. Padding is a separate compute named "pad" (omitted when
the padding is zero) so schedules can inline it or store it.
"""
from __future__ import annotations

import te

from . import _checks


def _window(out, stride: int, red, dilation: int = 1):
    """The input index ``out * stride + red * dilation`` without multiplications by one."""
    a = out if stride == 1 else out * stride
    b = red if dilation == 1 else red * dilation
    return a + b


def pad(X, pad_before, pad_after=None, value=0, name: str = "pad"):
    """``X`` padded with ``value``: ``pad_before[d]`` / ``pad_after[d]`` elements on each dimension.

    ``pad_after`` defaults to ``pad_before``. ``value`` must fit X's dtype (use
    ``te.dtypes.min_value(dtype)`` for a max-pooling pad). Built with ``te.if_then_else``
    so X is read only inside its bounds.
    """
    _checks.tensor("pad", "X", X)
    pad_after = pad_before if pad_after is None else pad_after
    for what, pads in (("pad_before", pad_before), ("pad_after", pad_after)):
        if not isinstance(pads, (list, tuple)) or len(pads) != X.ndim:
            raise te.ShapeError(f"pad: {what} must list one int per dimension of X {X.shape}, got {pads!r}")
        for d, p in enumerate(pads):
            if not _checks.is_int(p) or p < 0:
                raise te.ShapeError(f"pad: {what}[{d}] must be a non-negative int, got {p!r}")
    if not te.dtypes.scalar_fits(value, X.dtype):
        raise te.DTypeError(f"pad: value {value!r} is not a scalar that fits the dtype {X.dtype} of X")
    shape = tuple(n + b + a for n, b, a in zip(X.shape, pad_before, pad_after))

    def body(*idx):
        conds = []
        for i, n, b, a in zip(idx, X.shape, pad_before, pad_after):
            if b:
                conds.append(i >= b)
            if a:
                conds.append(i < n + b)
        src = X[tuple(i - b if b else i for i, b in zip(idx, pad_before))]
        return te.if_then_else(te.all_of(*conds), src, value) if conds else src

    return te.compute(shape, body, name=name, tag="pad")


def _pad2d(X, h_dim: int, pads: tuple[int, int, int, int], value=0):
    """Pad the two spatial dims of X (starting at ``h_dim``) by ``pads`` (top, left, bottom, right)."""
    if not any(pads):
        return X
    before, after = [0] * X.ndim, [0] * X.ndim
    before[h_dim], before[h_dim + 1], after[h_dim], after[h_dim + 1] = pads
    return pad(X, before, after, value)


def _weights(kernel) -> dict:
    """The compute attribute that declares the kernel constant weights (TVM's
    ``layout_free_placeholders``): a schedule may read it re-laid out, packed once at
    build time (output-channel panels for a register tile vectorized over channels)."""
    return {"layout_free_placeholders": [kernel.name]}


def _conv_params(op, stride, padding, dilation):
    """(stride pair, padding as (top, left, bottom, right), dilation pair), checked."""
    return (
        _checks.int_pair(op, "stride", stride, 1),
        _checks.padding(op, padding),
        _checks.int_pair(op, "dilation", dilation, 1),
    )


def _conv_setup(op: str, data, kernel, stride, padding, dilation, out_dtype):
    """Checks every convolution shares: (accumulator dtype, stride pair, padding (top, left,
    bottom, right), dilation pair)."""
    _checks.tensor(op, "data", data, 4)
    _checks.tensor(op, "kernel", kernel, 4)
    acc = _checks.accumulator(op, _checks.same_dtype(op, data=data, kernel=kernel), out_dtype)
    return (acc, *_conv_params(op, stride, padding, dilation))


def _out_hw(op: str, size, window, pads, stride, dilation) -> tuple[int, int]:
    """Output height and width (positive, or a clear error naming the parameters); ``pads``
    (top, left, bottom, right)."""
    top, left, bottom, right = pads
    return (_checks.out_size(op, "height", size[0], window[0], top, stride[0], dilation[0], pad_after=bottom),
            _checks.out_size(op, "width", size[1], window[1], left, stride[1], dilation[1], pad_after=right))


def _same(op: str, what: str, data, kernel, a: int, b: int) -> None:
    if a != b:
        raise te.ShapeError(f"{op}: data is {data.shape} but kernel is {kernel.shape}: {what} {a} and {b} differ")


def conv2d_nchw(data, kernel, stride=1, padding=0, dilation=1, out_dtype=None, name: str = "conv2d"):
    """2-d convolution, NCHW data and KCRS (OIHW) kernel; stride/padding/dilation an int or [h, w]."""
    op = "conv2d"
    acc, (sh, sw), pads, (dh, dw) = _conv_setup(op, data, kernel, stride, padding, dilation, out_dtype)
    (N, C, H, W), (K, Ck, R, S) = data.shape, kernel.shape
    _same(op, "input channels", data, kernel, C, Ck)
    OH, OW = _out_hw(op, (H, W), (R, S), pads, (sh, sw), (dh, dw))
    P = _pad2d(data, 2, pads)
    rc, ry, rx = te.reduce_axis((0, C), "rc"), te.reduce_axis((0, R), "ry"), te.reduce_axis((0, S), "rx")

    def body(n, k, y, x):
        a = te.cast(acc, P[n, rc, _window(y, sh, ry, dh), _window(x, sw, rx, dw)])
        return te.sum(a * te.cast(acc, kernel[k, rc, ry, rx]), axis=[rc, ry, rx])

    return te.compute((N, K, OH, OW), body, name=name, tag="conv2d_nchw", attrs=_weights(kernel))


def conv2d_nhwc(data, kernel, stride=1, padding=0, dilation=1, out_dtype=None, name: str = "conv2d"):
    """2-d convolution, NHWC data and RSCK (HWIO) kernel; stride/padding/dilation an int or [h, w]."""
    op = "conv2d"
    acc, (sh, sw), pads, (dh, dw) = _conv_setup(op, data, kernel, stride, padding, dilation, out_dtype)
    (N, H, W, C), (R, S, Ck, K) = data.shape, kernel.shape
    _same(op, "input channels", data, kernel, C, Ck)
    OH, OW = _out_hw(op, (H, W), (R, S), pads, (sh, sw), (dh, dw))
    P = _pad2d(data, 1, pads)
    ry, rx, rc = te.reduce_axis((0, R), "ry"), te.reduce_axis((0, S), "rx"), te.reduce_axis((0, C), "rc")

    def body(n, y, x, k):
        a = te.cast(acc, P[n, _window(y, sh, ry, dh), _window(x, sw, rx, dw), rc])
        return te.sum(a * te.cast(acc, kernel[ry, rx, rc, k]), axis=[ry, rx, rc])

    return te.compute((N, OH, OW, K), body, name=name, tag="conv2d_nhwc", attrs=_weights(kernel))


def depthwise_conv2d_nchw(data, kernel, stride=1, padding=0, dilation=1, out_dtype=None,
                          name: str = "depthwise_conv2d"):
    """Depthwise convolution: NCHW data, kernel (C, multiplier, R, S), output (N, C*multiplier, OH, OW)."""
    op = "depthwise_conv2d"
    acc, (sh, sw), pads, (dh, dw) = _conv_setup(op, data, kernel, stride, padding, dilation, out_dtype)
    (N, C, H, W), (Ck, Mult, R, S) = data.shape, kernel.shape
    _same(op, "channels", data, kernel, C, Ck)
    OH, OW = _out_hw(op, (H, W), (R, S), pads, (sh, sw), (dh, dw))
    P = _pad2d(data, 2, pads)
    ry, rx = te.reduce_axis((0, R), "ry"), te.reduce_axis((0, S), "rx")

    def body(n, c, y, x):
        ic = c if Mult == 1 else c // Mult
        m = 0 if Mult == 1 else c % Mult
        a = te.cast(acc, P[n, ic, _window(y, sh, ry, dh), _window(x, sw, rx, dw)])
        return te.sum(a * te.cast(acc, kernel[ic, m, ry, rx]), axis=[ry, rx])

    return te.compute((N, C * Mult, OH, OW), body, name=name, tag="depthwise_conv2d_nchw", attrs=_weights(kernel))


@te.register_workload("conv2d")
def conv2d_workload(N, C, H, W, K, R, S, stride=1, padding=0, dilation=1, layout="NCHW",
                    dtype="float32", out_dtype=None):
    """[data, kernel, out]: NCHW (data NCHW, kernel KCRS) or NHWC (data NHWC, kernel RSCK)."""
    dims = dict(N=N, C=C, H=H, W=W, K=K, R=R, S=S)
    N, C, H, W, K, R, S = (_checks.positive_int("conv2d", n, v) for n, v in dims.items())
    _checks.choice("conv2d", "layout", layout, ("NCHW", "NHWC"))
    dtype = _checks.dtype("conv2d", "dtype", dtype)
    if layout == "NCHW":
        data = te.placeholder((N, C, H, W), dtype, "data")
        kernel = te.placeholder((K, C, R, S), dtype, "kernel")
        out = conv2d_nchw(data, kernel, stride, padding, dilation, out_dtype)
    else:
        data = te.placeholder((N, H, W, C), dtype, "data")
        kernel = te.placeholder((R, S, C, K), dtype, "kernel")
        out = conv2d_nhwc(data, kernel, stride, padding, dilation, out_dtype)
    return [data, kernel, out]


@te.register_workload("depthwise_conv2d")
def depthwise_conv2d_workload(N, C, H, W, R, S, stride=1, padding=0, dilation=1, multiplier=1, dtype="float32"):
    """[data, kernel, out] in NCHW with kernel (C, multiplier, R, S)."""
    dims = dict(N=N, C=C, H=H, W=W, R=R, S=S, multiplier=multiplier)
    N, C, H, W, R, S, mult = (_checks.positive_int("depthwise_conv2d", n, v) for n, v in dims.items())
    dtype = _checks.dtype("depthwise_conv2d", "dtype", dtype)
    data = te.placeholder((N, C, H, W), dtype, "data")
    kernel = te.placeholder((C, mult, R, S), dtype, "kernel")
    return [data, kernel, depthwise_conv2d_nchw(data, kernel, stride, padding, dilation)]
