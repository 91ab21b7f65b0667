"""Element-wise operators: add, sub, mul (two same-shape tensors), relu, sigmoid, tanh, exp.

Each returns one compute of the input's shape. Binary ops do not broadcast: both inputs
must have the same shape and dtype. Workloads: ``elementwise(op, shape, dtype)`` and
``elementwise_chain(shape, dtype)`` (three fusable stages).
"""
from __future__ import annotations

import te

from . import _checks

BINARY_OPS = ("add", "mul", "sub")
UNARY_OPS = ("relu", "sigmoid", "tanh", "exp")
ELEMENTWISE_OPS = BINARY_OPS + UNARY_OPS


def _binary(op: str, X, Y, fn, name: str):
    _checks.tensor(op, "X", X)
    _checks.tensor(op, "Y", Y)
    if X.shape != Y.shape:
        raise te.ShapeError(f"{op}: X is {X.shape} but Y is {Y.shape}; shapes must be equal (no broadcasting)")
    _checks.same_dtype(op, X=X, Y=Y)
    return te.compute(X.shape, lambda *i: fn(X[i], Y[i]), name=name, tag="elementwise")


def add(X, Y, name: str = "T_add"):
    """``X + Y`` element-wise (same shape and dtype)."""
    return _binary("add", X, Y, lambda a, b: a + b, name)


def sub(X, Y, name: str = "T_sub"):
    """``X - Y`` element-wise (same shape and dtype)."""
    return _binary("sub", X, Y, lambda a, b: a - b, name)


def mul(X, Y, name: str = "T_mul"):
    """``X * Y`` element-wise (same shape and dtype)."""
    return _binary("mul", X, Y, lambda a, b: a * b, name)


def relu(X, name: str = "T_relu"):
    """``max(X, 0)`` element-wise; any numeric dtype."""
    _checks.tensor("relu", "X", X)
    return te.compute(X.shape, lambda *i: te.max(X[i], 0), name=name, tag="elementwise")


def _unary_float(op: str, fn):
    def apply(X, name: str = f"T_{op}"):
        _checks.tensor(op, "X", X)
        _checks.float_dtype(op, "the dtype of X", X.dtype)
        return te.compute(X.shape, lambda *i: fn(X[i]), name=name, tag="elementwise")

    apply.__name__ = op
    apply.__doc__ = f"``{op}(X)`` element-wise; float dtypes only."
    return apply


sigmoid = _unary_float("sigmoid", te.sigmoid)
tanh = _unary_float("tanh", te.tanh)
exp = _unary_float("exp", te.exp)

_FUNCS = {"add": add, "sub": sub, "mul": mul, "relu": relu, "sigmoid": sigmoid, "tanh": tanh, "exp": exp}


@te.register_workload("elementwise")
def elementwise_workload(op, shape, dtype="float32"):
    """One element-wise op over ``shape``: inputs A (and B for binary ops), output."""
    _checks.choice("elementwise", "op", op, ELEMENTWISE_OPS)
    shape = _checks.shape_list("elementwise", "shape", shape)
    allowed = _checks.NUMERIC_DTYPES if op in BINARY_OPS + ("relu",) else te.dtypes.FLOAT_DTYPES
    dtype = _checks.dtype("elementwise", "dtype", dtype, allowed)
    A = te.placeholder(shape, dtype, "A")
    if op in BINARY_OPS:
        B = te.placeholder(shape, dtype, "B")
        return [A, B, _FUNCS[op](A, B)]
    return [A, _FUNCS[op](A)]


@te.register_workload("elementwise_chain")
def elementwise_chain_workload(shape, dtype="float32"):
    """``out = relu(A * B + 1)`` as three stages T_mul, T_add1, T_relu (for fusion)."""
    shape = _checks.shape_list("elementwise_chain", "shape", shape)
    dtype = _checks.dtype("elementwise_chain", "dtype", dtype)
    A = te.placeholder(shape, dtype, "A")
    B = te.placeholder(shape, dtype, "B")
    T1 = mul(A, B)
    T2 = te.compute(shape, lambda *i: T1[i] + 1, name="T_add1", tag="elementwise")
    return [A, B, relu(T2)]
