"""FlashAttention on the CPU: ``te.softmax_sum`` lowered with its running maximum, the
key-block stages of ``te.ops.flash_attention`` computed inside the combine's loop over
blocks (by hand and by the space), and ``flash64``/``flash128`` as algorithms of the
attention space. Every schedule is built for the CPU and compared with the reference."""
from __future__ import annotations

import random

import pytest

import schedule
import te
from autotune.task import Task
from schedule import ir
from schedule.alternatives import DIRECT, alternatives
from schedule.sketch import derive_sketch
from schedule.space import ConfigSpace, reduction_level

from sched_helpers import check, runnable, tensor, workload
from test_compute_at_chain import allocations, loop_over
from test_space import _check_sampled

BLOCK_STAGES = ("flash_score", "flash_block_max", "flash_block_exp", "flash_block_sum", "flash_block_out")


# ---------------------------------------------------------------- softmax_sum lowered


@pytest.mark.parametrize("split", [1, 4, 7], ids=lambda f: f"reduce-split-{f}")
def test_softmax_sum_lowers_with_a_running_maximum_beside_its_accumulator(split):
    """Rows of 37 logits with a where-condition that leaves row 0 empty, the reduction split
    (7 does not divide 37) and, with a split, its outer loop outside the row loop: every
    row's maximum must be carried across steps of the outer loop, per row."""
    A = te.placeholder((9, 37), "float32", "A")
    L = te.placeholder((9, 37), "float32", "L")
    k = te.reduce_axis((0, 37), "k")
    C = te.compute((9,), lambda i: te.softmax_sum(A[i, k], L[i, k] * 4.0, axis=k, where=k < i * 5), name="C")
    s = schedule.create_schedule(C)
    if split > 1:
        ko, ki = s[C].split(k, factor=split)
        s[C].reorder(ko, C.op.axis[0], ki)
    wl = workload([A, L, C])
    func = check(s, wl).func
    found = allocations(func.body)
    assert found["C_running_max"].shape == (9,), func
    assert "C_running_max = " not in str(func)  # stored per element, never as a scalar


# ---------------------------------------------------------------- by hand


def flash_by_hand(causal: bool, rows: int = 8):
    """flash_attention 2 heads x 64 x 16 in blocks of 16 keys: the combine's loops (head,
    row block) parallel, then its loop over blocks ``j``, then the rows, numerator and
    normalizer, and the vectorized columns; every block stage computed inside ``j`` (the
    logits inlined)."""
    Q, K, V = (te.placeholder((2, 64, 16), "float32", n) for n in "QKV")
    O = te.ops.flash_attention(Q, K, V, causal, block=16)
    wl = workload([Q, K, V, O], name="flash")
    s = schedule.create_schedule(O)
    s[tensor(wl, "flash_logits")].compute_inline()
    C = s[tensor(wl, "flash_combine")]
    h, i, t, d = C.op.axis
    (j,) = C.op.reduce_axis
    io, ii = C.split(i, factor=rows)
    C.reorder(h, io, j, ii, t, d)
    C.vectorize(d)
    for name in BLOCK_STAGES:
        s[tensor(wl, name)].compute_at(C, j)
    C.parallel(C.fuse(h, io))
    return wl, s, j


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_hand_scheduled_flash_attention_holds_one_key_block_at_a_time(causal):
    wl, s, j = flash_by_hand(causal)
    func = check(s, wl).func
    inside = allocations(loop_over(func, j).body)
    expected = {"flash_block_max": (1, 8, 1), "flash_block_exp": (1, 8, 1, 16), "flash_block_sum": (1, 8, 1)}
    for name, shape in expected.items():
        assert inside[name].shape == shape, func
    # the scores and the block's product with V: one block of 8 rows each (they may share)
    blocks = [b for name, b in inside.items() if "flash_score" in name or "flash_block_out" in name]
    assert blocks and all(b.size <= 8 * 16 for b in blocks), func
    largest = max(b.size for b in allocations(func.body).values())
    assert largest == 2 * 64 * 2 * 16  # the combine's accumulator (and its running maximum), no 64 x 64 score


# ---------------------------------------------------------------- the space


def test_attention_offers_flash_algorithms_for_block_sizes_that_divide_the_sequence():
    for causal in (False, True):
        wl = te.create_workload("attention", heads=2, seq=256, dim=16, causal=causal)
        assert sorted(alternatives(wl.outputs)) == ["flash128", "flash64"]
    assert sorted(alternatives(te.create_workload("attention", heads=2, seq=128, dim=16).outputs)) == ["flash64"]
    assert alternatives(te.create_workload("attention", heads=2, seq=96, dim=16).outputs) == {}


def test_a_dag_that_only_looks_like_attention_gets_no_flash_algorithm():
    """Scores not scaled by 1/sqrt(dim): the same stages and tags, another result."""
    Q, K, V = (te.placeholder((2, 128, 16), "float32", n) for n in "QKV")
    k = te.reduce_axis((0, 16), "k")
    S = te.compute((2, 128, 128), lambda h, i, j: te.sum(Q[h, i, k] * K[h, j, k], axis=k),
                   name="attention_score", tag="batch_matmul")
    P = te.ops.softmax(S)
    j = te.reduce_axis((0, 128), "j")
    O = te.compute((2, 128, 16), lambda h, i, d: te.sum(P[h, i, j] * V[h, j, d], axis=j),
                   name="attention", tag="batch_matmul")
    assert alternatives([O]) == {}


def test_the_combine_hosts_every_key_block_stage_at_its_loop_over_blocks():
    Q, K, V = (te.placeholder((2, 128, 16), "float32", n) for n in "QKV")
    O = te.ops.flash_attention(Q, K, V, block=32)
    sketch = derive_sketch([O])
    hosts = {p.op.name: p.host.name for p in sketch.plans if p.host is not None}
    assert {n: hosts.get(n) for n in BLOCK_STAGES} == dict.fromkeys(BLOCK_STAGES, "flash_combine")
    assert hosts["flash_combine"] == "attention"
    space = ConfigSpace.from_tensors([Q, K, V], [O])
    combine = next(p.op for p in sketch.plans if p.op.name == "flash_combine")
    for name in BLOCK_STAGES:
        knob = next(k for k in space.knobs.knobs if k.name == f"{name}.attach")
        assert tuple(knob.candidates) == (0, reduction_level(combine))


def _flash_task(causal: bool) -> Task:
    return Task("attention", dict(heads=2, seq=128, dim=16, causal=causal), target=runnable("cpu:avx512"))


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_flash_starting_points_compute_one_key_block_per_step_and_match(causal):
    task = _flash_task(causal)
    space = task.space
    points = [c for c in space.starting_points(random.Random(0)) if space.algorithm(c) == "flash64"]
    assert points
    per_block = 0
    for config in points[:4]:
        func = task.lower(config)
        sizes = {b.name: b.shape for b in allocations(func.body).values()}
        if "flash_block_exp" in sizes and sizes["flash_block_exp"][2] == 1:  # one block of 64 keys
            per_block += 1
            assert sizes["flash_block_exp"][3] == 64, func
    assert per_block, "no starting point computes the key blocks one at a time"
    _check_sampled(None, configs=points[:4], task=task)


def test_sampled_configs_of_every_attention_algorithm_match_the_reference():
    task = _flash_task(causal=True)
    rng = random.Random(3)
    configs = list({c.hash: c for c in (task.space.sample(rng) for _ in range(12))}.values())
    assert {task.space.algorithm(c) for c in configs} == {DIRECT, "flash64"}
    _check_sampled(None, configs=configs, task=task)
