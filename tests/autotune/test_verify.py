"""``autotune.verify``: the pass/fail oracle of every measured candidate (and of many tests).

``mismatch(output, reference, reduction)`` must accept what rounding explains and nothing
more: the allowance grows with the dtype's epsilon and with the square root of the
reduction length, integers and bools match exactly, NaN or inf where the reference has a
number is wrong (and NaN where it has NaN is right), an output of the wrong shape is
wrong, and the message names how many elements are off and the position of the first.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

import te
from autotune.verify import SAFETY, mismatch, reduction_length, tolerance

FLOATS = ["float16", "float32", "float64"]


def ones(dtype: str, shape=(4, 5)) -> np.ndarray:
    return np.ones(shape, dtype)


def nudged(reference: np.ndarray, position, delta: float) -> np.ndarray:
    """``reference`` with ``delta`` added at ``position`` (computed in float64, stored in its dtype)."""
    out = reference.copy()
    out[position] = np.float64(reference[position]) + delta
    return out


# ---------------------------------------------------------------- tolerance


@pytest.mark.parametrize("dtype", FLOATS)
def test_tolerance_is_epsilon_times_safety_times_sqrt_of_the_reduction(dtype):
    eps = float(np.finfo(dtype).eps)
    assert tolerance(dtype, 1) == pytest.approx((SAFETY * eps, SAFETY * eps))
    assert tolerance(dtype, 64)[0] == pytest.approx(8 * SAFETY * eps)


def test_tolerance_orders_the_float_dtypes_and_is_zero_for_exact_types():
    r16, r32, r64 = (tolerance(d, 100)[0] for d in FLOATS)
    assert r16 > r32 > r64 > 0
    for dtype in ["int8", "int32", "int64", "uint8", "bool"]:
        assert tolerance(dtype, 10_000) == (0.0, 0.0)


# ---------------------------------------------------------------- floats: rounding passes, more does not


@pytest.mark.parametrize("dtype", FLOATS)
def test_identical_outputs_match(dtype):
    ref = np.linspace(-3, 3, 20, dtype=dtype).reshape(4, 5)
    assert mismatch(ref.copy(), ref, 1) is None


@pytest.mark.parametrize("dtype", FLOATS)
def test_an_error_within_the_allowance_passes_and_one_beyond_fails(dtype):
    # reference all ones: the bound is atol + rtol * |ref| = 2 * rtol
    rtol, _ = tolerance(dtype, 1)
    ref = ones(dtype)
    assert mismatch(nudged(ref, (1, 2), 1.5 * rtol), ref, 1) is None
    assert mismatch(nudged(ref, (1, 2), 3.0 * rtol), ref, 1) is not None
    assert mismatch(nudged(ref, (1, 2), -3.0 * rtol), ref, 1) is not None


@pytest.mark.parametrize("dtype", FLOATS)
def test_a_longer_reduction_allows_more(dtype):
    rtol_1, _ = tolerance(dtype, 1)
    ref = ones(dtype)
    out = nudged(ref, (0, 0), 3.0 * rtol_1)
    assert mismatch(out, ref, 1) is not None
    assert mismatch(out, ref, 16) is None               # 4x the allowance
    assert mismatch(nudged(ref, (0, 0), 12.0 * rtol_1), ref, 16) is not None


def test_float16_allows_what_float32_refuses():
    rtol16, _ = tolerance("float16", 1)
    ref32 = ones("float32")
    out32 = nudged(ref32, (2, 3), 1.5 * rtol16)
    assert mismatch(out32, ref32, 1) is not None
    assert mismatch(out32.astype("float16"), ref32.astype("float16"), 1) is None


def test_absolute_allowance_scales_with_the_mean_magnitude():
    """A near-zero element among large ones may be off by rounding of the large terms."""
    rtol, _ = tolerance("float32", 1)
    ref = np.full((8,), 1000.0, np.float32)
    ref[3] = 0.0
    assert mismatch(nudged(ref, 3, 0.5 * rtol * 1000.0), ref, 1) is None
    small = np.full((8,), 1e-3, np.float32)
    small[3] = 0.0
    # with small magnitudes the allowance does not shrink below rtol (mean clipped at 1)
    assert mismatch(nudged(small, 3, 0.5 * rtol), small, 1) is None
    assert mismatch(nudged(small, 3, 3.0 * rtol), small, 1) is not None


# ---------------------------------------------------------------- NaN and inf


def test_nan_where_the_reference_has_a_number_is_wrong():
    ref = ones("float32")
    out = ref.copy()
    out[2, 1] = np.nan
    message = mismatch(out, ref, 1)
    assert message is not None and "first at (2, 1)" in message and "nan" in message


def test_an_untouched_poisoned_output_is_wrong_everywhere():
    ref = ones("float32", (3, 4))
    message = mismatch(np.full((3, 4), np.nan, np.float32), ref, 1)
    assert message is not None and message.startswith("12 element(s) off")


def test_nan_where_the_reference_has_nan_is_right_and_a_number_there_is_wrong():
    ref = ones("float64")
    ref[0, 4] = np.nan
    assert mismatch(ref.copy(), ref, 1) is None
    out = ref.copy()
    out[0, 4] = 1.0
    assert "first at (0, 4)" in mismatch(out, ref, 1)


def test_infinities_must_match_in_sign_and_place():
    ref = ones("float32")
    ref[1, 1], ref[3, 0] = np.inf, -np.inf
    assert mismatch(ref.copy(), ref, 1) is None
    # the infinities do not poison the allowance of the finite elements
    rtol, _ = tolerance("float32", 1)
    assert mismatch(nudged(ref, (0, 0), 1.5 * rtol), ref, 1) is None
    assert mismatch(nudged(ref, (0, 0), 3.0 * rtol), ref, 1) is not None
    flipped = ref.copy()
    flipped[1, 1] = -np.inf
    assert "first at (1, 1)" in mismatch(flipped, ref, 1)
    finite = ref.copy()
    finite[3, 0] = np.finfo(np.float32).min
    assert "first at (3, 0)" in mismatch(finite, ref, 1)
    overflow = ones("float32")
    overflow[2, 2] = np.inf
    assert "first at (2, 2)" in mismatch(overflow, ones("float32"), 1)


def test_a_reference_without_finite_values_still_compares():
    ref = np.full((3,), np.nan, np.float32)
    assert mismatch(ref.copy(), ref, 1) is None
    assert mismatch(np.zeros(3, np.float32), ref, 1) is not None


# ---------------------------------------------------------------- integers and bools: exact


@pytest.mark.parametrize("dtype", ["int8", "uint8", "int16", "int32", "int64"])
def test_integers_match_exactly_whatever_the_reduction(dtype):
    ref = np.arange(20, dtype=dtype).reshape(4, 5)
    assert mismatch(ref.copy(), ref, 1) is None
    out = ref.copy()
    out[3, 1] += 1
    message = mismatch(out, ref, 1_000_000)
    assert message == f"1 wrong element(s), first at (3, 1): got {ref[3, 1] + 1}, expected {ref[3, 1]}"


def test_bools_match_exactly():
    ref = np.array([[True, False], [False, True]])
    assert mismatch(ref.copy(), ref, 1) is None
    assert mismatch(~ref, ref, 1).startswith("4 wrong element(s), first at (0, 0)")


# ---------------------------------------------------------------- shapes and messages


@pytest.mark.parametrize("dtype", ["float32", "int32"])
def test_an_output_of_another_shape_is_wrong(dtype):
    ref = np.ones((2, 3), dtype)
    for shape in [(3,), (1, 3), (3, 2), (2, 3, 1), (6,)]:
        message = mismatch(np.ones(shape, dtype), ref, 1)      # (3,) and (1, 3) would broadcast
        assert message is not None and "shape" in message and str(shape) in message, shape


def test_the_message_counts_and_names_the_first_position_in_order():
    ref = np.zeros((3, 4, 5), np.float32)
    out = ref.copy()
    out[2, 0, 1] = 1.0
    out[1, 3, 4] = 2.0
    message = mismatch(out, ref, 7)
    rtol, _ = tolerance("float32", 7)
    assert message.startswith("2 element(s) off")
    assert "first at (1, 3, 4): got 2.0, expected 0.0" in message
    assert f"rtol={rtol:.2g}" in message
    assert "\n" not in message


# ---------------------------------------------------------------- reduction length


def test_reduction_length_is_the_longest_reduction_behind_the_outputs():
    wl = te.create_workload("matmul", M=4, N=5, K=7)
    assert reduction_length(wl.outputs) == 7
    conv = te.create_workload("conv2d", N=1, C=3, H=6, W=6, K=2, R=3, S=2, padding=0)
    assert reduction_length(conv.outputs) == 3 * 3 * 2
    chain = te.create_workload("elementwise_chain", shape=[4, 4])
    assert reduction_length(chain.outputs) == 1
    assert math.isclose(tolerance("float32", reduction_length(wl.outputs))[0],
                        SAFETY * float(np.finfo(np.float32).eps) * math.sqrt(7))


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "int32"])
def test_a_reference_check_decides_exactly_as_mismatch(dtype):
    from autotune.verify import ReferenceCheck, tolerance

    rng = np.random.default_rng(0)
    reference = (rng.random((64, 48)) * 100).astype(dtype)
    check = ReferenceCheck(reference, 256)
    rtol, _ = tolerance(dtype, 256)
    cases = [reference.copy()]
    for scale in (0.3, 0.9, 1.5, 10.0):  # errors inside and outside the tolerance
        out = reference.astype(np.float64)
        out[3, 5] *= 1.0 + scale * max(rtol, 1e-12) + (0 if dtype != "int32" else scale > 1)
        cases.append(out.astype(dtype))
    if dtype != "int32":
        nan = reference.copy()
        nan[-1, -1] = np.nan  # an element the kernel never wrote
        cases.append(nan)
    cases.append(reference[:, :47].copy())  # a wrong shape
    for out in cases:
        assert check(out) == mismatch(out, reference, 256)
    assert check(reference.copy()) is None and check(cases[-1]) is not None


def test_a_reference_with_infinities_still_matches_itself_and_only_itself():
    from autotune.verify import ReferenceCheck

    reference = np.array([[1.0, np.inf], [-np.inf, 2.0]], np.float32)
    check = ReferenceCheck(reference, 1)
    assert check(reference.copy()) is None
    wrong = reference.copy()
    wrong[0, 1] = 5.0
    assert check(wrong) == mismatch(wrong, reference, 1) and check(wrong) is not None
