"""Row tiles that do not divide their axis also come in even cache blocks (``even_row_blocks``)."""
from __future__ import annotations

import random

import te
from schedule.space import ConfigSpace, even_row_blocks, factor_candidates, tile_candidates
from sched_helpers import check


def test_six_row_tiles_of_128_rows_come_in_one_to_four_even_blocks():
    # 22 tiles: one block of 22, two of 11, three of 8 (8 + 8 + 6), four of 6 (6 + 6 + 6 + 4).
    assert even_row_blocks(128, 6) == [(1, 22, 6), (1, 11, 6), (1, 8, 6), (1, 6, 6)]
    cands = tile_candidates(128, 8, rows=True)
    assert {(1, 22, 6), (1, 11, 6), (1, 6, 6)} <= set(cands)
    assert len(cands) == len(set(cands))


def test_row_tiles_that_divide_the_axis_and_vector_axes_get_no_extra_blocks():
    powers = set(factor_candidates(128))
    assert all(t2 in powers for _, t2, t3 in tile_candidates(128, 8, rows=True) if 128 % t3 == 0)
    assert all(t2 in powers for _, t2, _ in tile_candidates(128, 8, rows=False))


def test_starting_points_cut_128_rows_into_even_blocks():
    space = ConfigSpace.from_workload(te.create_workload("matmul", M=128, N=4096, K=4096), "cpu:avx2")
    row_tiles = {space.decisions(c)["C"].tile("i").sizes for c in space.starting_points(random.Random(0))}
    # all 22 tiles in one block (a short output), then 16 and 8 tiles per block evened out
    # over the 22 tiles: blocks of 11 and of 8.
    assert row_tiles == {(1, 22, 6), (1, 11, 6), (1, 8, 6)}


def test_an_even_block_computes_the_reference():
    # 26 rows in 6-row tiles: 5 tiles in two blocks of 3, the last tile 2 rows.
    wl = te.create_workload("matmul", M=26, N=32, K=16)
    space = ConfigSpace.from_workload(wl, "cpu:avx2")
    config = space.decisions(space.starting_points(random.Random(0))[0])
    c = config["C"].with_tiles(i=(1, 3, 6), j=(1, 2, 16))
    s, arrays = space.apply(config.replace(c).to_config())
    check(s, wl)
