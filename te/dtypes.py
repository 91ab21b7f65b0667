"""Data types of the expression language and the rules that combine them.

A dtype is a plain string ("float32", "int8", ...). The rules are deliberately strict:
two expressions of different dtypes never combine silently; the user casts with
``te.cast``. Python scalars adapt to the dtype of the expression they meet, as long
as no information is lost in a surprising way (a float literal never becomes an int).
"""
from __future__ import annotations

import functools

import numpy as np

from .errors import DTypeError

FLOAT_DTYPES = ("float16", "float32", "float64")
INT_DTYPES = ("int8", "int16", "int32", "int64", "uint8")
SUPPORTED_DTYPES = FLOAT_DTYPES + INT_DTYPES + ("bool",)

#: The dtype of loop and index variables.
INDEX_DTYPE = "int32"


def check_dtype(dtype: str) -> str:
    """Return ``dtype`` if the expression language supports it, else raise DTypeError."""
    if dtype not in SUPPORTED_DTYPES:
        raise DTypeError(
            f"unsupported dtype {dtype!r}; supported dtypes are {', '.join(SUPPORTED_DTYPES)}"
        )
    return dtype


def is_float(dtype: str) -> bool:
    return dtype in FLOAT_DTYPES


def is_int(dtype: str) -> bool:
    return dtype in INT_DTYPES


def is_bool(dtype: str) -> bool:
    return dtype == "bool"


def numpy_dtype(dtype: str) -> np.dtype:
    """The NumPy dtype that stores values of ``dtype``."""
    return np.dtype(check_dtype(dtype))


def bits(dtype: str) -> int:
    return 8 if dtype == "bool" else numpy_dtype(dtype).itemsize * 8


def nbytes(dtype: str) -> int:
    """Bytes one element of ``dtype`` occupies in memory (bool: one byte)."""
    return bits(dtype) // 8


def min_value(dtype: str):
    """Smallest value of ``dtype``: -inf for floats, the most negative integer otherwise."""
    if is_float(dtype):
        return -np.inf
    if is_bool(dtype):
        return False
    return _int_range(dtype)[0]


def max_value(dtype: str):
    """Largest value of ``dtype``: +inf for floats, the most positive integer otherwise."""
    if is_float(dtype):
        return np.inf
    if is_bool(dtype):
        return True
    return _int_range(dtype)[1]


@functools.lru_cache(maxsize=None)
def _int_range(dtype: str) -> tuple[int, int]:
    """(min, max) of integer ``dtype``: asked for every integer constant made, and
    ``np.iinfo`` is slow."""
    info = np.iinfo(numpy_dtype(dtype))
    return int(info.min), int(info.max)


def scalar_dtype(value) -> str:
    """The dtype a Python scalar takes when it stands alone."""
    if isinstance(value, (bool, np.bool_)):
        return "bool"
    if isinstance(value, (int, np.integer)):
        return INDEX_DTYPE
    if isinstance(value, (float, np.floating)):
        return "float32"
    raise DTypeError(f"cannot use {type(value).__name__} value {value!r} in an expression")


def scalar_fits(value, dtype: str) -> bool:
    """Whether Python scalar ``value`` can become a constant of ``dtype`` without surprise."""
    if isinstance(value, (bool, np.bool_)):
        return dtype == "bool"
    if isinstance(value, (int, np.integer)):
        if is_float(dtype):
            return True
        if is_int(dtype):
            lo, hi = _int_range(dtype)
            return lo <= int(value) <= hi
        return False
    if isinstance(value, (float, np.floating)):
        return is_float(dtype)
    return False
