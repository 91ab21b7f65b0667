"""Parameter validation shared by the operator library.

Every check raises a te error whose message starts with the op's name and names the
offending parameter ("matmul: M must be a positive int, got -3"):

- ``te.ShapeError`` for extents, shapes, strides, paddings and tensor ranks;
- ``te.DTypeError`` for dtypes;
- ``te.WorkloadError`` for every other bad option (layout, pool_type, flags, op names).
"""
from __future__ import annotations

import numbers

import te

#: dtypes an arithmetic op accepts (bool has no arithmetic).
NUMERIC_DTYPES = te.dtypes.FLOAT_DTYPES + te.dtypes.INT_DTYPES


def is_int(value) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def positive_int(op: str, name: str, value) -> int:
    """``value`` as an int if it is an int >= 1."""
    if not is_int(value) or value <= 0:
        raise te.ShapeError(f"{op}: {name} must be a positive int, got {value!r}")
    return int(value)


def positive_real(op: str, name: str, value) -> float:
    """``value`` as a float if it is a finite real number > 0 (an option such as eps)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not 0 < value < float("inf"):
        raise te.WorkloadError(f"{op}: {name} must be a positive number, got {value!r}")
    return float(value)


def int_pair(op: str, name: str, value, minimum: int) -> tuple[int, int]:
    """An int or a 2-list ``[h, w]`` of ints >= ``minimum``, as ``(h, w)``."""
    items = [value, value] if is_int(value) else value
    if not isinstance(items, (list, tuple)) or len(items) != 2 or not all(is_int(v) for v in items):
        raise te.ShapeError(f"{op}: {name} must be an int or a list [h, w] of two ints, got {value!r}")
    if any(v < minimum for v in items):
        raise te.ShapeError(f"{op}: {name} must be >= {minimum}, got {value!r}")
    return int(items[0]), int(items[1])


def padding(op: str, value) -> tuple[int, int, int, int]:
    """Padding of a 2-d window as (top, left, bottom, right): an int (every side), ``[h, w]``
    (top and bottom h, left and right w) or ``[top, left, bottom, right]`` (TVM's order, as
    an ONNX model's asymmetric pads need), each >= 0."""
    items = [value] * 2 if is_int(value) else value
    if not isinstance(items, (list, tuple)) or len(items) not in (2, 4) or not all(is_int(v) for v in items):
        raise te.ShapeError(f"{op}: padding must be an int, a list [h, w] or a list [top, left, bottom, right] "
                            f"of ints, got {value!r}")
    if any(v < 0 for v in items):
        raise te.ShapeError(f"{op}: padding must be >= 0, got {value!r}")
    items = [int(v) for v in items]
    return (items[0], items[1], items[0], items[1]) if len(items) == 2 else tuple(items)


def shape_list(op: str, name: str, value) -> tuple[int, ...]:
    """A non-empty list of positive ints, as a tuple."""
    if not isinstance(value, (list, tuple)) or not value:
        raise te.ShapeError(f"{op}: {name} must be a non-empty list of positive ints, got {value!r}")
    return tuple(positive_int(op, f"{name}[{n}]", v) for n, v in enumerate(value))


def dtype(op: str, name: str, value, allowed=NUMERIC_DTYPES) -> str:
    """A dtype string among ``allowed``."""
    if not isinstance(value, str) or value not in allowed:
        raise te.DTypeError(f"{op}: {name} must be one of {', '.join(allowed)}, got {value!r}")
    return value


def float_dtype(op: str, name: str, value) -> str:
    return dtype(op, name, value, te.dtypes.FLOAT_DTYPES)


def accumulator(op: str, in_dtype: str, out_dtype, name: str = "out_dtype") -> str:
    """The dtype a reduction over ``in_dtype`` products accumulates in.

    Default: int32 for integer inputs (int8 x int8 would overflow int8), else the input
    dtype. An explicit ``out_dtype`` must be of the same kind and at least as wide.
    """
    if out_dtype is None:
        return "int32" if te.dtypes.is_int(in_dtype) and te.dtypes.bits(in_dtype) < 32 else in_dtype
    dtype(op, name, out_dtype)
    same_kind = te.dtypes.is_float(out_dtype) == te.dtypes.is_float(in_dtype)
    if not same_kind or te.dtypes.bits(out_dtype) < te.dtypes.bits(in_dtype):
        raise te.DTypeError(
            f"{op}: {name} {out_dtype} cannot accumulate {in_dtype} inputs; "
            f"use a dtype of the same kind that is at least as wide"
        )
    return out_dtype


def accumulator_and_output(op: str, in_dtype: str, out_dtype, acc_dtype) -> tuple[str, str]:
    """(accumulator dtype, output dtype) of a reduction over ``in_dtype`` products.

    Without ``acc_dtype`` both are ``accumulator(op, in_dtype, out_dtype)``, as before.
    With it, the reduction accumulates in ``acc_dtype`` (same kind as the inputs, at least
    as wide) and the result is cast to ``out_dtype``, by default the input dtype: float16
    inputs with ``acc_dtype="float32"`` give a float16 result summed in float32, as fp16
    GEMM libraries compute it."""
    if acc_dtype is None:
        acc = accumulator(op, in_dtype, out_dtype)
        return acc, acc
    acc = accumulator(op, in_dtype, acc_dtype, name="acc_dtype")
    out = in_dtype if out_dtype is None else dtype(op, "out_dtype", out_dtype)
    if te.dtypes.is_float(out) != te.dtypes.is_float(acc):
        raise te.DTypeError(f"{op}: out_dtype {out} and acc_dtype {acc} must both be float or both integer")
    return acc, out


def flag(op: str, name: str, value) -> bool:
    if not isinstance(value, bool):
        raise te.WorkloadError(f"{op}: {name} must be True or False, got {value!r}")
    return value


def choice(op: str, name: str, value, allowed) -> str:
    if value not in allowed:
        raise te.WorkloadError(f"{op}: unknown {name} {value!r}; expected one of {', '.join(map(repr, allowed))}")
    return value


def tensor(op: str, name: str, value, ndim: int | None = None) -> "te.Tensor":
    """A te.Tensor, of rank ``ndim`` when given."""
    if not isinstance(value, te.Tensor):
        raise te.ShapeError(f"{op}: {name} must be a te.Tensor, got {type(value).__name__}")
    if ndim is not None and value.ndim != ndim:
        raise te.ShapeError(f"{op}: {name} must be {ndim}-d, got shape {value.shape}")
    dtype(op, f"the dtype of {name}", value.dtype)
    return value


def same_dtype(op: str, **tensors) -> str:
    """The common dtype of ``tensors`` (name -> tensor); raises naming both if they differ."""
    (first_name, first), *rest = tensors.items()
    for name, t in rest:
        if t.dtype != first.dtype:
            raise te.DTypeError(
                f"{op}: {first_name} is {first.dtype} but {name} is {t.dtype}; cast one of them first"
            )
    return first.dtype


def out_size(op: str, dim: str, size: int, kernel: int, pad: int, stride: int, dilation: int = 1,
             kernel_name: str | None = None, pad_after: int | None = None) -> int:
    """Output extent ``(size + pad + pad_after - dilation*(kernel-1) - 1) // stride + 1`` of a
    sliding window along ``dim`` ("height" or "width"; ``pad_after`` defaults to ``pad``);
    raises when it is not positive."""
    size_name, default_kernel_name = {"height": ("H", "R"), "width": ("W", "S")}[dim]
    pad_after = pad if pad_after is None else pad_after
    out = (size + pad + pad_after - dilation * (kernel - 1) - 1) // stride + 1
    if out <= 0:
        raise te.ShapeError(
            f"{op}: output {dim} is {out} for {size_name}={size}, {kernel_name or default_kernel_name}={kernel}, "
            f"padding={pad if pad_after == pad else (pad, pad_after)}, stride={stride}, dilation={dilation}; "
            f"the (dilated) window must fit in the padded input"
        )
    return out
