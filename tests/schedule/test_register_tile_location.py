"""A multi-level stage computed per register tile (``at = "c"``, ``AT_REGISTER``): its local
tile is one register tile, at the owner's loops over register tiles, with the whole
reduction inside. Every such config is built and compared with the reference."""
from __future__ import annotations

import random

import pytest

import te
from autotune.task import Task
from schedule.config import Config
from schedule.decisions import AT_BLOCK, AT_REGISTER
from schedule.space import _unroll_extents, reduction_level

from sched_helpers import runnable
from test_compute_at_chain import allocations
from test_space import _check_sampled, _task


def _at(config: Config, at: str) -> Config:
    """``config`` with every stage's ``at`` knob set to ``at``."""
    return Config(config.sketch, dict(config.values, **{k: at for k in config.values if k.endswith(".at")}))


@pytest.mark.parametrize("case", ["matmul", "batch_matmul", "dense", "conv2d", "conv2d_nhwc"])
def test_configs_computed_per_register_tile_match_the_reference(case):
    task = _task(case)
    rng = random.Random(5)
    configs = {}
    for _ in range(200):
        config = _at(task.space.sample(rng), AT_REGISTER)
        if task.space.check(config) is None:
            configs[config.hash] = config
        if len(configs) == 8:
            break
    assert len(configs) == 8
    _check_sampled(None, configs=list(configs.values()), task=task)


def _matmul_config(at: str, pack: str = "panels:B") -> tuple[Task, Config]:
    task = Task("matmul", dict(M=64, N=96, K=80), target=runnable("cpu:avx512"))
    config = Config(task.space.knobs.sketch, {"C.tile.i": (2, 2, 4), "C.tile.j": (1, 3, 16), "C.rtile.k": 16,
                                              "C.at": at, "C.parallel": 1, "C.unroll": 64, "C.pack": pack})
    return task, config


def test_the_local_tile_is_one_register_tile_with_the_whole_reduction_inside():
    task, per_tile = _matmul_config(AT_REGISTER)
    _, per_block = _matmul_config(AT_BLOCK)
    assert task.space.check(per_tile) is None and task.space.check(per_block) is None
    local = {at: next(b.shape for name, b in allocations(task.lower(c).body).items() if "local" in name)
             for at, c in ((AT_REGISTER, per_tile), (AT_BLOCK, per_block))}
    assert local == {AT_REGISTER: (4, 16), AT_BLOCK: (8, 48)}
    # the loops over the register tiles' rows and columns (S2) stay in the owner: none of
    # them is among what the unroll budget may unroll; the rows and reduction steps are
    d = task.space.decisions(per_tile)["C"]
    assert _unroll_extents(d) == [4, 16]
    assert _unroll_extents(task.space.decisions(per_block)["C"]) == [4, 16, 3, 2]
    assert "computed per register tile" in task.space.describe_config(per_tile)
    _check_sampled(None, configs=[per_tile, per_block], task=task)


@pytest.mark.parametrize("pack", ["A", "B"])
def test_a_local_copy_is_refused_when_computed_per_register_tile(pack):
    task, config = _matmul_config(AT_REGISTER, pack)
    assert "no cache block step" in task.space.check(config)
    assert task.space.check(_matmul_config(AT_BLOCK, pack)[1]) is None


def test_panels_per_block_are_packed_at_the_owners_cache_block_loop_the_whole_reduction_long():
    task, per_tile = _matmul_config(AT_REGISTER, "block-panels:B")
    _, per_block = _matmul_config(AT_BLOCK, "block-panels:B")
    panels = {at: next(b.shape for name, b in allocations(task.lower(c).body).items() if "panels" in name)
              for at, c in ((AT_REGISTER, per_tile), (AT_BLOCK, per_block))}
    # a cache block of 48 columns: three panels of 16; all 80 steps of the reduction per
    # register tile, one outer step of 16 at a cache block
    assert panels == {AT_REGISTER: (3, 80, 16), AT_BLOCK: (3, 16, 16)}
    _check_sampled(None, configs=[per_tile, per_block], task=task)


def _combine():
    """The combine of a FlashAttention over the task's shape (its loops: h, i, t, d)."""
    Q, K, V = (te.placeholder((2, 128, 16), "float32", n) for n in "QKV")
    return te.ops.flash_attention(Q, K, V, block=64).op.input_tensors[0].op


def test_a_host_computed_per_register_tile_hosts_no_stage_at_its_reduction_loop():
    """FlashAttention's key-block stages run at the combine's loop over key blocks; computed
    per register tile, that loop would run once per tile, and so would they."""
    task = Task("attention", dict(heads=2, seq=128, dim=16, causal=False), target=runnable("cpu:avx512"))
    space = task.space
    # each block stage's attach knob: 0 (on its own) or the combine's reduction level
    block_attach = {k.name: max(k.candidates) for k in space.knobs.knobs
                    if k.name.startswith("flash64/") and k.name.endswith(".attach") and "combine" not in k.name}
    assert set(block_attach.values()) == {reduction_level(_combine())}
    rng = random.Random(0)
    config = next(c for c in (space.sample(rng) for _ in range(500)) if space.algorithm(c) == "flash64")
    no_copies = {k: "none" for k in config.values if k.startswith("flash64/") and k.endswith(".pack")}
    hosted = Config(config.sketch, dict(config.values, **block_attach, **no_copies,
                                        **{"flash64/flash_combine.attach": 0}))
    at_block = Config(hosted.sketch, dict(hosted.values, **{"flash64/flash_combine.at": AT_BLOCK}))
    at_tile = Config(hosted.sketch, dict(hosted.values, **{"flash64/flash_combine.at": AT_REGISTER}))
    assert "inside each of its register tiles" in (space.check(at_tile) or "")
    assert "register tiles" not in (space.check(at_block) or "")
    # on its own, the combine's blocks are stored whole, and per register tile it matches
    alone = Config(at_tile.sketch, dict(at_tile.values, **dict.fromkeys(block_attach, 0)))
    assert space.check(alone) is None
    _check_sampled(None, configs=[alone], task=task)
