"""Accumulating in a wider dtype than the result (``acc_dtype``): the DAG, the keys, the
reference, and the tolerance the check then applies."""
from __future__ import annotations

import numpy as np
import pytest

import te
from autotune.verify import accumulator_dtype, mismatch, reduction_length, reference_checks, tolerance


def test_keys_of_workloads_without_acc_dtype_are_unchanged():
    # Keys index every stored record: a parameter added later must not change them.
    assert te.create_workload("matmul", M=8, N=8, K=8).key == (
        'matmul{"K":8,"M":8,"N":8,"dtype":"float32","out_dtype":null,"transpose_a":false,"transpose_b":false}')
    assert te.create_workload("dense", M=8, N=8, K=8).key == (
        'dense{"K":8,"M":8,"N":8,"bias":true,"dtype":"float32","out_dtype":null,"relu":true}')
    wl = te.create_workload("matmul", M=8, N=8, K=8, dtype="float16", acc_dtype="float32")
    assert '"acc_dtype":"float32"' in wl.key and "acc_dtype" in wl.params


@pytest.mark.parametrize("name,params", [
    ("matmul", dict(M=16, N=24, K=64)),
    ("batch_matmul", dict(B=2, M=16, N=24, K=64)),
    ("dense", dict(M=16, N=24, K=64, bias=True, relu=True)),
    ("dense", dict(M=16, N=24, K=64, bias=False, relu=False)),
])
def test_float16_summed_in_float32_is_a_float16_result_of_a_float32_sum(name, params):
    wl = te.create_workload(name, dtype="float16", acc_dtype="float32", **params)
    (out,) = wl.outputs
    assert out.dtype == "float16" and all(t.dtype == "float16" for t in wl.inputs)
    assert accumulator_dtype(wl.outputs) == "float32"
    inputs = wl.random_inputs(0)
    (ref,) = wl.reference(*inputs)
    x, w = (a.astype(np.float64) for a in inputs[:2])
    if name == "matmul":
        exact = x @ w
    elif name == "batch_matmul":
        exact = np.einsum("bik,bkj->bij", x, w)
    else:
        exact = x @ w.T
        if params["bias"]:
            exact = np.maximum(exact + inputs[2].astype(np.float64), 0)
    np.testing.assert_array_equal(ref, exact.astype(np.float16))  # one rounding, at the end


def test_acc_dtype_must_be_a_wider_float_than_the_inputs():
    with pytest.raises(te.DTypeError, match="acc_dtype float16 cannot accumulate float32"):
        te.create_workload("matmul", M=8, N=8, K=8, dtype="float32", acc_dtype="float16")
    with pytest.raises(te.DTypeError, match="both be float or both integer"):
        te.create_workload("matmul", M=8, N=8, K=8, dtype="float16", acc_dtype="float32", out_dtype="int32")


def test_a_float32_sum_is_checked_at_float32_precision_though_the_result_is_float16():
    wl = te.create_workload("matmul", M=32, N=32, K=4096, dtype="float16", acc_dtype="float32")
    half_sum = te.create_workload("matmul", M=32, N=32, K=4096, dtype="float16")
    loose = tolerance("float16", 4096)[0]
    tight = tolerance("float16", 4096, "float32")[0]
    assert loose > 1.0 > 0.01 > tight  # a float16 sum of 4096 terms could be off by anything
    inputs = wl.random_inputs(0)
    (ref,) = wl.reference(*inputs)
    off = ref.astype(np.float32) * np.float32(1.02)  # 2 % too large everywhere
    off = off.astype(np.float16)
    (check,) = reference_checks(wl.outputs, [ref])
    assert check(ref.copy()) is None
    assert check(off) is not None
    assert mismatch(off, ref, reduction_length(half_sum.outputs)) is None  # the float16 sum's bound lets it by
