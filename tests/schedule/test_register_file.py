"""The CPU space sizes register tiles from the target's register file (AVX-512 and AVX2 both occur)."""
from __future__ import annotations

import random

import pytest

import te
from schedule.space import REGISTER_ROWS, ConfigSpace, RegisterFile, register_rows
from schedule.targets import parse_target
from sched_helpers import check


def _space(target: str) -> ConfigSpace:
    # M = 336 = 16 * 3 * 7: register tiles of 6 and 14 rows divide it.
    return ConfigSpace.from_workload(te.create_workload("matmul", M=336, N=256, K=64), target)


def _with_register_tile(space: ConfigSpace, i: int, j: int):
    decisions = space.decisions(space.sample(random.Random(0)))
    c = decisions["C"]
    return decisions.replace(c.with_tiles(i=(1, 1, i), j=(1, 1, j))).to_config()


def test_presets_carry_their_register_file_into_the_space():
    assert _space("cpu:avx512").registers == RegisterFile(vector_bytes=64, count=32)
    assert _space("cpu:avx2").registers == RegisterFile(vector_bytes=32, count=16)
    assert parse_target("cpu:avx2").facts.vector_registers == 16


@pytest.mark.parametrize("i,j,avx512_ok,avx2_ok", [
    (8, 32, True, False),     # 16 zmm accumulators; 32 ymm on AVX2
    (4, 16, True, True),      # 4 zmm or 8 ymm
    (14, 32, True, False),    # 28 accumulators + 2 + 1: the largest AVX-512 tile of that width
    (16, 32, False, False),
    (6, 16, True, True),      # the classic AVX2 6x16 kernel: 12 ymm + 2 + 1
])
def test_a_register_tile_must_fit_the_target_registers(i, j, avx512_ok, avx2_ok):
    for target, ok in (("cpu:avx512", avx512_ok), ("cpu:avx2", avx2_ok)):
        space = _space(target)
        reason = space.check(_with_register_tile(space, i, j))
        if ok:
            assert reason is None, (target, reason)
        else:
            assert reason is not None and "vector registers" in reason, (target, reason)


def test_sampled_configs_never_exceed_the_register_file():
    space = _space("cpu:avx2")
    rng = random.Random(1)
    for _ in range(200):
        c = space.decisions(space.sample(rng))["C"]
        tile = [t[2] for t in c.tiles]
        assert space.registers.vectors_needed(tile, 4) <= 16, tile


def test_register_rows_follow_the_register_file():
    # AVX-512: 14 rows of two-vector accumulators (28) + a row of the streamed input + a broadcast
    assert register_rows(RegisterFile(vector_bytes=64, count=32)) == range(1, 15)
    # AVX2 holds 6 such rows: the 8 rows offered everywhere stay the bound
    assert register_rows(RegisterFile(vector_bytes=32, count=16)) == REGISTER_ROWS == range(1, 9)


def _row_counts(target: str, m: int) -> set[int]:
    space = ConfigSpace.from_workload(te.create_workload("matmul", M=m, N=256, K=64), target)
    knob = next(k for k in space.knobs.knobs if k.name == "C.tile.i")
    return {t[2] for t in knob.candidates}


def test_an_avx512_space_offers_every_row_count_its_registers_hold():
    # 1024 has none of 9..14 as a divisor: only the register file can put them in the space
    assert set(range(9, 15)) <= _row_counts("cpu:avx512", 1024)
    assert not set(range(9, 15)) & _row_counts("cpu:avx2", 1024)


def test_the_largest_register_tile_of_the_host_builds_and_matches_numpy():
    # the most rows the host's register file offers, two vectors wide, over a row axis the rows
    # do not divide (a tail tile), checked against NumPy
    wl = te.create_workload("matmul", M=61, N=64, K=24)
    space = ConfigSpace.from_workload(wl, "cpu")
    lanes = space.registers.vector_bytes // 4
    rows = max(r for r in register_rows(space.registers)
               if space.registers.vectors_needed([r, 2 * lanes], 4) <= space.registers.count)
    assert rows >= 6  # AVX2: 6, AVX-512: 14
    config = _with_register_tile(space, rows, 2 * lanes)
    assert space.check(config) is None
    assert space.decisions(config)["C"].tile("i").sizes[2] == rows
    s, _ = space.apply(config)
    check(s, wl)
