"""Semantics of the NumPy reference evaluator, which every code generator must match."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import te


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(-1000, 1000), st.integers(-50, 50).filter(bool)), min_size=1, max_size=20))
def test_floordiv_and_floormod_follow_python(pairs):
    a = np.array([p[0] for p in pairs], np.int32)
    b = np.array([p[1] for p in pairs], np.int32)
    A, B = te.placeholder(a.shape, "int32", "A"), te.placeholder(b.shape, "int32", "B")
    q = te.compute(a.shape, lambda i: A[i] // B[i], name="q")
    r = te.compute(a.shape, lambda i: A[i] % B[i], name="r")
    got_q, got_r = te.evaluate([q, r], [a, b])
    assert got_q.tolist() == [x // y for x, y in pairs]
    assert got_r.tolist() == [x % y for x, y in pairs]


def test_floordiv_by_literal_on_negative_index_expression():
    # (i - 5) // 2 and % 2 over i in [0, 6): the index arithmetic itself is floor-based.
    out = te.compute((6, 2), lambda i, j: te.if_then_else(te.equal(j, 0), (i - 5) // 2, (i - 5) % 2), name="o")
    got = te.evaluate(out, [])
    assert got[:, 0].tolist() == [(i - 5) // 2 for i in range(6)]
    assert got[:, 1].tolist() == [(i - 5) % 2 for i in range(6)]


def test_integer_division_by_zero_is_an_error():
    A = te.placeholder((2,), "int32", "A")
    B = te.placeholder((2,), "int32", "B")
    q = te.compute((2,), lambda i: A[i] // B[i], name="q")
    with pytest.raises(te.EvaluationError, match="division by zero"):
        te.evaluate(q, [np.array([1, 2], np.int32), np.array([1, 0], np.int32)])


def test_float_to_int_cast_truncates_toward_zero():
    F = te.placeholder((6,), "float32", "F")
    out = te.compute((6,), lambda i: te.cast("int32", F[i]), name="out")
    got = te.evaluate(out, [np.array([-2.9, -1.5, -0.5, 0.5, 1.5, 2.9], np.float32)])
    assert got.dtype == np.int32 and got.tolist() == [-2, -1, 0, 0, 1, 2]


def test_int8_arithmetic_wraps():
    X = te.placeholder((4,), "int8", "X")
    out = te.compute((4,), lambda i: X[i] * 2 + 100, name="out")
    x = np.array([100, -100, 13, -128], np.int8)
    expected = [((v * 2 + 100 + 128) % 256) - 128 for v in x.tolist()]
    got = te.evaluate(out, [x])
    assert got.dtype == np.int8 and got.tolist() == expected


def test_int8_sum_wraps_but_int32_accumulation_does_not():
    X = te.placeholder((8,), "int8", "X")
    k = te.reduce_axis((0, 8), "k")
    narrow = te.compute((1,), lambda i: te.sum(X[k], axis=k), name="narrow")
    k2 = te.reduce_axis((0, 8), "k")
    wide = te.compute((1,), lambda i: te.sum(te.cast("int32", X[k2]), axis=k2), name="wide")
    x = np.full(8, 100, np.int8)
    n, w = te.evaluate([narrow, wide], [x])
    assert n.item() == ((800 + 128) % 256) - 128 and w.item() == 800


def test_max_over_all_false_where_gives_identity():
    F = te.placeholder((4,), "float32", "F")
    k = te.reduce_axis((0, 4), "k")
    mx = te.compute((2,), lambda i: te.max(F[k], axis=k, where=k < 0), name="mx")
    k2 = te.reduce_axis((0, 4), "k")
    mn = te.compute((2,), lambda i: te.min(F[k2], axis=k2, where=k2 > 10), name="mn")
    I = te.placeholder((4,), "int8", "I")
    k3 = te.reduce_axis((0, 4), "k")
    imx = te.compute((1,), lambda i: te.max(I[k3], axis=k3, where=k3 > 10), name="imx")
    got_max, got_min = te.evaluate([mx, mn], [np.ones(4, np.float32)])
    assert np.all(np.isneginf(got_max)) and np.all(np.isposinf(got_min))
    assert te.evaluate(imx, [np.zeros(4, np.int8)]).item() == -128


def test_sum_with_where_condition():
    F = te.placeholder((3, 6), "float32", "F")
    k = te.reduce_axis((0, 6), "k")
    # Lower triangle incl. diagonal: sum over k <= i.
    out = te.compute((3,), lambda i: te.sum(F[i, k], axis=k, where=k <= i), name="out")
    f = np.arange(18, dtype=np.float32).reshape(3, 6)
    np.testing.assert_allclose(te.evaluate(out, [f]), [f[i, : i + 1].sum() for i in range(3)])
    k2 = te.reduce_axis((0, 6), "k")
    none = te.compute((3,), lambda i: te.sum(F[i, k2], axis=k2, where=k2 > 100), name="none")
    np.testing.assert_array_equal(te.evaluate(none, [f]), np.zeros(3, np.float32))


def test_where_guards_reads_in_the_reduction_source():
    F = te.placeholder((4,), "float32", "F")
    k = te.reduce_axis((0, 8), "k")
    out = te.compute((1,), lambda i: te.sum(F[k], axis=k, where=k < 4), name="out")  # F[4..7] never taken
    assert te.evaluate(out, [np.ones(4, np.float32)]).item() == 4.0


def test_out_of_bounds_read_in_untaken_branch_is_fine():
    A = te.placeholder((4,), "float32", "A")
    out = te.compute((6,), lambda i: te.if_then_else(i < 4, A[i], -1.0), name="out")
    got = te.evaluate(out, [np.arange(4, dtype=np.float32)])
    assert got.tolist() == [0, 1, 2, 3, -1, -1]


def test_out_of_bounds_read_in_taken_branch_raises():
    A = te.placeholder((4,), "float32", "A")
    out = te.compute((6,), lambda i: te.if_then_else(i < 5, A[i], -1.0), name="out")
    with pytest.raises(te.EvaluationError, match=r"out-of-bounds read A\[4\]"):
        te.evaluate(out, [np.arange(4, dtype=np.float32)])
    plain = te.compute((5,), lambda i: A[i], name="plain")
    with pytest.raises(te.EvaluationError, match="out-of-bounds"):
        te.evaluate(plain, [np.arange(4, dtype=np.float32)])


def test_short_circuit_logical_and_guards_reads():
    A = te.placeholder((3,), "int32", "A")
    out = te.compute((5,), lambda i: te.if_then_else((i < 3) & (A[te.min(i, 2)] > 0), 1, 0), name="out")
    got = te.evaluate(out, [np.array([1, -1, 2], np.int32)])
    assert got.tolist() == [1, 0, 1, 0, 0]


def test_reduce_axis_with_nonzero_start():
    A = te.placeholder((10,), "float64", "A")
    k = te.reduce_axis((3, 7), "k")
    out = te.compute((2,), lambda i: te.sum(A[k + i], axis=k), name="out")
    a = np.arange(10, dtype=np.float64) ** 2
    np.testing.assert_allclose(te.evaluate(out, [a]), [a[3:7].sum(), a[4:8].sum()])
    # A product of plain reads with a shifted axis must not take a shortcut that ignores the start.
    B = te.placeholder((10, 2), "float32", "B")
    C = te.placeholder((10, 2), "float32", "C")
    k2 = te.reduce_axis((2, 10), "k")
    dot = te.compute((2,), lambda j: te.sum(B[k2, j] * C[k2, j], axis=k2), name="dot")
    b = np.arange(20, dtype=np.float32).reshape(10, 2)
    np.testing.assert_allclose(te.evaluate(dot, [b, b]), (b[2:] * b[2:]).sum(axis=0))


def test_float16_sum_accumulates_accurately():
    H = te.placeholder((4096,), "float16", "H")
    k = te.reduce_axis((0, 4096), "k")
    out = te.compute((1,), lambda i: te.sum(H[k], axis=k), name="out")
    # A float16 accumulator would stall at 2048 (2048 + 1 rounds back to 2048).
    h = np.ones(4096, np.float16)
    assert te.evaluate(out, [h]).item() == 4096.0


def test_evaluate_accepts_a_mapping_and_returns_lists_for_lists():
    A = te.placeholder((2,), "float32", "A")
    B = te.compute((2,), lambda i: A[i] * 2.0, name="B")
    C = te.compute((2,), lambda i: B[i] + A[i], name="C")
    a = np.array([1, 2], np.float32)
    b, c = te.evaluate([B, C], {A: a})
    assert b.tolist() == [2, 4] and c.tolist() == [3, 6]
    assert isinstance(te.evaluate(C, [a]), np.ndarray)


def test_math_functions():
    F = te.placeholder((3,), "float64", "F")
    f = np.array([0.25, 1.0, 2.5])
    cases = {te.exp: np.exp, te.log: np.log, te.sqrt: np.sqrt, te.tanh: np.tanh, te.sin: np.sin,
             te.cos: np.cos, te.floor: np.floor, te.ceil: np.ceil, te.rsqrt: lambda x: 1 / np.sqrt(x)}
    for fn, ref in cases.items():
        out = te.compute((3,), lambda i: fn(F[i]), name="out")
        np.testing.assert_allclose(te.evaluate(out, [f]), ref(f), rtol=1e-12)
    I = te.placeholder((3,), "int32", "I")
    absolute = te.compute((3,), lambda i: te.abs(I[i]), name="abs")
    assert te.evaluate(absolute, [np.array([-3, 0, 4], np.int32)]).tolist() == [3, 0, 4]
