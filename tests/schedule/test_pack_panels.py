"""Panel packing: an input rewritten into register-tile-wide panels, by hand and in the space."""
from __future__ import annotations

import dataclasses
import random
import re

import pytest

import backends
import schedule
import te
from autotune.task import Task
from schedule.config import Config
from schedule.stage import ScheduleError
from schedule.space import panel_inputs

from sched_helpers import check, tensor
from test_space import CASES, _check_sampled


def _matmul_with_panels(M, N, K, width, panels=None):
    wl = te.create_workload("matmul", M=M, N=N, K=K)
    A, B, C = wl.args
    s = schedule.create_schedule(C)
    CL = s.cache_write(C, "local")
    packed = s.pack_panels(B, 1, width, [CL], panels)
    return wl, s, packed, CL


@pytest.mark.parametrize("N,width", [(48, 16), (17, 4), (5, 8)])
def test_panels_hold_the_input_and_the_reader_gets_the_same_result(N, width):
    wl, s, packed, CL = _matmul_with_panels(13, N, 11, width)
    assert packed.shape == (-(-N // width), 11, width)
    i, j = s[CL].op.axis
    (k,) = s[CL].op.reduce_axis
    jo, ji = s[CL].split(j, factor=width)
    s[CL].reorder(i, jo, k, ji)
    s[CL].vectorize(ji)
    s[packed].vectorize(s[packed].op.axis[-1])
    check(s, wl)


def test_the_reader_indexes_whole_panels_when_its_tile_matches_the_width():
    wl, s, packed, CL = _matmul_with_panels(16, 64, 8, 16)
    C = wl.outputs[0]
    i, j = C.op.axis
    io, jo, ii, ji = s[C].tile(i, j, 4, 16)
    s[CL].compute_at(s[C], jo)
    source = backends.build(s, wl.args).source
    indices = re.findall(r"B_panels\[([^\]]*)\]", source)
    assert len(indices) >= 2, source  # written by the packing loop, read by the tile
    assert not any("/" in x or "%" in x for x in indices), indices
    check(s, wl)


def _blocked_with_panels(N, block_tiles, M=12, K=19, width=8, panels=None):
    """C in cache blocks of ``4 x block_tiles*width``, a register tile of 4 x ``width``,
    B in ``panels`` panels of ``width``: the register tile's shape of the CPU sketch."""
    wl, s, packed, CL = _matmul_with_panels(M, N, K, width, panels)
    C = wl.outputs[0]
    i, j = C.op.axis
    io, jo, ii, ji = s[C].tile(i, j, 4, block_tiles * width)
    s[CL].compute_at(s[C], jo)
    ci, cj = s[CL].op.axis
    (k,) = s[CL].op.reduce_axis
    cj2, cj3 = s[CL].split(cj, factor=width)
    s[CL].reorder(cj2, k, ci, cj3)
    s[CL].unroll(ci)
    s[CL].vectorize(cj3)
    return wl, s


def _register_tiles(func):
    """The promoted accumulator tiles of ``func`` (their allocations)."""
    return [x for x in schedule.ir.walk(func.body)
            if isinstance(x, schedule.ir.Allocate) and x.buffer.name == "C.local.acc"]


def _extents(stmt):
    return [x.extent for x in schedule.ir.walk(stmt) if isinstance(x, schedule.ir.For)]


def test_a_block_past_the_edge_reads_zero_padded_panels_so_it_keeps_no_guard():
    # N = 36: five panels of 8 (the last padded with 4 zero columns), blocks of one
    # panel. The last block overhangs the tensor by 4 columns, all inside the padding:
    # it is computed whole, with constant loops and no tail version.
    wl, s = _blocked_with_panels(N=36, block_tiles=1)
    func = schedule.lower(s, wl.args)
    tiles = _register_tiles(func)
    assert len(tiles) == 1
    assert all(schedule.ir.const_int(e) is not None for e in _extents(tiles[0])), str(tiles[0])
    assert not any(isinstance(x, schedule.ir.IfThenElse) for x in schedule.ir.walk(func.body))
    check(s, wl)


def test_a_block_past_the_panels_keeps_its_guard():
    # Blocks of two panels: the last block reaches column 47, past the five panels, so
    # the tile is versioned: a full tile of 8 columns and, for the one tile that starts
    # at column 32, a tail tile of the 4 columns left (36 - 32), both of constant extents.
    wl, s = _blocked_with_panels(N=36, block_tiles=2)
    func = schedule.lower(s, wl.args)
    tiles = _register_tiles(func)
    assert len(tiles) == 2
    assert [t.buffer.shape[-1] for t in tiles] == [8, 4]
    assert all(schedule.ir.const_int(e) is not None for t in tiles for e in _extents(t))
    assert any(isinstance(x, schedule.ir.IfThenElse) for x in schedule.ir.walk(func.body))
    check(s, wl)


def test_panels_padded_to_whole_blocks_let_the_last_block_compute_whole():
    # The blocks of two panels above, with B padded with zeros to six panels (48 columns):
    # the last block's overhang reads zeros, so it is computed whole, as BLAS libraries
    # compute the edge of a packed panel.
    wl, s = _blocked_with_panels(N=36, block_tiles=2, panels=6)
    func = schedule.lower(s, wl.args)
    tiles = _register_tiles(func)
    assert len(tiles) == 1
    assert all(schedule.ir.const_int(e) is not None for e in _extents(tiles[0])), str(tiles[0])
    check(s, wl)
    with pytest.raises(ScheduleError, match="at least 5"):
        _blocked_with_panels(N=36, block_tiles=2, panels=4)


def _panels_buffer(func):
    """The buffer ``B.panels`` that ``func`` allocates."""
    return next(x.buffer for x in schedule.ir.walk(func.body)
                if isinstance(x, schedule.ir.Allocate) and x.buffer.name == "B.panels")


def test_the_space_pads_panels_to_whole_blocks_of_the_vector_axis():
    # Columns in blocks of two register tiles, the last block overhanging by more than a
    # panel: the panels cover whole blocks, and only the rows' edge versions the tile.
    probe = Task("matmul", dict(M=20, N=64, K=9)).space
    width = probe.decisions(probe.starting_points(random.Random(0))[0])["C"].tile("j").sizes[2]  # the ISA's
    task = Task("matmul", dict(M=20, N=24 * width + width // 2, K=9))  # 24 and a half tiles
    space = task.space
    decisions = space.decisions(space.starting_points(random.Random(0))[0])
    edited = decisions["C"].with_tiles(i=(1, 2, 4), j=(1, 2, width))
    config = decisions.replace(dataclasses.replace(edited, pack="panels:B")).to_config()
    assert space.check(config) is None
    func = task.lower(config)
    panels = _panels_buffer(func)
    assert panels.shape[0] == 26  # 13 blocks of two panels (6 % of zeros), not ceil(24.5) = 25 panels
    source = backends.cpu.generate_source(func)
    assert f"at_min_int64({width}, " not in source, source  # no column tile shortened at the edge
    _check_sampled(None, configs=[config], task=task)
    # One column past two tiles: a whole block of zeros would double the work; whole panels only.
    task = Task("matmul", dict(M=20, N=2 * width + 1, K=9))
    assert task.space.check(config) is None
    func = task.lower(config)
    panels = _panels_buffer(func)
    assert panels.shape[0] == 3
    _check_sampled(None, configs=[config], task=task)


@pytest.mark.parametrize("N", [48, 36])
def test_panels_packed_per_reduction_block_hold_only_that_blocks_panels(N):
    # GotoBLAS's placement: the panels a cache block reads are packed inside it, one block
    # of k at a time, so they stay in cache. The reader indexes them as j // 8 and j % 8 of
    # a column block starting at a multiple of 8: bound inference must narrow both to the
    # block (2 panels x 4 rows of k x 8 lanes), not fall back to the whole of B. N = 36 pads
    # the last panel with zeros.
    wl, s, packed, CL = _matmul_with_panels(12, N, 19, 8)
    C = wl.outputs[0]
    i, j = C.op.axis
    io, jo, ii, ji = s[C].tile(i, j, 4, 16)
    s[CL].compute_at(s[C], jo)
    ci, cj = s[CL].op.axis
    (k,) = s[CL].op.reduce_axis
    ko, ki = s[CL].split(k, factor=4)
    cj2, cj3 = s[CL].split(cj, factor=8)
    s[CL].reorder(ko, cj2, ki, ci, cj3)
    s[CL].vectorize(cj3)
    s[packed].compute_at(s[CL], ko)
    s[packed].vectorize(s[packed].op.axis[-1])
    func = schedule.lower(s, wl.args)
    shapes = [x.buffer.shape for x in schedule.ir.walk(func.body)
              if isinstance(x, schedule.ir.Allocate) and x.buffer.name == "B.panels"]
    assert shapes == [(2, 4, 8)], str(func)
    check(s, wl)


def test_an_overhang_that_reads_another_stages_region_keeps_its_guard():
    # B copied into a local tile instead of panels: past column 35 there is nothing to
    # copy (the copy guards its own overhang), so the tile keeps its guard and tail.
    wl = te.create_workload("matmul", M=12, N=36, K=19)
    A, B, C = wl.args
    s = schedule.create_schedule(C)
    CL = s.cache_write(C, "local")
    i, j = C.op.axis
    io, jo, ii, ji = s[C].tile(i, j, 4, 8)
    s[CL].compute_at(s[C], jo)
    ci, cj = s[CL].op.axis
    (k,) = s[CL].op.reduce_axis
    s[CL].reorder(k, ci, cj)
    s[CL].unroll(ci)
    s[CL].vectorize(cj)
    BL = s.cache_read(B, "local", [CL])
    s[BL].compute_at(s[CL], k)
    func = schedule.lower(s, wl.args)
    updates = [x for x in schedule.ir.walk(func.body) if isinstance(x, schedule.ir.For)
               and x.kind == schedule.ir.VECTORIZED and "B.local" in str(x.body)]
    assert updates and all(schedule.ir.const_int(x.extent) is None for x in updates), str(func)
    check(s, wl)


def test_dense_weights_pack_along_their_first_dimension():
    wl = te.create_workload("dense", M=9, N=20, K=7)
    W = tensor(wl, "W")
    s = schedule.create_schedule(wl.outputs)
    dense = next(st for st in s.stages if st.name == "dense")
    packed = s.pack_panels(W, 0, 8, [dense])
    assert packed.shape == (3, 7, 8)
    check(s, wl)


def test_bad_arguments_are_refused_where_they_are_given():
    wl = te.create_workload("matmul", M=8, N=8, K=8)
    A, B, C = wl.args
    s = schedule.create_schedule(C)
    with pytest.raises(ScheduleError, match="no dimension 2"):
        s.pack_panels(B, 2, 4, [C])
    with pytest.raises(ScheduleError, match="positive"):
        s.pack_panels(B, 1, 0, [C])
    with pytest.raises(ScheduleError, match="at least one reader"):
        s.pack_panels(B, 1, 4, [])
    other = te.placeholder((8, 8), name="D")
    with pytest.raises(ScheduleError, match="does not read 'D'"):
        s.pack_panels(other, 1, 4, [C])


def test_the_space_offers_panels_of_inputs_indexed_by_the_innermost_axis():
    assert panel_inputs(Task("matmul", dict(M=8, N=8, K=8)).workload.outputs[0].op) == {"B": 1}
    batch = Task("batch_matmul", CASES["batch_matmul"])
    assert "panels:B" in next(k for k in batch.space.knobs.knobs if k.name == "C.pack").candidates
    dense = Task("dense", CASES["dense"])
    pack = next(k for k in dense.space.knobs.knobs if k.name == "dense.pack")
    assert "panels:W" in pack.candidates and "panels:X" not in pack.candidates
    conv = Task("conv2d", CASES["conv2d"])  # NCHW: the innermost axis (ow) reads data through ow + s
    op = conv.workload.outputs[0].op
    assert panel_inputs(op) == {}
    # ... but the output channel k reads the kernel (constant weights) alone: panels along k,
    # for a register tile vectorized over k instead
    assert panel_inputs(op, 1) == {"kernel": 0}
    pack = next(k for k in conv.space.knobs.knobs if k.name == "conv2d.pack")
    assert {"panels:kernel", "prepacked:kernel"} <= set(pack.candidates)
    assert not any("data" in str(c) or "pad" in str(c) for c in pack.candidates if ":" in str(c))


def _with_pack(config: Config, stage: str, pack: str) -> Config:
    return Config(config.sketch, dict(config.values, **{f"{stage}.pack": pack}))


@pytest.mark.parametrize("prefix", ["panels:", "block-panels:"])
@pytest.mark.parametrize("case,stage,packed", [("matmul", "C", "B"), ("dense", "dense", "W"),
                                              ("batch_matmul", "C", "B")])
def test_panel_configs_build_and_match_the_reference(case, stage, packed, prefix):
    """Every sampled config, forced to pack panels whole or per block (the space rejects
    width-1 tiles)."""
    task = Task(case, CASES[case])
    rng = random.Random(3)
    configs = []
    while len(configs) < 8:
        config = _with_pack(task.space.sample(rng), stage, prefix + packed)
        reason = task.space.check(config)
        if reason is None:
            configs.append(config)
        else:
            assert "need a register tile wider than 1" in reason
    _check_sampled(case, configs=configs)
    described = task.space.describe_config(configs[0])
    assert f"packs {packed} into panels" in described


def test_block_panels_in_the_space_hold_one_blocks_panels_for_one_reduction_step():
    # C in cache blocks of 4 x 32 (two panels of 16), k in steps of 32: each step packs the
    # 2 x 32 x 16 panels it reads, inside the block's loops, and nothing packs B whole
    task = Task("matmul", dict(M=16, N=64, K=64))
    config = Config("cpu-v1", {"C.at": "b", "C.parallel": 2, "C.rtile.k": 32, "C.tile.i": [4, 1, 4],
                               "C.tile.j": [2, 2, 16], "C.unroll": 0, "C.pack": "block-panels:B"})
    assert task.space.check(config) is None
    s, args = task.space.apply(config)
    func = schedule.lower(s, args)
    shapes = [x.buffer.shape for x in schedule.ir.walk(func.body)
              if isinstance(x, schedule.ir.Allocate) and x.buffer.name == "B.panels"]
    assert shapes == [(2, 32, 16)], str(func)
    assert "per cache block and outer reduction step" in task.space.describe_config(config)
    _check_sampled(None, configs=[config], task=task)
