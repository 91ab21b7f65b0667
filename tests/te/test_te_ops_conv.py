"""conv2d (NCHW, NHWC), depthwise_conv2d and pad against independent NumPy convolutions."""
import itertools

import numpy as np
import pytest

import te
from te_helpers import assert_matches, pair, wide


def sides(padding):
    """Padding as (top, left, bottom, right): an int, [h, w] or the four sides."""
    if not isinstance(padding, int) and len(padding) == 4:
        return tuple(padding)
    ph, pw = pair(padding)
    return ph, pw, ph, pw


def conv2d_nchw_ref(x, w, stride, padding, dilation):
    """Sliding-window convolution: np.pad, then one strided slice per kernel tap."""
    (sh, sw), (dh, dw) = pair(stride), pair(dilation)
    top, left, bottom, right = sides(padding)
    x = np.pad(wide(x), ((0, 0), (0, 0), (top, bottom), (left, right)))
    w = wide(w)
    N, C, H, W = x.shape
    K, _, R, S = w.shape
    OH, OW = (H - dh * (R - 1) - 1) // sh + 1, (W - dw * (S - 1) - 1) // sw + 1
    out = np.zeros((N, K, OH, OW), dtype=x.dtype)
    for r, s in itertools.product(range(R), range(S)):
        patch = x[:, :, r * dh: r * dh + sh * (OH - 1) + 1: sh, s * dw: s * dw + sw * (OW - 1) + 1: sw]
        out += np.einsum("nchw,kc->nkhw", patch, w[:, :, r, s])
    return out


def conv2d_naive(x, w, stride, padding, dilation):
    """Seven nested loops; only to check the sliding-window reference itself."""
    (sh, sw), (dh, dw) = pair(stride), pair(dilation)
    ph, pw, bottom, right = sides(padding)
    N, C, H, W = x.shape
    K, _, R, S = w.shape
    OH, OW = (H + ph + bottom - dh * (R - 1) - 1) // sh + 1, (W + pw + right - dw * (S - 1) - 1) // sw + 1
    out = np.zeros((N, K, OH, OW))
    for n, k, oy, ox, c, r, s in itertools.product(range(N), range(K), range(OH), range(OW), range(C), range(R), range(S)):
        iy, ix = oy * sh + r * dh - ph, ox * sw + s * dw - pw
        if 0 <= iy < H and 0 <= ix < W:
            out[n, k, oy, ox] += float(x[n, c, iy, ix]) * float(w[k, c, r, s])
    return out


def depthwise_ref(x, w, stride, padding, dilation):
    C, mult = w.shape[:2]
    outs = [conv2d_nchw_ref(x[:, c: c + 1], w[c, m][None, None], stride, padding, dilation)
            for c in range(C) for m in range(mult)]
    return np.concatenate(outs, axis=1)


def test_sliding_window_reference_matches_naive_loops():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 3, 7, 6))
    w = rng.standard_normal((2, 3, 3, 2))
    for args in [(1, 0, 1), ([2, 1], [1, 2], [1, 2]), (3, 2, 2), (1, [0, 2, 1, 0], 1), ([1, 2], [2, 0, 0, 1], 2)]:
        np.testing.assert_allclose(conv2d_nchw_ref(x, w, *args), conv2d_naive(x, w, *args), rtol=1e-12)


CONV_CASES = [
    # stride, padding, dilation, R, S
    (1, 0, 1, 3, 3),
    (1, 1, 1, 3, 3),
    (2, 1, 1, 3, 3),
    (2, 0, 1, 1, 1),
    (1, 2, 2, 3, 3),
    ([2, 1], [0, 1], [1, 2], 3, 2),
    (3, [1, 0], 1, 5, 3),
    (1, [0, 1, 2, 0], 1, 3, 3),  # asymmetric: [top, left, bottom, right], as ONNX models pad
    ([2, 1], [1, 0, 0, 2], [1, 2], 3, 2),
]


@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
@pytest.mark.parametrize("stride,padding,dilation,R,S", CONV_CASES)
def test_conv2d_matches_numpy(layout, stride, padding, dilation, R, S):
    N, C, H, W, K = 2, 3, 11, 7, 5
    wl = te.create_workload("conv2d", N=N, C=C, H=H, W=W, K=K, R=R, S=S, stride=stride,
                            padding=padding, dilation=dilation, layout=layout)
    x, w = wl.random_inputs(3)
    (out,) = wl.reference(x, w)
    if layout == "NHWC":
        assert x.shape == (N, H, W, C) and w.shape == (R, S, C, K)
        ref = conv2d_nchw_ref(x.transpose(0, 3, 1, 2), w.transpose(3, 2, 0, 1), stride, padding, dilation)
        ref = ref.transpose(0, 2, 3, 1)
    else:
        assert x.shape == (N, C, H, W) and w.shape == (K, C, R, S)
        ref = conv2d_nchw_ref(x, w, stride, padding, dilation)
    assert out.shape == ref.shape
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)
    OH, OW = (ref.shape[2], ref.shape[3]) if layout == "NCHW" else ref.shape[1:3]
    assert wl.flops == 2 * N * K * OH * OW * C * R * S


@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
@pytest.mark.parametrize("dtype", ["float16", "float32", "float64", "int32", "int8"])
def test_conv2d_dtypes(layout, dtype):
    wl = te.create_workload("conv2d", N=1, C=2, H=7, W=5, K=3, R=3, S=3, padding=1, stride=[1, 2],
                            layout=layout, dtype=dtype)
    x, w = wl.random_inputs(0)
    (out,) = wl.reference(x, w)
    assert out.dtype == np.dtype("int32" if dtype == "int8" else dtype)
    if layout == "NHWC":
        ref = conv2d_nchw_ref(x.transpose(0, 3, 1, 2), w.transpose(3, 2, 0, 1), [1, 2], 1, 1).transpose(0, 2, 3, 1)
    else:
        ref = conv2d_nchw_ref(x, w, [1, 2], 1, 1)
    assert_matches(out, ref, dtype)


def test_conv2d_int8_accumulates_in_int32():
    data = te.placeholder((1, 4, 3, 3), "int8", "data")
    kernel = te.placeholder((1, 4, 3, 3), "int8", "kernel")
    out = te.ops.conv2d_nchw(data, kernel)
    assert out.dtype == "int32"
    got = te.evaluate(out, [np.full((1, 4, 3, 3), -128, np.int8), np.full((1, 4, 3, 3), 127, np.int8)])
    assert got.item() == -128 * 127 * 36


@pytest.mark.parametrize("padding,has_pad", [(0, False), (1, True), ([0, 2], True)])
def test_conv2d_pad_is_a_separate_select_stage(padding, has_pad):
    wl = te.create_workload("conv2d", N=1, C=2, H=6, W=6, K=2, R=3, S=3, padding=padding)
    names = [op.name for op in te.topological_order(wl.outputs)]
    assert names == (["data", "pad", "kernel", "conv2d"] if has_pad else ["data", "kernel", "conv2d"])
    if has_pad:
        pad_op = wl.outputs[0].op.input_tensors[0].op
        assert pad_op.name == "pad" and isinstance(pad_op.body, te.Select) and not pad_op.is_reduction


@pytest.mark.parametrize("stride,padding,dilation,mult", [(1, 0, 1, 1), (1, 1, 1, 2), (2, 1, 1, 3), ([1, 2], [2, 1], 2, 2),
                                                         (1, [1, 0, 0, 2], 1, 1)])
@pytest.mark.parametrize("dtype", ["float32", "int8"])
def test_depthwise_conv2d_matches_numpy(stride, padding, dilation, mult, dtype):
    N, C, H, W, R, S = 2, 3, 9, 7, 3, 3
    wl = te.create_workload("depthwise_conv2d", N=N, C=C, H=H, W=W, R=R, S=S, stride=stride,
                            padding=padding, dilation=dilation, multiplier=mult, dtype=dtype)
    x, w = wl.random_inputs(5)
    assert w.shape == (C, mult, R, S)
    (out,) = wl.reference(x, w)
    ref = depthwise_ref(x, w, stride, padding, dilation)
    assert out.shape == ref.shape == (N, C * mult) + ref.shape[2:]
    assert_matches(out, ref, "float32" if dtype == "float32" else "int32")
    assert wl.flops == 2 * N * C * mult * ref.shape[2] * ref.shape[3] * R * S
    assert ("pad" in [op.name for op in te.topological_order(wl.outputs)]) == (padding != 0)


def test_conv2d_flops_ignore_the_pad_stage():
    wl = te.create_workload("conv2d", N=1, C=3, H=8, W=8, K=4, R=3, S=3, padding=1)
    assert wl.flops == 2 * 1 * 4 * 8 * 8 * 3 * 3 * 3


@pytest.mark.parametrize("dtype", ["float32", "int8", "float64"])
def test_pad_plain_function(dtype):
    X = te.placeholder((3, 4, 2), dtype, "X")
    P = te.ops.pad(X, [1, 0, 2], [0, 3, 1], value=5)
    x = (np.arange(24) - 12).reshape(3, 4, 2).astype(dtype)
    ref = np.pad(x, ((1, 0), (0, 3), (2, 1)), constant_values=5)
    got = te.evaluate(P, [x])
    assert got.dtype == x.dtype
    np.testing.assert_array_equal(got, ref)
    assert te.flop_count(P) == 0


def test_pad_symmetric_default_and_lowest_value():
    X = te.placeholder((2, 3), "float32", "X")
    P = te.ops.pad(X, [1, 2], value=te.dtypes.min_value("float32"))
    x = np.ones((2, 3), np.float32)
    np.testing.assert_array_equal(te.evaluate(P, [x]), np.pad(x, ((1, 1), (2, 2)), constant_values=-np.inf))


def test_conv2d_plain_functions_agree_across_layouts():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 3, 9, 8)).astype(np.float32)
    w = rng.standard_normal((4, 3, 3, 2)).astype(np.float32)
    d1, k1 = te.placeholder(x.shape, name="d"), te.placeholder(w.shape, name="k")
    d2 = te.placeholder(x.transpose(0, 2, 3, 1).shape, name="d")
    k2 = te.placeholder(w.transpose(2, 3, 1, 0).shape, name="k")
    a = te.evaluate(te.ops.conv2d_nchw(d1, k1, stride=2, padding=[1, 0], dilation=[1, 2]), [x, w])
    b = te.evaluate(te.ops.conv2d_nhwc(d2, k2, stride=2, padding=[1, 0], dilation=[1, 2]),
                    [x.transpose(0, 2, 3, 1).copy(), w.transpose(2, 3, 1, 0).copy()])
    np.testing.assert_allclose(a, b.transpose(0, 3, 1, 2), rtol=1e-5, atol=1e-5)
