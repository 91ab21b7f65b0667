"""Vector math and folded reductions in the CPU backend.

Two things the compiler does not do on its own under the backend's flags: call glibc's
vector variants of the math functions (libmvec; declared only under ``__FAST_MATH__``,
which ``-fno-finite-math-only`` turns off) and vectorize a ``max``/``min`` reduction
(it would need finite math). The backend declares the variants itself and prints an
innermost reduction over a scalar accumulator with an OpenMP ``simd reduction`` clause.
Each kernel here is compared with NumPy, special values included.
"""
from __future__ import annotations

import platform
import subprocess

import numpy as np
import pytest

import backends
import schedule
import te
from schedule import ir
from sched_helpers import check, workload

X86 = platform.machine() in ("x86_64", "AMD64")


def undefined_symbols(module) -> list[str]:
    out = subprocess.run(["nm", "-D", "--undefined-only", str(module.path)], capture_output=True, text=True,
                         check=True).stdout
    return [line.split()[-1].split("@")[0] for line in out.splitlines() if line.strip()]


def vectorized_elementwise(fn, n: int, name: str = "Y"):
    X = te.placeholder((n,), "float32", "X")
    Y = te.compute((n,), lambda i: fn(X[i]), name=name)
    s = schedule.create_schedule(Y)
    s[Y].vectorize(Y.op.axis[0])
    return workload([X, Y]), s


# ---------------------------------------------------------------- vector math


@pytest.mark.skipif(not X86, reason="glibc's libmvec is x86-64 only")
def test_a_vectorized_exp_calls_the_vector_variant():
    wl, s = vectorized_elementwise(te.exp, 1000)
    module = check(s, wl)
    symbols = undefined_symbols(module)
    assert any(sym.startswith("_ZGV") and sym.endswith("_expf") for sym in symbols), symbols
    assert "expf" not in symbols  # no lane-by-lane calls left


@pytest.mark.parametrize("fn", ["exp", "log", "tanh", "erf", "sin", "cos"])
def test_vector_math_matches_numpy_on_special_values(fn):
    specials = np.array([-np.inf, np.inf, np.nan, 0.0, -0.0, 1e-30, -1e-30, 88.7, -87.3, -104.0, 89.0, 1e4, -1e4,
                         0.5, -0.5, 3.0], dtype=np.float32)
    x = np.concatenate([specials, np.linspace(-20, 20, 61, dtype=np.float32)])
    if fn == "log":
        x = np.abs(x)
    wl, s = vectorized_elementwise(getattr(te, fn), x.size)
    module = backends.build(s, wl.args, target="cpu")
    y = np.full_like(x, 12345.0)
    module(x, y)
    if fn == "erf":
        from scipy.special import erf as reference
    else:
        reference = getattr(np, fn)
    with np.errstate(all="ignore"):
        want = reference(x.astype(np.float64)).astype(np.float32)
    np.testing.assert_allclose(y, want, rtol=2e-6, atol=1e-7, equal_nan=True,
                               err_msg=f"{fn} of {x}")


# ---------------------------------------------------------------- folded reductions


def row_reduction(reducer: str, dtype: str, shape=(5, 301)):
    X = te.placeholder(shape, dtype, "X")
    k = te.reduce_axis((0, shape[1]), "k")
    R = te.compute((shape[0],), lambda i: getattr(te, reducer)(X[i, k], axis=k), name="R")
    return workload([X, R]), schedule.create_schedule(R)


def folded_loops(func) -> list[ir.For]:
    return [n for n in ir.walk(func.body) if isinstance(n, ir.For) and ir.folded_reduction(n) is not None]


@pytest.mark.parametrize("reducer, clause", [("sum", "+"), ("max", "max"), ("min", "min")])
@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64"])
def test_an_innermost_reduction_folds_into_a_scalar_and_matches(reducer, clause, dtype):
    wl, s = row_reduction(reducer, dtype)
    module = check(s, wl)
    assert f"#pragma omp simd reduction({clause}:R_acc)" in module.source
    assert len(folded_loops(module.func)) == 1


def test_a_max_over_minus_infinity_and_an_all_minus_infinity_row():
    wl, s = row_reduction("max", "float32", shape=(3, 67))
    module = backends.build(s, wl.args, target="cpu")
    x = np.random.default_rng(0).standard_normal((3, 67)).astype(np.float32)
    x[0, :] = -np.inf
    x[1, ::2] = -np.inf
    r = np.zeros(3, np.float32)
    module(x, r)
    np.testing.assert_array_equal(r, x.max(axis=1))


def test_a_reduction_whose_element_moves_with_the_loop_is_not_folded():
    """k outside, j inside: the inner loop writes a different element each iteration."""
    wl = te.create_workload("matmul", M=7, N=9, K=5)
    C = wl.outputs[0]
    s = schedule.create_schedule(C)
    i, j = C.op.axis
    (k,) = C.op.reduce_axis
    s[C].reorder(i, k, j)
    module = check(s, wl)
    assert not folded_loops(module.func)
    assert "reduction(" not in module.source


def test_a_folded_loop_is_described_as_a_vector_reduction():
    wl, s = row_reduction("sum", "float32")
    func = schedule.lower(s, wl.args)
    text = schedule.describe_lowered(func)
    assert "reduction into a scalar" in text, text


def test_softmax_rows_fold_both_reductions_and_call_vector_exp():
    wl = te.create_workload("softmax", shape=[4, 1000])
    Y = wl.outputs[0]
    s = schedule.create_schedule(Y)
    stages = {op.name: op.output(0) for op in te.topological_order(wl.outputs)}
    for name in ("softmax_max", "softmax_exp", "softmax_sum"):
        s[stages[name]].compute_at(s[Y], Y.op.axis[0])
    s[stages["softmax_exp"]].vectorize(stages["softmax_exp"].op.axis[1])
    s[Y].vectorize(Y.op.axis[1])
    module = check(s, wl)
    assert "reduction(max:softmax_max_acc)" in module.source
    assert "reduction(+:softmax_sum_acc)" in module.source
    if X86:
        assert any(sym.startswith("_ZGV") for sym in undefined_symbols(module))
