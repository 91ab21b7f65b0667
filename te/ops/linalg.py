"""Matrix products: matmul, batch_matmul, dense (+ bias + relu epilogue).

Layouts (row-major, as in TVM topi):

- ``matmul``: A is (M, K), or (K, M) with ``transpose_a``; B is (K, N), or (N, K) with
  ``transpose_b``; C is (M, N).
- ``batch_matmul``: the same with a leading batch dimension on A, B and C (equal batch
  extents, no broadcasting).
- ``dense``: X (M, K), W (N, K) (one weight row per output), bias (N,); Y (M, N).

Accumulation: integer inputs narrower than 32 bits accumulate in int32 by default; when
``out_dtype`` differs from the input dtype both operands are cast to it *before* the
multiply (so int8 x int8 cannot wrap in int8), and the result is in that dtype.
``acc_dtype`` separates the two: the product accumulates in ``acc_dtype`` and the result is
cast to ``out_dtype`` (default: the input dtype) by an element-wise stage after the
reduction (dense's epilogue, bias and relu applied before the cast). float16 inputs with
``acc_dtype="float32"`` are what fp16 GEMM libraries compute: a float16 result summed in
float32.
"""
from __future__ import annotations

import te

from . import _checks


def _operand(X, dtype: str, *index):
    """``X[index]`` converted to the accumulation ``dtype``."""
    return te.cast(dtype, X[index])


def _inner(op: str, A, B, ka: int, kb: int) -> None:
    if ka != kb:
        raise te.ShapeError(
            f"{op}: A is {A.shape} but B is {B.shape}: inner dimensions {ka} and {kb} differ"
        )


def matmul(A, B, transpose_a: bool = False, transpose_b: bool = False, out_dtype=None, name: str = "matmul",
           acc_dtype=None):
    """``C = op(A) @ op(B)`` for 2-d A and B; see the module docstring for layouts and dtypes."""
    _checks.tensor("matmul", "A", A, 2)
    _checks.tensor("matmul", "B", B, 2)
    dtype = _checks.same_dtype("matmul", A=A, B=B)
    acc, out = _checks.accumulator_and_output("matmul", dtype, out_dtype, acc_dtype)
    (K, M) = A.shape if transpose_a else A.shape[::-1]
    (N, Kb) = B.shape if transpose_b else B.shape[::-1]
    _inner("matmul", A, B, K, Kb)
    k = te.reduce_axis((0, K), "k")
    a = (lambda i: _operand(A, acc, k, i)) if transpose_a else (lambda i: _operand(A, acc, i, k))
    b = (lambda j: _operand(B, acc, j, k)) if transpose_b else (lambda j: _operand(B, acc, k, j))
    C = te.compute((M, N), lambda i, j: te.sum(a(i) * b(j), axis=k), name=_reduction_name(name, acc, out),
                   tag="matmul")
    return _cast_result(C, out, name)


def batch_matmul(A, B, transpose_a: bool = False, transpose_b: bool = False, out_dtype=None,
                 name: str = "batch_matmul", acc_dtype=None):
    """``C[b] = op(A[b]) @ op(B[b])`` for 3-d A and B with equal batch extents."""
    _checks.tensor("batch_matmul", "A", A, 3)
    _checks.tensor("batch_matmul", "B", B, 3)
    dtype = _checks.same_dtype("batch_matmul", A=A, B=B)
    acc, out = _checks.accumulator_and_output("batch_matmul", dtype, out_dtype, acc_dtype)
    if A.shape[0] != B.shape[0]:
        raise te.ShapeError(
            f"batch_matmul: A is {A.shape} but B is {B.shape}: batch extents {A.shape[0]} and {B.shape[0]} differ"
        )
    (K, M) = A.shape[1:] if transpose_a else A.shape[:0:-1]
    (N, Kb) = B.shape[1:] if transpose_b else B.shape[:0:-1]
    _inner("batch_matmul", A, B, K, Kb)
    k = te.reduce_axis((0, K), "k")
    a = (lambda b, i: _operand(A, acc, b, k, i)) if transpose_a else (lambda b, i: _operand(A, acc, b, i, k))
    bb = (lambda b, j: _operand(B, acc, b, j, k)) if transpose_b else (lambda b, j: _operand(B, acc, b, k, j))
    C = te.compute((A.shape[0], M, N), lambda b, i, j: te.sum(a(b, i) * bb(b, j), axis=k),
                   name=_reduction_name(name, acc, out), tag="batch_matmul")
    return _cast_result(C, out, name)


def _reduction_name(name: str, acc: str, out: str) -> str:
    """The reduction stage's name: the op's, or with a cast after it, ``<name>_acc``."""
    return name if acc == out else f"{name}_acc"


def _cast_result(C, out: str, name: str):
    """``C`` itself, or an element-wise stage ``name`` casting it to ``out`` (an epilogue
    the schedule fuses into the reduction's tiles)."""
    if C.dtype == out:
        return C
    return te.compute(C.shape, lambda *i: te.cast(out, C[i]), name=name, tag="elementwise")


def dense(X, W, bias=None, relu: bool = False, out_dtype=None, acc_dtype=None, name: str = "dense"):
    """``Y = X @ W.T (+ bias) (then relu)``: X (M, K), W (N, K), bias (N,) of the output dtype.

    The product is its own reduction stage named ``name`` ("dense"); bias and relu form one
    element-wise stage "<name>_epilogue" reading it (so schedules can inline or
    compute_at it). Without bias and relu the "dense" stage is the result. With an
    ``acc_dtype`` wider than the output, the epilogue adds the bias and applies relu in
    the accumulator's dtype and casts the result (a "dense_epilogue" stage even without
    bias and relu).
    """
    _checks.tensor("dense", "X", X, 2)
    _checks.tensor("dense", "W", W, 2)
    _checks.flag("dense", "relu", relu)
    dtype = _checks.same_dtype("dense", X=X, W=W)
    acc, out = _checks.accumulator_and_output("dense", dtype, out_dtype, acc_dtype)
    (M, K), (N, Kw) = X.shape, W.shape
    if K != Kw:
        raise te.ShapeError(f"dense: X is {X.shape} but W is {W.shape}: reduction dimensions {K} and {Kw} differ")
    if bias is not None:
        _checks.tensor("dense", "bias", bias, 1)
        if bias.shape != (N,):
            raise te.ShapeError(f"dense: bias must have shape ({N},) to match W {W.shape}, got {bias.shape}")
        if bias.dtype != out:
            raise te.DTypeError(f"dense: bias is {bias.dtype} but the output is {out}; cast one of them first")
    k = te.reduce_axis((0, K), "k")
    # W is a layer's weights, fixed before the kernel runs: the schedule may choose its layout
    # and pack it once, at build time (TVM's layout_free_placeholders; schedule.space).
    Y = te.compute(
        (M, N), lambda i, j: te.sum(_operand(X, acc, i, k) * _operand(W, acc, j, k), axis=k),
        name=name, tag="dense", attrs={"layout_free_placeholders": [W.name]},
    )
    if bias is None and not relu and out == acc:
        return Y

    def epilogue(i, j):
        v = Y[i, j] if bias is None else Y[i, j] + te.cast(acc, bias[j])
        v = te.max(v, 0) if relu else v
        return v if out == acc else te.cast(out, v)

    return te.compute((M, N), epilogue, name=f"{name}_epilogue", tag="elementwise")


@te.register_workload("matmul", keyed_only_when_set=("acc_dtype",))
def matmul_workload(M, N, K, dtype="float32", transpose_a=False, transpose_b=False, out_dtype=None,
                    acc_dtype=None):
    """[A, B, C] with C = op(A) @ op(B) of shape (M, N)."""
    M, N, K = (_checks.positive_int("matmul", n, v) for n, v in (("M", M), ("N", N), ("K", K)))
    dtype = _checks.dtype("matmul", "dtype", dtype)
    _checks.flag("matmul", "transpose_a", transpose_a)
    _checks.flag("matmul", "transpose_b", transpose_b)
    A = te.placeholder((K, M) if transpose_a else (M, K), dtype, "A")
    B = te.placeholder((N, K) if transpose_b else (K, N), dtype, "B")
    return [A, B, matmul(A, B, transpose_a, transpose_b, out_dtype, name="C", acc_dtype=acc_dtype)]


@te.register_workload("batch_matmul", keyed_only_when_set=("acc_dtype",))
def batch_matmul_workload(B, M, N, K, dtype="float32", transpose_a=False, transpose_b=False, out_dtype=None,
                          acc_dtype=None):
    """[A, B, C] with C[b] = op(A[b]) @ op(B[b]) of shape (B, M, N)."""
    dims = (("B", B), ("M", M), ("N", N), ("K", K))
    batch, M, N, K = (_checks.positive_int("batch_matmul", n, v) for n, v in dims)
    dtype = _checks.dtype("batch_matmul", "dtype", dtype)
    _checks.flag("batch_matmul", "transpose_a", transpose_a)
    _checks.flag("batch_matmul", "transpose_b", transpose_b)
    A = te.placeholder((batch, K, M) if transpose_a else (batch, M, K), dtype, "A")
    Bt = te.placeholder((batch, N, K) if transpose_b else (batch, K, N), dtype, "B")
    return [A, Bt, batch_matmul(A, Bt, transpose_a, transpose_b, out_dtype, name="C", acc_dtype=acc_dtype)]


@te.register_workload("dense", keyed_only_when_set=("acc_dtype",))
def dense_workload(M, N, K, dtype="float32", bias=True, relu=True, out_dtype=None, acc_dtype=None):
    """[X, W, (bias,) Y]: Y = relu(X @ W.T + bias) with the optional parts as asked."""
    M, N, K = (_checks.positive_int("dense", n, v) for n, v in (("M", M), ("N", N), ("K", K)))
    dtype = _checks.dtype("dense", "dtype", dtype)
    _checks.flag("dense", "bias", bias)
    _, out = _checks.accumulator_and_output("dense", dtype, out_dtype, acc_dtype)  # the bias is in the output's dtype
    X = te.placeholder((M, K), dtype, "X")
    W = te.placeholder((N, K), dtype, "W")
    b = te.placeholder((N,), out, "bias") if bias else None
    Y = dense(X, W, b, relu, out_dtype, acc_dtype)
    return [X, W, Y] if b is None else [X, W, b, Y]
