"""Checking a candidate's outputs against the NumPy reference.

Tolerances depend on the dtype and on the reduction length: a float sum of R terms
in a different order differs from the (float64-accumulated) reference by roughly
eps * sqrt(R) relative to the magnitudes summed, so the bound scales with both.
Integer outputs must match exactly; NaN where the reference has none is wrong.
"""
from __future__ import annotations

import math

import numpy as np

from te import dtypes
from te.dag import topological_order
from te.tensor import ComputeOp

#: Safety factor over the expected rounding error.
SAFETY = 64.0


def reduction_length(outputs) -> int:
    """Longest chain of reduction terms behind ``outputs`` (1 when there is no reduction)."""
    longest = 1
    for op in topological_order(outputs):
        if isinstance(op, ComputeOp) and op.reduce_axis:
            longest = max(longest, math.prod(iv.extent for iv in op.reduce_axis))
    return longest


def accumulator_dtype(outputs) -> str | None:
    """The narrowest float dtype a reduction behind ``outputs`` sums in (None: no float
    reduction): with float16 inputs summed in float32 and cast back, float32."""
    found = [op.output(0).dtype for op in topological_order(outputs)
             if isinstance(op, ComputeOp) and op.reduce_axis and dtypes.is_float(op.output(0).dtype)]
    return min(found, key=lambda d: dtypes.numpy_dtype(d).itemsize) if found else None


def reference_checks(outputs, references: list[np.ndarray]) -> list["ReferenceCheck"]:
    """One ``ReferenceCheck`` per reference of a workload's ``outputs``, with the workload's
    reduction length and accumulator dtype (what every measuring process checks with)."""
    reduction, acc = reduction_length(outputs), accumulator_dtype(outputs)
    return [ReferenceCheck(r, reduction, acc) for r in references]


#: Relative ulps of the output dtype allowed on top of the summation error when a wider
#: accumulator is cast to it: candidate and reference round one value each, and a sum
#: that lands near a rounding boundary may round to neighbouring values.
CAST_ULPS = 2.0


def tolerance(dtype: str, reduction: int, acc_dtype: str | None = None) -> tuple[float, float]:
    """(rtol, atol-scale) for an output of ``dtype`` behind a reduction of ``reduction`` terms
    (summed in ``acc_dtype`` when it is a wider float: its rounding error over the sum,
    plus the cast to ``dtype``)."""
    if not dtypes.is_float(dtype):
        return 0.0, 0.0
    eps = float(np.finfo(dtypes.numpy_dtype(dtype)).eps)
    if acc_dtype is None or acc_dtype == dtype or not dtypes.is_float(acc_dtype):
        rtol = SAFETY * eps * math.sqrt(reduction)
        return rtol, rtol
    eps_acc = float(np.finfo(dtypes.numpy_dtype(acc_dtype)).eps)
    rtol = SAFETY * eps_acc * math.sqrt(reduction) + CAST_ULPS * eps
    return rtol, rtol


def _tolerances(ref64: np.ndarray, dtype: str, reduction: int, acc_dtype: str | None = None) -> tuple[float, float]:
    """(rtol, atol) for a float64 copy of a reference of ``dtype``: atol scales with the
    mean magnitude of its finite elements (at least 1; 1 when none is finite)."""
    rtol, atol_scale = tolerance(dtype, reduction, acc_dtype)
    finite = np.isfinite(ref64)
    return rtol, (atol_scale * max(1.0, float(np.mean(np.abs(ref64[finite])))) if finite.any() else 1.0)


def mismatch(output: np.ndarray, reference: np.ndarray, reduction: int, acc_dtype: str | None = None) -> str | None:
    """None when ``output`` matches ``reference``, else a one-line description of the error:
    how many elements are off and the first of them (in C order), or the shapes when they
    differ (NumPy would broadcast a row against a matrix and call it equal).
    """
    if output.shape != reference.shape:
        return f"output has shape {tuple(output.shape)}, expected {tuple(reference.shape)}"
    dtype = str(reference.dtype)
    if not dtypes.is_float(dtype):
        bad = output != reference
        if not bad.any():
            return None
        idx = tuple(int(i) for i in np.argwhere(bad)[0])
        return f"{int(bad.sum())} wrong element(s), first at {idx}: got {output[idx]}, expected {reference[idx]}"
    out = output.astype(np.float64)
    ref = reference.astype(np.float64)
    rtol, atol = _tolerances(ref, dtype, reduction, acc_dtype)
    with np.errstate(invalid="ignore"):
        ok = np.isclose(out, ref, rtol=rtol, atol=atol, equal_nan=True)
    if ok.all():
        return None
    idx = tuple(int(i) for i in np.argwhere(~ok)[0])
    return (f"{int((~ok).sum())} element(s) off (rtol={rtol:.2g}, atol={atol:.2g}), first at {idx}: "
            f"got {float(out[idx])!r}, expected {float(ref[idx])!r}")


class ReferenceCheck:
    """``mismatch`` against one reference, for checking many outputs: the measuring process
    verifies every round of every candidate, and converting the reference and working out
    its tolerances each time cost more than a large kernel's call.

    The fast path accepts an output only where every element passes ``mismatch``'s own
    test (``|out - ref| <= atol + rtol * |ref|``, in float64); anything else (NaN, inf, a
    real error) goes to ``mismatch``, which decides and describes.
    """

    def __init__(self, reference: np.ndarray, reduction: int, acc_dtype: str | None = None):
        self.reference = reference
        self.reduction = reduction
        self.acc_dtype = acc_dtype
        self._fast = dtypes.is_float(str(reference.dtype)) and bool(np.isfinite(reference).all())
        if self._fast:
            self._ref64 = reference.astype(np.float64)
            rtol, atol = _tolerances(self._ref64, str(reference.dtype), reduction, acc_dtype)
            self._bound = atol + rtol * np.abs(self._ref64)

    def __call__(self, output: np.ndarray) -> str | None:
        if self._fast and output.shape == self.reference.shape:
            diff = output.astype(np.float64)
            diff -= self._ref64
            np.abs(diff, out=diff)
            if bool((diff <= self._bound).all()):
                return None
        return mismatch(output, self.reference, self.reduction, self.acc_dtype)
