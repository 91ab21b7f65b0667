"""``te.softmax_sum``, the one-pass weighted sum of an online softmax, and
``te.ops.flash_attention``, attention over blocks of keys built on it: their reference
values against NumPy written out here, their errors, and their JSON round trip."""
from __future__ import annotations

import math

import numpy as np
import pytest

import te


def _rows(values, logits, mask=None):
    """sum(values * exp(logits - max(logits))) per row over the points of ``mask``, in float64."""
    v, lg = values.astype(np.float64), logits.astype(np.float64)
    out = np.zeros(v.shape[0])
    for r in range(v.shape[0]):
        keep = np.ones(v.shape[1], bool) if mask is None else mask[r]
        if keep.any():
            top = lg[r, keep].max()
            out[r] = np.sum(v[r, keep] * np.exp(lg[r, keep] - top))
    return out


def _weighted_rows(rows=5, cols=33, where=None):
    A = te.placeholder((rows, cols), "float32", "A")
    L = te.placeholder((rows, cols), "float32", "L")
    k = te.reduce_axis((0, cols), "k")
    C = te.compute((rows,), lambda i: te.softmax_sum(A[i, k], L[i, k] * 3.0, axis=k,
                                                     where=None if where is None else where(i, k)), name="C")
    return A, L, C


def test_evaluates_the_sum_weighted_by_the_softmax_numerator():
    A, L, C = _weighted_rows()
    rng = np.random.default_rng(0)
    a = rng.standard_normal((5, 33)).astype(np.float32)
    lg = (rng.standard_normal((5, 33)) * 20).astype(np.float32)  # exp(3 * lg) alone overflows
    got = te.evaluate([C], {A: a, L: lg})[0]
    np.testing.assert_allclose(got, _rows(a, 3.0 * lg), rtol=2e-6)
    assert np.all(np.isfinite(got))


def test_points_outside_where_are_left_out_and_an_empty_row_sums_to_zero():
    A, L, C = _weighted_rows(where=lambda i, k: k < i * 8)  # row 0 has no point
    rng = np.random.default_rng(1)
    a = rng.standard_normal((5, 33)).astype(np.float32)
    lg = rng.standard_normal((5, 33)).astype(np.float32)
    mask = np.arange(33)[None, :] < (np.arange(5) * 8)[:, None]
    got = te.evaluate([C], {A: a, L: lg})[0]
    assert got[0] == 0.0
    np.testing.assert_allclose(got, _rows(a, 3.0 * lg, mask), rtol=2e-6)


def test_refuses_integers_mixed_dtypes_and_nested_reductions():
    A = te.placeholder((4, 8), "float32", "A")
    I = te.placeholder((4, 8), "int32", "I")
    D = te.placeholder((4, 8), "float64", "D")
    k = te.reduce_axis((0, 8), "k")
    with pytest.raises(te.ReductionError, match="floats of one dtype, got int32 and int32"):
        te.compute((4,), lambda i: te.softmax_sum(I[i, k], I[i, k], axis=k))
    with pytest.raises(te.ReductionError, match="floats of one dtype, got float32 and float64"):
        te.compute((4,), lambda i: te.softmax_sum(A[i, k], D[i, k], axis=k))
    k2 = te.reduce_axis((0, 8), "k2")
    with pytest.raises(te.ReductionError, match="nested reductions"):
        te.compute((4,), lambda i: te.softmax_sum(A[i, k], te.sum(A[i, k2], axis=k2), axis=k))
    with pytest.raises(te.ReductionError, match="axis="):
        te.softmax_sum(A[0, 0], A[0, 0])


def test_prints_and_round_trips_through_json_with_its_logit():
    A, L, C = _weighted_rows()
    assert "softmax_sum(A[i, k], L[i, k] * 3.0f, axis=[k])" in te.compute_to_str(C)
    wl = te.Workload("weighted", {}, [A, L, C], 2)
    text = te.workload_to_json(wl)
    back = te.workload_from_json(text)
    assert te.workload_to_json(back) == text
    body = back.outputs[0].op.body
    assert body.combiner == "softmax_sum" and body.logit is not None
    rng = np.random.default_rng(2)
    a, lg = (rng.standard_normal((5, 33)).astype(np.float32) for _ in range(2))
    np.testing.assert_array_equal(back.reference(a, lg)[0], wl.reference(a, lg)[0])
    # the logit is part of the DAG's identity: another logit, another hash
    k = te.reduce_axis((0, 33), "k")
    other = te.compute((5,), lambda i: te.softmax_sum(A[i, k], L[i, k] * 2.0, axis=k), name="C")
    assert te.Workload("weighted", {}, [A, L, other], 2).dag_hash != wl.dag_hash


# ---------------------------------------------------------------- flash_attention


def attention_np(q, k, v, causal):
    q, k, v = (x.astype(np.float64) for x in (q, k, v))
    s = np.einsum("hid,hjd->hij", q, k) / math.sqrt(q.shape[-1])
    if causal:
        s = np.where(np.tri(s.shape[1], dtype=bool), s, -np.inf)
    p = np.exp(s - s.max(axis=-1, keepdims=True))
    return np.einsum("hij,hjd->hid", p / p.sum(axis=-1, keepdims=True), v)


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("block", [16, 32, 96])
def test_flash_attention_computes_attention(causal, block):
    Q, K, V = (te.placeholder((2, 96, 8), "float32", n) for n in "QKV")
    O = te.ops.flash_attention(Q, K, V, causal, block)
    rng = np.random.default_rng(block)
    q, k, v = (rng.standard_normal((2, 96, 8)).astype(np.float32) * 3 for _ in range(3))
    got = te.evaluate([O], {Q: q, K: k, V: v})[0]
    np.testing.assert_allclose(got, attention_np(q, k, v, causal), rtol=2e-5, atol=2e-5)
    names = [op.name for op in te.topological_order([O])]
    assert names[-2:] == ["flash_combine", "attention"]
    assert O.op.input_tensors[0].shape == (2, 96, 2, 8)  # the numerator, then the normalizer


def test_flash_attention_errors_name_the_op():
    Q, K, V = (te.placeholder((2, 96, 8), "float32", n) for n in "QKV")
    with pytest.raises(te.ShapeError, match="flash_attention: block 64 must divide the sequence length 96"):
        te.ops.flash_attention(Q, K, V, block=64)
    with pytest.raises(te.TEError, match="flash_attention"):
        te.ops.flash_attention(Q, K, V, block=0)
    with pytest.raises(te.TEError, match="flash_attention"):
        te.ops.flash_attention(Q, K, te.placeholder((2, 96, 4), "float32", "V"))
