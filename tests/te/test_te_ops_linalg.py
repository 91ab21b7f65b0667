"""matmul, batch_matmul and dense against NumPy, across dtypes, transposes and odd shapes."""
import numpy as np
import pytest

import te
from te_helpers import assert_matches, wide

DTYPES = ["float16", "float32", "float64", "int32", "int8"]


def expected_out_dtype(dtype):
    return "int32" if dtype == "int8" else dtype


def run(name, seed=0, **params):
    wl = te.create_workload(name, **params)
    inputs = wl.random_inputs(seed)
    (out,) = wl.reference(*inputs)
    return wl, inputs, out


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("transpose_a", [False, True])
@pytest.mark.parametrize("transpose_b", [False, True])
def test_matmul_matches_numpy(dtype, transpose_a, transpose_b):
    M, N, K = 7, 13, 5
    wl, (a, b), c = run("matmul", M=M, N=N, K=K, dtype=dtype, transpose_a=transpose_a, transpose_b=transpose_b)
    assert a.shape == ((K, M) if transpose_a else (M, K))
    assert b.shape == ((N, K) if transpose_b else (K, N))
    assert c.shape == (M, N) and c.dtype == np.dtype(expected_out_dtype(dtype))
    a2 = wide(a).T if transpose_a else wide(a)
    b2 = wide(b).T if transpose_b else wide(b)
    assert_matches(c, a2 @ b2, dtype)
    assert wl.flops == 2 * M * N * K


def test_matmul_int8_accumulates_in_int32_without_wrapping():
    A = te.placeholder((2, 64), "int8", "A")
    B = te.placeholder((64, 3), "int8", "B")
    C = te.ops.matmul(A, B)
    assert C.dtype == "int32"
    a = np.full((2, 64), 127, np.int8)
    b = np.full((64, 3), -128, np.int8)
    np.testing.assert_array_equal(te.evaluate(C, [a, b]), np.full((2, 3), 127 * -128 * 64, np.int32))


def test_matmul_float16_with_float32_accumulation():
    wl, (a, b), c = run("matmul", M=3, N=4, K=11, dtype="float16", out_dtype="float32")
    assert c.dtype == np.float32
    np.testing.assert_allclose(c, wide(a) @ wide(b), rtol=1e-5, atol=1e-5)


def test_matmul_plain_function_on_user_tensors():
    A = te.placeholder((7, 3), name="A")
    B = te.placeholder((3, 5), name="B")
    C = te.ops.matmul(A, B)
    a = np.arange(21, dtype=np.float32).reshape(7, 3)
    b = np.arange(15, dtype=np.float32).reshape(3, 5) - 7
    np.testing.assert_allclose(te.evaluate(C, [a, b]), a @ b)
    assert te.compute_to_str(C) == "matmul[i, j] = sum(A[i, k] * B[k, j], axis=[k])"


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("transpose_a,transpose_b", [(False, False), (True, False), (False, True), (True, True)])
def test_batch_matmul_matches_numpy(dtype, transpose_a, transpose_b):
    Bn, M, N, K = 3, 5, 7, 2
    wl, (a, b), c = run("batch_matmul", B=Bn, M=M, N=N, K=K, dtype=dtype,
                        transpose_a=transpose_a, transpose_b=transpose_b)
    a2 = wide(a).transpose(0, 2, 1) if transpose_a else wide(a)
    b2 = wide(b).transpose(0, 2, 1) if transpose_b else wide(b)
    assert c.shape == (Bn, M, N) and c.dtype == np.dtype(expected_out_dtype(dtype))
    assert_matches(c, np.einsum("bmk,bkn->bmn", a2, b2), dtype)
    assert wl.flops == 2 * Bn * M * N * K


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("bias,relu", [(True, True), (True, False), (False, True), (False, False)])
def test_dense_matches_numpy(dtype, bias, relu):
    M, N, K = 5, 11, 7
    wl, inputs, y = run("dense", M=M, N=N, K=K, dtype=dtype, bias=bias, relu=relu)
    x, w = inputs[0], inputs[1]
    ref = wide(x) @ wide(w).T
    if bias:
        assert inputs[2].shape == (N,) and inputs[2].dtype == np.dtype(expected_out_dtype(dtype))
        ref = ref + wide(inputs[2])
    if relu:
        ref = np.maximum(ref, 0)
    assert y.dtype == np.dtype(expected_out_dtype(dtype))
    assert_matches(y, ref, dtype)
    assert wl.flops == 2 * M * N * K + M * N * (int(bias) + int(relu))


def test_dense_reduction_is_its_own_stage_with_an_elementwise_epilogue():
    wl = te.create_workload("dense", M=4, N=6, K=8)
    (Y,) = wl.outputs
    assert Y.op.name == "dense_epilogue" and not Y.op.reduce_axis
    (dense_stage,) = [t.op for t in Y.op.input_tensors if t.op.name == "dense"]
    assert dense_stage.is_reduction
    assert [op.name for op in te.topological_order(Y)] == ["X", "W", "dense", "bias", "dense_epilogue"]
    plain = te.create_workload("dense", M=4, N=6, K=8, bias=False, relu=False)
    assert plain.outputs[0].op.name == "dense" and plain.outputs[0].op.is_reduction
    assert len(plain.args) == 3


def test_dense_plain_function():
    X = te.placeholder((3, 4), name="X")
    W = te.placeholder((2, 4), name="W")
    b = te.placeholder((2,), name="b")
    x = np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4)
    w = np.linspace(1, -2, 8, dtype=np.float32).reshape(2, 4)
    bb = np.array([0.5, -3.0], np.float32)
    np.testing.assert_allclose(te.evaluate(te.ops.dense(X, W), [x, w]), x @ w.T, rtol=1e-6)
    np.testing.assert_allclose(te.evaluate(te.ops.dense(X, W, b, relu=True), [x, w, bb]),
                               np.maximum(x @ w.T + bb, 0), rtol=1e-6)
