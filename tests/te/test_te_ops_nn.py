"""softmax, pool2d and the element-wise ops against NumPy."""
import itertools

import numpy as np
import pytest

import te
from te_helpers import pair

FLOAT_TOL = {"float16": dict(rtol=1e-2, atol=1e-3), "float32": dict(rtol=1e-5, atol=1e-6),
             "float64": dict(rtol=1e-12, atol=1e-12)}


def softmax_ref(x, axis):
    x = x.astype(np.float64)
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def pool_nchw_ref(x, kernel, stride, padding, pool_type):
    """Explicit windows over the padded input; avg divides by kh*kw (padding included)."""
    (kh, kw), (ph, pw) = pair(kernel), pair(padding)
    sh, sw = pair(kernel if stride is None else stride)
    fill = (-np.inf if x.dtype.kind == "f" else np.iinfo(x.dtype).min) if pool_type == "max" else 0
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (ph, ph), (pw, pw)), constant_values=fill)
    OH, OW = (xp.shape[2] - kh) // sh + 1, (xp.shape[3] - kw) // sw + 1
    out = np.empty(x.shape[:2] + (OH, OW))
    for oy, ox in itertools.product(range(OH), range(OW)):
        win = xp[:, :, oy * sh: oy * sh + kh, ox * sw: ox * sw + kw]
        out[:, :, oy, ox] = win.max(axis=(2, 3)) if pool_type == "max" else win.sum(axis=(2, 3)) / (kh * kw)
    return out


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
@pytest.mark.parametrize("shape,axis", [([13], -1), ([3, 7], -1), ([3, 7], 0), ([2, 5, 3], 1), ([2, 5, 3], -3)])
def test_softmax_matches_numpy(dtype, shape, axis):
    wl = te.create_workload("softmax", shape=shape, axis=axis, dtype=dtype)
    (x,) = wl.random_inputs(2)
    (y,) = wl.reference(x * 20)  # large values: only the max-subtracted form stays finite in float16
    assert y.dtype == np.dtype(dtype) and y.shape == tuple(shape)
    np.testing.assert_allclose(y.astype(np.float64), softmax_ref(x * 20, axis), **FLOAT_TOL[dtype])
    assert wl.flops == 5 * int(np.prod(shape))


def test_softmax_is_stable_for_huge_inputs():
    X = te.placeholder((2, 3), "float32", "X")
    x = np.array([[1000.0, 1000.0, 0.0], [-1000.0, 0.0, 1000.0]], np.float32)
    y = te.evaluate(te.ops.softmax(X), [x])
    np.testing.assert_allclose(y, [[0.5, 0.5, 0.0], [0.0, 0.0, 1.0]], atol=1e-7)


def test_softmax_has_four_stages():
    wl = te.create_workload("softmax", shape=[4, 6])
    names = [op.name for op in te.topological_order(wl.outputs)]
    assert names == ["X", "softmax_max", "softmax_exp", "softmax_sum", "softmax"]
    reductions = [op.name for op in te.topological_order(wl.outputs) if getattr(op, "is_reduction", False)]
    assert reductions == ["softmax_max", "softmax_sum"]


POOL_CASES = [
    # kernel, stride, padding
    (2, None, 0),
    (3, 2, 1),
    (3, 1, 0),
    ([3, 2], [2, 1], [1, 0]),
    (2, 3, 1),
]


@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
@pytest.mark.parametrize("pool_type", ["max", "avg"])
@pytest.mark.parametrize("kernel,stride,padding", POOL_CASES)
def test_pool2d_matches_numpy(layout, pool_type, kernel, stride, padding):
    N, C, H, W = 2, 3, 7, 11
    wl = te.create_workload("pool2d", N=N, C=C, H=H, W=W, kernel=kernel, stride=stride, padding=padding,
                            pool_type=pool_type, layout=layout)
    (x,) = wl.random_inputs(4)
    (y,) = wl.reference(x)
    if layout == "NHWC":
        assert x.shape == (N, H, W, C)
        ref = pool_nchw_ref(x.transpose(0, 3, 1, 2), kernel, stride, padding, pool_type).transpose(0, 2, 3, 1)
    else:
        ref = pool_nchw_ref(x, kernel, stride, padding, pool_type)
    assert y.shape == ref.shape
    np.testing.assert_allclose(y, ref, rtol=1e-6, atol=1e-6)
    kh, kw = pair(kernel)
    assert wl.flops == y.size * kh * kw + (y.size if pool_type == "avg" else 0)
    names = [op.name for op in te.topological_order(wl.outputs)]
    assert ("pad" in names) == (padding != 0)


@pytest.mark.parametrize("dtype", ["float16", "float64", "int32", "int8"])
def test_pool2d_max_dtypes_pad_with_lowest_value(dtype):
    wl = te.create_workload("pool2d", N=1, C=2, H=5, W=5, kernel=3, stride=2, padding=1, dtype=dtype)
    (x,) = wl.random_inputs(0)
    x = x - 10 if dtype != "int8" else np.minimum(x, -1).astype(np.int8)  # all negative: pad must not win
    (y,) = wl.reference(x.astype(dtype))
    ref = pool_nchw_ref(x.astype(dtype), 3, 2, 1, "max")
    assert y.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(y.astype(np.float64), ref)


def test_pool2d_avg_counts_padding():
    data = te.placeholder((1, 1, 2, 2), "float32", "data")
    y = te.evaluate(te.ops.pool2d(data, 2, stride=1, padding=1, pool_type="avg"), [np.ones((1, 1, 2, 2), np.float32)])
    np.testing.assert_allclose(y[0, 0], [[0.25, 0.5, 0.25], [0.5, 1.0, 0.5], [0.25, 0.5, 0.25]])


BINARY = {"add": np.add, "sub": np.subtract, "mul": np.multiply}
UNARY = {"relu": lambda x: np.maximum(x, 0), "sigmoid": lambda x: 1 / (1 + np.exp(-x)), "tanh": np.tanh, "exp": np.exp}
ELEMENTWISE_CASES = [(op, dt) for op in BINARY for dt in ["float16", "float32", "float64", "int32", "int8"]] + [
    (op, dt) for op in UNARY for dt in ["float16", "float32", "float64"]] + [("relu", "int32"), ("relu", "int8")]


@pytest.mark.parametrize("op,dtype", ELEMENTWISE_CASES)
def test_elementwise_matches_numpy(op, dtype):
    shape = [3, 7, 2]
    wl = te.create_workload("elementwise", op=op, shape=shape, dtype=dtype)
    inputs = wl.random_inputs(7)
    (y,) = wl.reference(*inputs)
    assert len(inputs) == (2 if op in BINARY else 1)
    assert y.dtype == np.dtype(dtype) and y.shape == tuple(shape)
    if op in BINARY:
        ref = BINARY[op](*inputs)  # NumPy in the same dtype: wraps like te does
    else:
        ref = UNARY[op](inputs[0].astype(np.float64) if dtype != "int8" and dtype != "int32" else inputs[0])
    if dtype.startswith("float"):
        np.testing.assert_allclose(y.astype(np.float64), ref.astype(np.float64), **FLOAT_TOL[dtype])
    else:
        np.testing.assert_array_equal(y, ref)
    assert wl.flops == int(np.prod(shape))


def test_int8_elementwise_add_wraps():
    A, B = te.placeholder((2,), "int8", "A"), te.placeholder((2,), "int8", "B")
    got = te.evaluate(te.ops.add(A, B), [np.array([127, -128], np.int8), np.array([1, -1], np.int8)])
    np.testing.assert_array_equal(got, np.array([-128, 127], np.int8))


@pytest.mark.parametrize("dtype", ["float32", "int8"])
def test_elementwise_chain_is_three_stages(dtype):
    wl = te.create_workload("elementwise_chain", shape=[5, 3], dtype=dtype)
    a, b = wl.random_inputs(1)
    (y,) = wl.reference(a, b)
    np.testing.assert_array_equal(y, np.maximum(a * b + np.asarray(1, a.dtype), 0))
    computes = [op for op in te.topological_order(wl.outputs) if isinstance(op, te.ComputeOp)]
    assert [op.name for op in computes] == ["T_mul", "T_add1", "T_relu"]
    assert not any(op.is_reduction for op in computes)
    assert wl.flops == 3 * 15


def test_plain_elementwise_functions():
    X = te.placeholder((4,), "float32", "X")
    Y = te.placeholder((4,), "float32", "Y")
    x = np.array([-2, -0.5, 0.5, 2], np.float32)
    y = np.array([1, 2, 3, 4], np.float32)
    for fn, ref in [(te.ops.add, x + y), (te.ops.sub, x - y), (te.ops.mul, x * y)]:
        np.testing.assert_allclose(te.evaluate(fn(X, Y), [x, y]), ref)
    for fn, ref in [(te.ops.relu, np.maximum(x, 0)), (te.ops.exp, np.exp(x)), (te.ops.tanh, np.tanh(x)),
                    (te.ops.sigmoid, 1 / (1 + np.exp(-x)))]:
        np.testing.assert_allclose(te.evaluate(fn(X), [x]), ref, rtol=1e-6)
