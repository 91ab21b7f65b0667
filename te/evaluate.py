"""NumPy reference evaluator: the oracle every generated kernel is checked against.

Each compute is evaluated over a broadcast grid of its axes (spatial axes first, then
reduce axes) with NumPy, in chunks of the first axis so memory stays bounded.

Semantics, which code generators must match:
- ``//`` and ``%`` on integers are floor division and floor modulo (Python's rules).
- Integer arithmetic wraps in the expression's dtype (two's complement).
- ``cast`` from float to int truncates toward zero; to float16 rounds to nearest.
- ``if_then_else`` reads only the taken branch: reads of the other branch may be out
  of bounds (padding relies on this); a read that is out of bounds where it is taken
  is an error, never clipped silently.
- Reductions start from their identity; points where ``where`` is false contribute it.
  Float sums of float16/float32 accumulate in float64 and round once at the end, so the
  oracle is at least as accurate as any kernel it judges.
- A float sum of a product of two tensor reads indexed by plain axes runs through
  ``np.einsum`` (BLAS), so large matmul-like references stay fast.
"""
from __future__ import annotations

import math
from typing import Mapping

import numpy as np

from . import dtypes
from .dag import _as_list, topological_order
from .errors import ShapeError, TEError
from .expr import Binary, Call, Cast, Compare, Const, Expr, Logical, Not, Reduce, Select, TensorRead, Var
from .tensor import ComputeOp, PlaceholderOp, Tensor

#: Grid points evaluated at once; bounds the evaluator's memory to a few hundred MB.
CHUNK_ELEMENTS = 1 << 22


class EvaluationError(TEError):
    """The expression cannot be evaluated with the given inputs."""


def evaluate(outputs, inputs) -> np.ndarray | list[np.ndarray]:
    """Compute ``outputs`` from input arrays.

    ``inputs`` maps each placeholder tensor to an array, or lists arrays in the order
    of ``te.dag.input_placeholders(outputs)``. Returns one array for one output tensor,
    else a list in the order of ``outputs``.
    """
    outs = _as_list(outputs)
    order = topological_order(outs)
    placeholders = [op.output(0) for op in order if isinstance(op, PlaceholderOp)]
    values = _bind_inputs(placeholders, inputs)
    for op in order:
        if isinstance(op, ComputeOp):
            values[op.output(0)] = _evaluate_compute(op, values)
    results = [values[t] for t in outs]
    return results[0] if isinstance(outputs, Tensor) else results


def tensor_nbytes(t: Tensor) -> int:
    """Bytes of an array holding tensor ``t``."""
    return math.prod(t.shape) * dtypes.nbytes(t.dtype)


def reference_nbytes(outputs) -> int:
    """About how many bytes ``evaluate(outputs, ...)`` holds at its peak, inputs not counted.

    For checking that a workload's reference fits in memory before computing it: every
    compute's result is kept until the end, and a float reduction also holds its float64
    accumulator and (on the einsum path) float64 copies of the tensors it reads. The
    chunked grid temporaries, bounded by CHUNK_ELEMENTS, are not counted.
    """
    total = 0
    for op in topological_order(_as_list(outputs)):
        if not isinstance(op, ComputeOp):
            continue
        out = op.output(0)
        total += tensor_nbytes(out)
        if isinstance(op.body, Reduce) and dtypes.is_float(op.body.dtype):
            elements = math.prod(out.shape) + sum(math.prod(t.shape) for t in op.input_tensors)
            total += elements * 8
    return total


def _bind_inputs(placeholders: list[Tensor], inputs) -> dict[Tensor, np.ndarray]:
    if isinstance(inputs, Mapping):
        missing = [t.name for t in placeholders if t not in inputs]
        if missing:
            raise EvaluationError(f"no input array given for placeholder(s) {', '.join(missing)}")
        pairs = [(t, inputs[t]) for t in placeholders]
    else:
        arrays = list(inputs)
        if len(arrays) != len(placeholders):
            names = ", ".join(t.name for t in placeholders)
            raise EvaluationError(f"expected {len(placeholders)} input array(s) ({names}), got {len(arrays)}")
        pairs = list(zip(placeholders, arrays))
    values = {}
    for tensor, array in pairs:
        array = np.asarray(array)
        if array.shape != tensor.shape:
            raise ShapeError(f"input {tensor.name!r}: expected shape {tensor.shape}, got {array.shape}")
        if array.dtype != dtypes.numpy_dtype(tensor.dtype):
            raise EvaluationError(f"input {tensor.name!r}: expected dtype {tensor.dtype}, got {array.dtype}")
        values[tensor] = array
    return values


# ---------------------------------------------------------------- one compute


def _evaluate_compute(op: ComputeOp, values: dict[Tensor, np.ndarray]) -> np.ndarray:
    out_dtype = dtypes.numpy_dtype(op.output(0).dtype)
    fast = _einsum_fast_path(op, values)
    if fast is not None:
        return np.ascontiguousarray(fast, dtype=out_dtype)
    axes = list(op.axis) + list(op.reduce_axis)
    per_row = max(1, math.prod(iv.extent for iv in axes[1:]))
    rows = max(1, CHUNK_ELEMENTS // per_row)
    result = np.empty(op.output(0).shape, dtype=out_dtype)
    first = axes[0]
    for start in range(0, first.extent, rows):
        stop = min(first.extent, start + rows)
        env = {}
        for pos, iv in enumerate(axes):
            lo, hi = (start, stop) if pos == 0 else (0, iv.extent)
            shape = [1] * len(axes)
            shape[pos] = hi - lo
            env[iv.var] = (np.arange(lo, hi, dtype=np.int64) + iv.start).reshape(shape)
        chunk = _evaluate_body(op, env, values)
        result[start:stop] = np.broadcast_to(chunk, (stop - start,) + result.shape[1:])
    return result


def _evaluate_body(op: ComputeOp, env, values) -> np.ndarray:
    body = op.body
    nspatial = len(op.axis)
    full = tuple(np.broadcast_shapes(*(a.shape for a in env.values())))
    if not isinstance(body, Reduce):
        return _to_dtype(_Evaluator(env, values).eval(body, None), body.dtype)
    ev = _Evaluator(env, values)
    mask = None if body.condition is None else np.broadcast_to(ev.eval(body.condition, None), full)
    src = np.broadcast_to(ev.eval(body.source, mask), full)
    identity = body.identity.value
    acc_dtype = _accumulator_dtype(body)
    src = src.astype(acc_dtype, copy=False)
    if mask is not None:
        src = np.where(mask, src, np.asarray(identity, dtype=acc_dtype))
    raxes = tuple(range(nspatial, len(full)))
    if body.combiner == "softmax_sum":
        out = _softmax_sum(src, np.broadcast_to(ev.eval(body.logit, mask), full).astype(acc_dtype), mask, raxes)
    elif body.combiner == "sum":
        out = np.sum(src, axis=raxes, dtype=acc_dtype)
    elif body.combiner == "max":
        out = np.max(src, axis=raxes)
    else:
        out = np.min(src, axis=raxes)
    return _to_dtype(out, body.dtype)


def _softmax_sum(values, logits, mask, raxes) -> np.ndarray:
    """``sum(values * exp(logits - max(logits)))`` over ``raxes`` in two passes, the points
    outside ``mask`` left out of both (the reference for the one-pass lowering). With no
    point inside, the sum is empty: 0."""
    with np.errstate(invalid="ignore", over="ignore"):
        if mask is None:
            top = np.max(logits, axis=raxes, keepdims=True)
        else:
            logits = np.where(mask, logits, -np.inf)
            top = np.where(np.any(mask, axis=raxes, keepdims=True), np.max(logits, axis=raxes, keepdims=True), 0)
        return np.sum(values * np.exp(logits - top), axis=raxes)


def _accumulator_dtype(body: Reduce) -> np.dtype:
    if body.combiner in ("sum", "softmax_sum") and body.dtype in ("float16", "float32"):
        return np.dtype("float64")
    return dtypes.numpy_dtype(body.dtype)


def _to_dtype(array, dtype: str) -> np.ndarray:
    return np.asarray(array).astype(dtypes.numpy_dtype(dtype), copy=False)


def _widened_read(e: Expr) -> Expr:
    """The tensor read under a cast that widens a float (float16 -> float32: exact, so the
    float64 einsum below computes the same products), else ``e`` as it is."""
    if isinstance(e, Cast) and isinstance(e.value, TensorRead) and dtypes.is_float(e.dtype) \
            and dtypes.is_float(e.value.dtype) \
            and dtypes.numpy_dtype(e.dtype).itemsize >= dtypes.numpy_dtype(e.value.dtype).itemsize:
        return e.value
    return e


def _einsum_fast_path(op: ComputeOp, values) -> np.ndarray | None:
    """``sum(X[..] * Y[..])`` with plain-variable indices (each read perhaps widened by a
    cast), evaluated by np.einsum."""
    body = op.body
    if not (isinstance(body, Reduce) and body.combiner == "sum" and body.condition is None):
        return None
    if not dtypes.is_float(body.dtype):
        return None
    src = body.source
    if not (isinstance(src, Binary) and src.op == "mul"):
        return None
    reads = [_widened_read(src.a), _widened_read(src.b)]
    if not all(isinstance(r, TensorRead) for r in reads):
        return None
    axes = list(op.axis) + list(body.axes)
    letters = {iv.var: chr(ord("a") + n) for n, iv in enumerate(axes)}
    if len(axes) > 26 or any(iv.start != 0 for iv in axes):
        return None
    subscripts = []
    for r in reads:
        if not all(isinstance(i, Var) and i in letters for i in r.indices):
            return None
        if len(set(r.indices)) != len(r.indices):
            return None
        for dim, i in enumerate(r.indices):
            if next(iv.extent for iv in axes if iv.var is i) != r.tensor.shape[dim]:
                return None
        subscripts.append("".join(letters[i] for i in r.indices))
    out = "".join(letters[iv.var] for iv in op.axis)
    operands = [values[r.tensor].astype(np.float64) for r in reads]
    return np.einsum(f"{subscripts[0]},{subscripts[1]}->{out}", *operands, optimize=True)


# ---------------------------------------------------------------- expressions

_MATH = {
    "exp": np.exp, "log": np.log, "sqrt": np.sqrt, "tanh": np.tanh, "abs": np.abs,
    "floor": np.floor, "ceil": np.ceil, "sin": np.sin, "cos": np.cos,
    "sigmoid": lambda x: 1 / (1 + np.exp(-x)),
    "rsqrt": lambda x: 1 / np.sqrt(x),
}


def _erf(x):
    vec = np.vectorize(math.erf, otypes=[np.float64])
    return vec(x.astype(np.float64)).astype(x.dtype)


_MATH["erf"] = _erf


class _Evaluator:
    """Evaluates one expression over a broadcast grid.

    ``mask`` (a bool array or None for everywhere) marks the grid points where the
    expression is actually taken, so out-of-bounds reads are checked only there.
    """

    def __init__(self, env: dict[Var, np.ndarray], values: dict[Tensor, np.ndarray]):
        self.env = env
        self.values = values

    def eval(self, e: Expr, mask):
        method = getattr(self, "_" + type(e).__name__, None)
        if method is None:
            raise EvaluationError(f"the reference evaluator cannot evaluate {type(e).__name__} nodes")
        with np.errstate(all="ignore"):
            return method(e, mask)

    def _Var(self, e: Var, mask):
        if e not in self.env:
            raise EvaluationError(f"unbound variable {e.name!r}")
        return self.env[e]

    def _Const(self, e: Const, mask):
        return np.asarray(e.value, dtype=dtypes.numpy_dtype(e.dtype))

    def _Binary(self, e: Binary, mask):
        a = _to_dtype(self.eval(e.a, mask), e.dtype)
        b = _to_dtype(self.eval(e.b, mask), e.dtype)
        if e.op in ("floordiv", "floormod"):
            zero = b == 0
            if np.any(zero & (True if mask is None else mask)):
                raise EvaluationError(f"integer division by zero in {e}")
            b = np.where(zero, np.ones_like(b), b)
        fn = {
            "add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide,
            "floordiv": np.floor_divide, "floormod": np.mod,
            "min": np.minimum, "max": np.maximum, "pow": np.power,
        }[e.op]
        return _to_dtype(fn(a, b), e.dtype)

    def _Compare(self, e: Compare, mask):
        a, b = self.eval(e.a, mask), self.eval(e.b, mask)
        fn = {"lt": np.less, "le": np.less_equal, "gt": np.greater, "ge": np.greater_equal,
              "eq": np.equal, "ne": np.not_equal}[e.op]
        return fn(a, b)

    def _Logical(self, e: Logical, mask):
        a = self.eval(e.a, mask)
        # Short-circuit semantics: the right side matters only where the left does not decide.
        if e.op == "and":
            return a & self.eval(e.b, _and(mask, a))
        return a | self.eval(e.b, _and(mask, ~a))

    def _Not(self, e: Not, mask):
        return ~self.eval(e.a, mask)

    def _Select(self, e: Select, mask):
        cond = self.eval(e.cond, mask)
        t = self.eval(e.true_value, _and(mask, cond))
        f = self.eval(e.false_value, _and(mask, ~cond))
        return _to_dtype(np.where(cond, t, f), e.dtype)

    def _Cast(self, e: Cast, mask):
        return _to_dtype(self.eval(e.value, mask), e.dtype)

    def _Call(self, e: Call, mask):
        arg = self.eval(e.args[0], mask)
        return _to_dtype(_MATH[e.func](np.asarray(arg)), e.dtype)

    def _TensorRead(self, e: TensorRead, mask):
        data = self.values[e.tensor]
        idx = [np.asarray(self.eval(i, mask)).astype(np.int64) for i in e.indices]
        idx = np.broadcast_arrays(*idx)
        bad = np.zeros(idx[0].shape, dtype=bool)
        for dim, i in enumerate(idx):
            bad |= (i < 0) | (i >= data.shape[dim])
        taken = bad if mask is None else bad & mask
        if np.any(taken):
            where = tuple(int(np.broadcast_to(i, taken.shape)[taken][0]) for i in idx)
            raise EvaluationError(
                f"out-of-bounds read {e.tensor.name}{list(where)} of shape {data.shape} in {e}"
            )
        clipped = tuple(np.clip(i, 0, n - 1) for i, n in zip(idx, data.shape))
        return data[clipped]

    def _Reduce(self, e: Reduce, mask):
        raise EvaluationError("a reduction may only be the whole body of a compute")


def _and(mask, cond):
    return cond if mask is None else mask & cond
