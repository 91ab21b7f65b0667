"""Starting points: micro-kernel-shaped configs the model-guided and GA tuners measure first."""
from __future__ import annotations

import dataclasses
import random

import numpy as np
import pytest

import te
from autotune.cost_model import XGBCostModel
from autotune.task import Task
from autotune.tuners import GATuner, RandomTuner, SearchOptions, XGBTuner
from schedule.space import ConfigSpace
from schedule.targets import parse_target
from schedule.starting_points import LIMIT

from sched_helpers import check
from test_space import CASES, _check_sampled


def _space(target: str, name: str = "matmul", l1d: tuple[int, int] = (48 * 1024, 64), **params) -> ConfigSpace:
    """The space on ``target`` with an L1 of ``l1d`` (bytes, ways); by default one whose
    ways hold every register tile's rows, so the register file alone sizes the tiles (the
    L1's share has a test of its own)."""
    target = parse_target(target).with_facts(l1d_bytes=l1d[0], l1d_ways=l1d[1])
    return ConfigSpace.from_workload(te.create_workload(name, **(params or dict(M=1024, N=1024, K=1024))), target)


@pytest.mark.parametrize("target,width", [("cpu:avx512", 32), ("cpu:avx2", 16)])
def test_points_fill_the_register_file_and_pack_the_streamed_input(target, width):
    space = _space(target)
    points = space.starting_points(random.Random(0))
    assert 1 < len(points) <= LIMIT and len({c.hash for c in points}) == len(points)
    widths = set()
    at = {}
    for config in points:
        assert space.check(config) is None
        c = space.decisions(config)["C"]
        tile = [t[2] for t in c.tiles]
        needed = space.registers.vectors_needed(tile, 4)
        assert space.registers.count // 2 < needed <= space.registers.count, (target, tile)
        assert c.panel_pack == "B"
        at.setdefault(dataclasses.replace(c, at="b"), set()).add(c.at)
        widths.add(tile[-1])
    assert max(widths) == width  # two vectors wide at most: AVX-512 32 floats, AVX2 16
    # computed at a cache block, and the first ones also per register tile (the same tiles)
    assert all("b" in where for where in at.values())
    assert {"b", "c"} in at.values() and list(at.values())[0] == {"b", "c"}


@pytest.mark.parametrize("target,rows,small_rows", [("cpu:avx2", 6, 6), ("cpu:avx512", 14, 13)])
def test_the_widest_points_take_the_most_rows_the_register_file_holds_on_a_power_of_two(target, rows, small_rows):
    # 1024 has no divisor 6, yet 6 rows of two ymm accumulators (12 + 2 + 1 of AVX2's 16
    # registers) is the tile that keeps both FMA pipes busy; 4 rows leave them waiting.
    # AVX-512's 32 registers hold 14 rows of two zmm accumulators (28 + 2 + 1).
    space = _space(target)
    tiles = [[t[2] for t in space.decisions(c)["C"].tiles] for c in space.starting_points(random.Random(0))]
    widest = max(width for _, width in tiles)
    assert {r for r, width in tiles if width == widest} == {rows}, tiles
    # a tail of rows is computed, and matches the reference (64 rows: 13-row tiles waste
    # one row where 14-row tiles waste six, and compute as many useful rows per tile)
    wl = te.create_workload("matmul", M=64, N=64, K=32)
    small = ConfigSpace.from_workload(wl, target)
    config = small.starting_points(random.Random(0))[0]
    assert small.decisions(config)["C"].tile("i").sizes[2] == small_rows
    check(small.apply(config)[0], wl)


def test_points_follow_the_space_candidates_on_odd_shapes_and_epilogues():
    space = _space("cpu:avx512", "dense", M=127, N=1023, K=511, bias=True, relu=True)
    points = space.starting_points(random.Random(0))
    assert points and all(space.check(c) is None for c in points)
    # dense's weights are layout-free: the points pack them into panels once, at build time
    # (no per-call copy to weigh against copying one cache block at a time).
    assert {space.decisions(c)["dense"].pack for c in points} == {"prepacked:W"}
    # matmul's B is an ordinary input: at 127 rows, panels per call, panels per cache block and
    # copies per block.
    space = _space("cpu:avx512", M=127, N=1023, K=511)
    assert {space.decisions(c)["C"].pack for c in space.starting_points(random.Random(0))} \
        == {"panels:B", "block-panels:B", "B"}


@pytest.mark.parametrize("l1d,rows_1024", [((48 * 1024, 12), 11), ((32 * 1024, 8), 7)],
                         ids=["48KiB-12way", "32KiB-8way"])
def test_rows_of_a_that_share_an_l1_set_stay_within_its_ways(l1d, rows_1024):
    """With K = 1024 floats the rows of A lie 4 KiB apart, all in one L1 set: the points take
    fewer rows than the set has ways. K = 1000 spreads them over the sets (14 rows), and
    K = 512 puts them in two sets (7 of 14 rows in each)."""
    def widest_rows(**shape):
        space = _space("cpu:avx512", l1d=l1d, **shape)
        tiles = [[t[2] for t in space.decisions(c)["C"].tiles] for c in space.starting_points(random.Random(0))]
        widest = max(width for _, width in tiles)
        return {r for r, width in tiles if width == widest}

    assert widest_rows(M=1024, N=1024, K=1024) == {rows_1024}
    assert widest_rows(M=1000, N=1000, K=1000) == {14}
    assert widest_rows(M=1024, N=1024, K=512) == {14}


@pytest.mark.parametrize("target", ["cpu:avx2", "cpu:avx512"])
def test_a_short_output_first_takes_all_its_rows_in_one_cache_block(target):
    # 128 rows in blocks of 16 or 8 tiles are two or three blocks, and each block of B packed
    # (or copied) where it is read is then packed two or three times; all rows in one block
    # pack it once. The first points do that with each of the three packs.
    space = _space(target, M=128, N=4096, K=4096)
    points = space.starting_points(random.Random(0))
    rows = [space.decisions(c)["C"].tile("i").sizes for c in points]
    whole = [n for n, (b, block, r) in enumerate(rows) if b == 1 and (block - 1) * r < 128 <= block * r]
    assert whole[:3] == [0, 1, 2], rows
    assert {space.decisions(points[n])["C"].pack for n in whole} == {"panels:B", "block-panels:B", "B"}
    assert any(block * r < 128 for _, block, r in rows)  # the smaller blocks follow
    # a tall output keeps its blocks of 16 or 8 tiles: 1024 rows of A are too many for L2
    tall = _space(target)
    assert all(block <= 16 for c in tall.starting_points(random.Random(0))
               for _, block, _ in [tall.decisions(c)["C"].tile("i").sizes])


def test_a_one_row_tile_streams_wide_blocks_a_short_reduction_at_a_time_unpacked():
    # GEMV (M = 1): nothing of B is reused, so no panels; the points stream 512 to 2048
    # columns of B's rows per step of a reduction block of 8 or 16, both cores busy.
    space = _space("cpu:avx512", M=1, N=4096, K=4096)
    points = space.starting_points(random.Random(0))
    assert points and all(space.check(c) is None for c in points)
    for config in points:
        c = space.decisions(config)["C"]
        _, block, width = c.tile("j").sizes
        assert 512 <= block * width <= 2048 and c.reduce_tiles[0][0] in (8, 16)
        assert c.pack == "none" and c.parallel == 2
    wl = te.create_workload("matmul", M=1, N=200, K=40)
    small = ConfigSpace.from_workload(wl, "cpu:avx512")
    for config in small.starting_points(random.Random(0)):
        s, _ = small.apply(config)
        check(s, wl)


@pytest.mark.parametrize("case", ["matmul", "dense", "conv2d", "batch_matmul"])
def test_points_build_and_match_the_reference(case):
    space = Task(case if case != "conv2d_nhwc" else "conv2d", CASES[case]).space
    points = space.starting_points(random.Random(1))
    assert points
    _check_sampled(case, configs=points)


def test_a_gpu_space_has_none():
    space = ConfigSpace.from_workload(te.create_workload("matmul", M=64, N=64, K=64), "cuda:sm_80")
    assert space.starting_points(random.Random(0)) == []


def _first_batch(tuner, n=32):
    return {c.hash for c in tuner.next_batch(n)}


def test_the_climbing_tuners_measure_them_first_and_random_does_not():
    space = _space("cpu")
    points = {c.hash for c in space.starting_points(random.Random(0))}
    features = lambda c: np.zeros(4, np.float32)  # noqa: E731 - the first batch never asks the model
    xgb = XGBTuner(space, features, seed=0, options=SearchOptions(), model=XGBCostModel(seed=0, nthread=1))
    assert points <= _first_batch(xgb)
    assert points <= _first_batch(GATuner(space, seed=0))
    assert not points & _first_batch(RandomTuner(space, seed=0))
    again = GATuner(space, seed=0)
    again.update(list(space.starting_points(random.Random(0))), [1.0] * len(points))  # a resumed run measured them
    assert not points & _first_batch(again)
