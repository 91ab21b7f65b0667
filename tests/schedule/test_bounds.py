"""Bound inference of reads through a constant division or remainder (``schedule/bounds.py``)."""
from __future__ import annotations

from te.expr import Var

from schedule.bounds import infer_region


def _region(index_of, shape, varying):
    region = infer_region(shape, [(index_of,)], varying)
    return str(region.mins[0]), region.extents[0]


def test_a_division_by_the_panel_width_spans_the_panels_of_the_block():
    block, j = Var("block", "int64"), Var("j", "int64")
    # columns block*32 + j, j < 32: the panels block*2 and block*2 + 1 of 64
    mins, extent = _region((block * 32 + j) // 16, (64,), {j: 32})
    assert extent == 2 and mins.replace(" ", "") in ("(block*2)", "block*2"), mins


def test_a_remainder_within_one_panel_keeps_its_lanes_and_across_panels_takes_all():
    block, j = Var("block", "int64"), Var("j", "int64")
    assert _region((block * 16 + j + 4) % 16, (16,), {j: 8}) == ("4", 8)
    mins, extent = _region((block * 16 + j) % 16, (16,), {j: 32})
    assert (mins, extent) == ("0", 16)


def test_a_base_that_is_not_a_multiple_of_the_divisor_falls_back_to_the_whole_extent():
    block, j = Var("block", "int64"), Var("j", "int64")
    assert _region((block * 24 + j) // 16, (64,), {j: 8}) == ("0", 64)
    assert _region((block * 24 + j) % 16, (16,), {j: 4}) == ("0", 16)
    assert _region((block * 32 + j) * j // 16, (64,), {j: 4}) == ("0", 64)  # non-linear in j
