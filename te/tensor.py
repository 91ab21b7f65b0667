"""Tensors, the operations that define them, and iteration variables.

    A = te.placeholder((M, K), name="A")                       # an input
    k = te.reduce_axis((0, K), name="k")                      # a reduction variable
    C = te.compute((M, N), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")

Shapes are static: every extent is a positive Python int. A ``compute`` body may be
any expression over its axes; a reduction (``te.sum``/``max``/``min``) may only stand
at the top of the body, and its reduce axes may appear nowhere else.
"""
from __future__ import annotations

import inspect
import numbers
from dataclasses import dataclass
from typing import Callable

from . import dtypes
from .errors import ReductionError, ShapeError, TEError
from .expr import (
    REDUCERS,
    Const,
    Expr,
    ExprOps,
    Reduce,
    TensorRead,
    Var,
    as_bool,
    as_expr,
    binary,
    identity_or_compare,
    post_order,
)

SPATIAL = "spatial"
REDUCE = "reduce"

def _check_extent(value, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ShapeError(f"{what} must be a positive int, got {value!r} ({type(value).__name__})")
    if value <= 0:
        raise ShapeError(f"{what} must be positive, got {value}")
    return int(value)


def _check_shape(shape, what: str) -> tuple[int, ...]:
    if isinstance(shape, numbers.Integral) and not isinstance(shape, bool):
        shape = (shape,)
    try:
        items = tuple(shape)
    except TypeError:
        raise ShapeError(f"{what} must be a tuple of positive ints, got {shape!r}") from None
    if not items:
        raise ShapeError(f"{what} must have at least one dimension")
    return tuple(_check_extent(x, f"{what}[{n}]") for n, x in enumerate(items))


@dataclass(frozen=True, eq=False)
class IterVar(ExprOps):
    """An iteration variable: its ``var``, domain ``[start, start + extent)`` and kind.

    Usable directly inside expressions (it stands for ``var``).
    """

    var: Var
    start: int
    extent: int
    kind: str  # SPATIAL or REDUCE

    @property
    def name(self) -> str:
        return self.var.name

    @property
    def dom(self) -> tuple[int, int]:
        return (self.start, self.extent)

    @property
    def dtype(self) -> str:
        return self.var.dtype

    def __repr__(self):
        return f"IterVar({self.var.name}, [{self.start}, {self.start + self.extent}), {self.kind})"

    __hash__ = object.__hash__

    def __eq__(self, other):
        if other is None or isinstance(other, (IterVar, Expr)):
            return self is other  # fast path: list.index / membership among axes
        return identity_or_compare("eq", self, other)

    def __ne__(self, other):
        if other is None or isinstance(other, (IterVar, Expr)):
            return self is not other
        return identity_or_compare("ne", self, other)


def reduce_axis(dom, name: str = "k") -> IterVar:
    """A reduction variable over ``dom``: ``(start, stop)`` or an extent."""
    if isinstance(dom, numbers.Integral) and not isinstance(dom, bool):
        start, stop = 0, dom
    else:
        try:
            start, stop = dom
        except (TypeError, ValueError):
            raise ShapeError(f"reduce_axis domain must be (start, stop) or an extent, got {dom!r}") from None
    if isinstance(start, bool) or not isinstance(start, numbers.Integral):
        raise ShapeError(f"reduce_axis {name!r}: start must be an int, got {start!r}")
    if isinstance(stop, bool) or not isinstance(stop, numbers.Integral):
        raise ShapeError(f"reduce_axis {name!r}: stop must be an int, got {stop!r}")
    extent = _check_extent(int(stop) - int(start), f"reduce_axis {name!r} extent (stop - start)")
    return IterVar(Var(name), int(start), extent, REDUCE)


# ---------------------------------------------------------------- operations


class Operation:
    """What defines a tensor: a placeholder (an input) or a compute."""

    name: str

    def output(self, index: int = 0) -> "Tensor":
        if index != 0:
            raise ShapeError(f"operation {self.name!r} has a single output")
        return self._output

    @property
    def input_tensors(self) -> list["Tensor"]:
        return []

    def __repr__(self):
        return f"{type(self).__name__}({self.name})"


class PlaceholderOp(Operation):
    def __init__(self, name: str, shape: tuple[int, ...], dtype: str):
        self.name = name
        self.shape = shape
        self.dtype = dtype
        self._output = Tensor(shape, dtype, self, name)


class ComputeOp(Operation):
    """``out[axis...] = body`` over spatial ``axis`` and the body's ``reduce_axis``."""

    def __init__(self, name: str, axis: tuple[IterVar, ...], body: Expr, tag: str, attrs: dict):
        self.name = name
        self.axis = axis
        self.body = body
        self.tag = tag
        self.attrs = dict(attrs)
        self.reduce_axis: tuple[IterVar, ...] = body.axes if isinstance(body, Reduce) else ()
        shape = tuple(iv.extent for iv in axis)
        self._output = Tensor(shape, body.dtype, self, name)

    @property
    def input_tensors(self) -> list["Tensor"]:
        """Tensors the body reads, in first-read order, each once."""
        seen: dict[int, Tensor] = {}
        for node in post_order(self.body):
            if isinstance(node, TensorRead) and id(node.tensor) not in seen:
                seen[id(node.tensor)] = node.tensor
        return list(seen.values())

    @property
    def is_reduction(self) -> bool:
        return bool(self.reduce_axis)


class Tensor:
    """A multi-dimensional array of one dtype, defined by an operation."""

    def __init__(self, shape: tuple[int, ...], dtype: str, op: Operation, name: str):
        self.shape = shape
        self.dtype = dtype
        self.op = op
        self.name = name

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def __getitem__(self, indices) -> TensorRead:
        if not isinstance(indices, tuple):
            indices = (indices,)
        if len(indices) != self.ndim:
            raise ShapeError(
                f"tensor {self.name!r} has {self.ndim} dimension(s) {self.shape}, "
                f"indexed with {len(indices)} index(es)"
            )
        converted = []
        for n, index in enumerate(indices):
            if isinstance(index, slice):
                raise ShapeError(f"tensor {self.name!r}: slices are not supported, index with expressions")
            e = as_expr(index)
            if not dtypes.is_int(e.dtype):
                raise ShapeError(
                    f"index {n} of tensor {self.name!r} must be an integer expression, "
                    f"got {e.dtype} ({e})"
                )
            if e.dtype != dtypes.INDEX_DTYPE:
                e = as_expr(e)
                from .expr import cast

                e = cast(dtypes.INDEX_DTYPE, e)
            if isinstance(e, Const) and not 0 <= e.value < self.shape[n]:
                raise ShapeError(
                    f"constant index {e.value} out of range for dimension {n} of "
                    f"tensor {self.name!r} with extent {self.shape[n]}"
                )
            converted.append(e)
        return TensorRead(self, tuple(converted), self.dtype)

    def __repr__(self):
        return f"Tensor({self.name}, shape={self.shape}, dtype={self.dtype})"

    __hash__ = object.__hash__

    def __eq__(self, other):
        return self is other

    def __bool__(self):
        return True

    def _scalar_misuse(self, *_):
        raise TEError(f"tensor {self.name!r} used as a scalar; index it first, e.g. {self.name}[i, j]")

    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = _scalar_misuse
    __truediv__ = __rtruediv__ = __floordiv__ = __mod__ = __neg__ = _scalar_misuse


def placeholder(shape, dtype: str = "float32", name: str = "placeholder") -> Tensor:
    """An input tensor of static ``shape`` and ``dtype`` (float32 by default)."""
    shape = _check_shape(shape, f"shape of placeholder {name!r}")
    dtypes.check_dtype(dtype)
    return PlaceholderOp(name, shape, dtype).output(0)


def _axis_names(fcompute: Callable, ndim: int) -> list[str]:
    try:
        params = list(inspect.signature(fcompute).parameters.values())
    except (TypeError, ValueError):
        params = []
    if any(p.kind is inspect.Parameter.VAR_POSITIONAL for p in params):
        return [f"i{n}" for n in range(ndim)]
    names = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if len(names) != ndim:
        raise ShapeError(
            f"compute of {ndim}-d shape got a function of {len(names)} argument(s) ({', '.join(names)})"
        )
    return names


def compute(shape, fcompute: Callable, name: str = "compute", tag: str = "", attrs: dict | None = None) -> Tensor:
    """A tensor whose element at ``(i, j, ...)`` is ``fcompute(i, j, ...)``.

    The body may be a reduction (``te.sum(expr, axis=k)``) at its top level only.
    """
    shape = _check_shape(shape, f"shape of compute {name!r}")
    if not callable(fcompute):
        raise TEError(f"compute {name!r}: fcompute must be callable, got {fcompute!r}")
    axes = tuple(IterVar(Var(n), 0, ext, SPATIAL) for n, ext in zip(_axis_names(fcompute, len(shape)), shape))
    body = fcompute(*axes)
    if isinstance(body, (list, tuple)):
        raise TEError(f"compute {name!r}: multi-output bodies are not supported; return one expression")
    body = as_expr(body)
    _check_body(name, axes, body)
    return ComputeOp(name, axes, body, tag, attrs or {}).output(0)


def _check_body(name: str, axes: tuple[IterVar, ...], body: Expr) -> None:
    """Reject nested reductions, misplaced reduce axes and free variables."""
    allowed = {iv.var for iv in axes}
    reduce_vars: set[Var] = set()
    if isinstance(body, Reduce):
        reduce_vars = {iv.var for iv in body.axes}
        inner = [body.source] + ([body.condition] if body.condition is not None else [])
    else:
        inner = [body]
    for root in inner:
        for node in post_order(root):
            if isinstance(node, Reduce):
                raise ReductionError(
                    f"compute {name!r}: a reduction must be the whole body, not nested inside "
                    f"another expression; compute it as its own tensor first"
                )
    outside = body if not isinstance(body, Reduce) else None
    for node in post_order(body):
        if isinstance(node, Var) and node not in allowed and node not in reduce_vars:
            raise ReductionError(
                f"compute {name!r}: variable {node.name!r} is neither an axis of this compute "
                f"nor a reduce axis of its reduction (a reduce axis used outside a reduction?)"
            )
    if outside is not None:
        return
    for iv in body.axes:
        if iv.kind != REDUCE:
            raise ReductionError(
                f"compute {name!r}: axis {iv.name!r} of the reduction is not a reduce_axis"
            )


# ---------------------------------------------------------------- reductions


def _reduce(combiner: str, source, axis, where, init=None) -> Reduce:
    src = as_expr(source)
    if axis is None:
        raise ReductionError(f"te.{combiner} needs axis=reduce_axis(...) (or two operands for element-wise {combiner})")
    axes = tuple(axis) if isinstance(axis, (list, tuple)) else (axis,)
    if not axes:
        raise ReductionError(f"te.{combiner}: empty list of reduce axes")
    for iv in axes:
        if not isinstance(iv, IterVar) or iv.kind != REDUCE:
            raise ReductionError(f"te.{combiner}: axis {iv!r} is not a te.reduce_axis")
    if len(set(axes)) != len(axes):
        raise ReductionError(f"te.{combiner}: a reduce axis is listed twice")
    for node in post_order(src):
        if isinstance(node, Reduce):
            raise ReductionError(f"te.{combiner}: nested reductions are not supported")
    cond = None if where is None else as_bool(where, f"te.{combiner}(where=...)")
    if src.dtype == "bool":
        raise ReductionError(f"te.{combiner} over bool values; cast to an integer type first")
    if init is None:
        identity = {
            "sum": 0,
            "max": dtypes.min_value(src.dtype),
            "min": dtypes.max_value(src.dtype),
        }[combiner]
    else:
        identity = init
    return Reduce(combiner, src, axes, cond, Const(identity, src.dtype), src.dtype)


def sum(expr, axis=None, where=None) -> Reduce:  # noqa: A001 - mirrors te.sum
    """Sum of ``expr`` over ``axis`` (a reduce_axis or a list of them). Identity: 0."""
    return _reduce("sum", expr, axis, where)


def _min_or_max(combiner: str):
    def reducer_or_elementwise(a, b=None, axis=None, where=None):
        if axis is None and b is not None:
            return binary(combiner, a, b)
        if b is not None:
            raise ReductionError(f"te.{combiner}: give either two operands or axis=, not both")
        return _reduce(combiner, a, axis, where)

    reducer_or_elementwise.__name__ = combiner
    reducer_or_elementwise.__doc__ = (
        f"``te.{combiner}(expr, axis=k)``: {combiner}imum over reduce axes (identity: the dtype's "
        f"{'lowest' if combiner == 'max' else 'highest'} value, {'-' if combiner == 'max' else '+'}inf "
        f"for floats). ``te.{combiner}(a, b)``: element-wise {combiner}imum."
    )
    return reducer_or_elementwise


max = _min_or_max("max")  # noqa: A001
min = _min_or_max("min")  # noqa: A001


def softmax_sum(value, logit, axis=None, where=None) -> Reduce:
    """``sum(value * exp(logit - max(logit)))`` over ``axis``: softmax's numerator applied to
    ``value``, in one pass over the axis (FlashAttention's online softmax). Lowering keeps the
    running maximum of ``logit`` beside the sum and rescales the sum when it grows, so neither
    the maximum nor the weights need a pass of their own. Identity: 0. Float values and
    logits of one dtype; as in a two-pass softmax, a logit of +-inf gives NaN."""
    red = _reduce("softmax_sum", value, axis, where, init=0)
    lg = as_expr(logit)
    if not (dtypes.is_float(red.dtype) and lg.dtype == red.dtype):
        raise ReductionError(f"te.softmax_sum: value and logit must be floats of one dtype, "
                             f"got {red.dtype} and {lg.dtype}")
    for node in post_order(lg):
        if isinstance(node, Reduce):
            raise ReductionError("te.softmax_sum: nested reductions are not supported")
    return Reduce(red.combiner, red.source, red.axes, red.condition, red.identity, red.dtype, lg)


assert set(REDUCERS) == {"sum", "max", "min", "softmax_sum"}
