"""Winograd's F(m x m, 3 x 3) convolution (``te.ops.winograd``): the same result as the direct
convolution, within the stated rounding bound, on shapes no tile divides."""
from __future__ import annotations

import numpy as np
import pytest

import te
from te.ops import winograd

#: (N, C, H, W, K, padding): odd sizes, no tile divides the output, asymmetric padding.
SHAPES = [
    (1, 3, 7, 9, 5, 1),
    (2, 4, 8, 8, 3, 0),
    (1, 5, 10, 7, 2, [0, 1, 2, 0]),
    (1, 2, 5, 5, 6, [2, 1]),
]


def _direct_and_winograd(shape, tile, dtype):
    N, C, H, W, K, padding = shape
    data = te.placeholder((N, C, H, W), dtype, "data")
    kernel = te.placeholder((K, C, 3, 3), dtype, "kernel")
    return (data, kernel, te.ops.conv2d_nchw(data, kernel, 1, padding),
            winograd.conv2d_winograd_nchw(data, kernel, padding, tile))


@pytest.mark.parametrize("tile", winograd.TILES)
def test_the_transform_matrices_compute_a_3_tap_correlation_exactly(tile):
    BT, G, AT = winograd.transform_matrices(tile)
    rng = np.random.default_rng(tile)
    for _ in range(5):
        d, g = rng.standard_normal((tile + 2, tile + 2)), rng.standard_normal((3, 3))
        out = AT @ ((G @ g @ G.T) * (BT @ d @ BT.T)) @ AT.T
        direct = [[np.sum(d[i:i + 3, j:j + 3] * g) for j in range(tile)] for i in range(tile)]
        np.testing.assert_allclose(out, direct, rtol=0, atol=1e-12)


@pytest.mark.parametrize("tile", winograd.TILES)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_winograd_equals_the_direct_convolution_in_float64(shape, tile):
    data, kernel, direct, wino = _direct_and_winograd(shape, tile, "float64")
    assert wino.shape == direct.shape
    rng = np.random.default_rng(0)
    inputs = {data: rng.standard_normal(data.shape), kernel: rng.standard_normal(kernel.shape)}
    np.testing.assert_allclose(te.evaluate(wino, inputs), te.evaluate(direct, inputs), rtol=0, atol=1e-11)


@pytest.mark.parametrize("tile", winograd.TILES)
def test_float32_rounding_stays_within_the_stated_bound(tile):
    """The float32 DAG (every stage rounded to float32) against the exact convolution."""
    shape = (1, 16, 12, 11, 4, 1)
    data, kernel, direct, wino = _direct_and_winograd(shape, tile, "float32")
    rng = np.random.default_rng(tile)
    d = rng.uniform(-1, 1, data.shape).astype(np.float32)
    k = rng.uniform(-1, 1, kernel.shape).astype(np.float32)
    got = te.evaluate(wino, {data: d, kernel: k}).astype(np.float64)
    d64, k64 = (te.placeholder(t.shape, "float64", t.name) for t in (data, kernel))
    exact = te.evaluate(te.ops.conv2d_nchw(d64, k64, 1, 1), {d64: d.astype(np.float64), k64: k.astype(np.float64)})
    bound = winograd.rounding_bound(d, k, 1, tile, "float32")
    error = np.abs(got - exact)
    assert (error <= bound).all(), f"worst error {error.max():.3g} at bound {bound.flat[np.argmax(error)]:.3g}"
    assert error.max() > 0  # rounded, so the bound was put to a test
    # A worst case over the signs (random data lands far inside it), yet well below the values.
    assert bound.max() < (1e-3 if tile == 2 else 2e-2) * np.abs(exact).max()


def test_the_bound_grows_with_the_tile():
    rng = np.random.default_rng(1)
    d, k = rng.uniform(-1, 1, (1, 8, 8, 8)), rng.uniform(-1, 1, (4, 8, 3, 3))
    assert winograd.rounding_bound(d, k, 1, 4).max() > 2 * winograd.rounding_bound(d, k, 1, 2).max()


def test_flops_count_the_direct_convolution():
    wino = te.create_workload("conv2d_winograd", N=1, C=64, H=56, W=56, K=32, padding=1)
    direct = te.create_workload("conv2d", N=1, C=64, H=56, W=56, K=32, R=3, S=3, padding=1)
    assert wino.flops == direct.flops == 2 * 32 * 56 * 56 * 64 * 9


def test_the_workload_lists_data_kernel_output_and_stages_by_name():
    wl = te.create_workload("conv2d_winograd", N=1, C=8, H=9, W=9, K=4, padding=1, tile=2)
    assert [t.name for t in wl.inputs] == ["data", "kernel"]
    assert wl.outputs[0].shape == (1, 4, 9, 9)
    names = {op.name for op in te.topological_order(wl.outputs)}
    assert {"kernel_transform", "input_transform", "winograd_gemm", "output_transform_cols"} <= names


@pytest.mark.parametrize("kwargs, message", [
    (dict(kernel_shape=(4, 3, 5, 5)), "must be 3x3"),
    (dict(tile=3), "tile must be one of"),
    (dict(dtype="float16"), "float32 or float64"),
    (dict(dtype="int32"), "float32 or float64"),
])
def test_bad_input_is_refused_by_name(kwargs, message):
    dtype = kwargs.get("dtype", "float32")
    data = te.placeholder((1, 3, 8, 8), dtype, "data")
    kernel = te.placeholder(kwargs.get("kernel_shape", (4, 3, 3, 3)), dtype, "kernel")
    with pytest.raises((te.ShapeError, te.DTypeError), match=message):
        winograd.conv2d_winograd_nchw(data, kernel, 1, kwargs.get("tile", 2))
