"""Helpers the operator-library tests share: tolerances and comparisons in a wide type."""
import numpy as np

FLOAT_TOL = {"float16": dict(rtol=1e-2, atol=2e-2), "float32": dict(rtol=1e-5, atol=1e-5),
             "float64": dict(rtol=1e-12, atol=1e-12)}


def pair(v):
    """An int or a 2-sequence as an (h, w) pair."""
    return (v, v) if isinstance(v, int) else tuple(v)


def wide(x):
    """The array in an exact wide type: float64 or int64."""
    return x.astype(np.float64 if x.dtype.kind == "f" else np.int64)


def assert_matches(actual, expected, dtype):
    if dtype in FLOAT_TOL:
        np.testing.assert_allclose(actual.astype(np.float64), expected, **FLOAT_TOL[dtype])
    else:
        np.testing.assert_array_equal(actual, expected.astype(actual.dtype))
