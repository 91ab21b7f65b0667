"""Stages computed at their host's loops: the sketch's hosts, the ``attach`` knob, its
validity rule, the starting points that fuse rows, and sampled configs against NumPy."""
from __future__ import annotations

import dataclasses
import math
import random

import pytest

import te
import schedule
from schedule import ir
from schedule.explain import explain
from schedule.sketch import MULTI_LEVEL, SIMPLE, derive_sketch
from schedule.space import ConfigSpace
from sched_helpers import check


def plans(wl) -> dict:
    return {p.name: p for p in derive_sketch(wl.outputs).plans}


def test_softmax_statistics_have_the_division_as_host():
    wl = te.create_workload("softmax", shape=[8, 16])
    by_name = plans(wl)
    for name in ("softmax_max", "softmax_exp", "softmax_sum"):
        assert by_name[name].role == SIMPLE and by_name[name].host.name == "softmax"
    assert by_name["softmax"].host is None  # the output itself
    assert {r.name for r in by_name["softmax_exp"].readers} == {"softmax_sum", "softmax"}
    knobs = {k.name: k.candidates for k in ConfigSpace.from_workload(wl).knobs.knobs}
    assert knobs["softmax_max.attach"] == (0, 1)  # not in the loop over column tiles: all again per tile
    assert knobs["softmax_exp.attach"] == (0, 1, 2)
    assert "softmax.attach" not in knobs


def test_reads_through_an_inlined_stage_use_the_readers_indices():
    """layernorm's squared deviations read the mean (inlined) at the row they reduce: no
    read ignores the row axis, so there is no reuse to tile for: a simple stage."""
    by_name = plans(te.create_workload("layernorm", M=8, N=16))
    assert by_name["layernorm_sqdev"].role == SIMPLE
    assert by_name["layernorm_sqdev"].host.name == "layernorm"
    assert by_name["layernorm_sum"].host.name == "layernorm"


def _attached(space, config, levels: dict):
    d = space.decisions(config)
    for stage, level in levels.items():
        d = d.replace(dataclasses.replace(d[stage], attach=level))
    return space.encode(d)


def test_a_reader_left_outside_the_loop_makes_the_config_invalid():
    wl = te.create_workload("softmax", shape=[8, 16])
    space = ConfigSpace.from_workload(wl)
    base = space.sample(random.Random(0))
    bad = _attached(space, base, {"softmax_max": 1, "softmax_exp": 0, "softmax_sum": 0})
    reason = space.check(bad)
    assert reason is not None and "softmax_exp" in reason and "outside that loop" in reason
    deeper = _attached(space, base, {"softmax_max": 1, "softmax_exp": 2, "softmax_sum": 1})
    assert "softmax_exp" in space.check(deeper)  # the sum reads the exp at the outer loop
    good = _attached(space, base, {"softmax_max": 1, "softmax_exp": 1, "softmax_sum": 1})
    assert space.check(good) is None


@pytest.mark.parametrize("name, params", [
    ("softmax", dict(shape=[37, 301])),
    ("softmax", dict(shape=[6, 9, 20], axis=1)),
    ("softmax", dict(shape=[33, 40], axis=0)),
    ("layernorm", dict(M=29, N=203)),
    ("pool2d", dict(N=1, C=5, H=9, W=9, kernel=3, stride=2, padding=1, pool_type="avg")),
])
def test_sampled_configs_with_attached_stages_match_numpy(name, params):
    wl = te.create_workload(name, **params)
    space = ConfigSpace.from_workload(wl)
    rng = random.Random(1)
    attached = 0
    for _ in range(12):
        config = space.sample(rng)
        attached += sum(bool(getattr(d, "attach", 0)) for d in space.decisions(config))
        s, _ = space.apply(config)
        check(s, wl)
    assert attached > 0


def test_softmax_starting_points_compute_the_rows_statistics_inside_the_parallel_row_loop():
    wl = te.create_workload("softmax", shape=[64, 300])
    space = ConfigSpace.from_workload(wl)
    points = space.starting_points(random.Random(0))
    assert points
    for config in points:
        d = space.decisions(config)
        assert all(d[n].attach == 1 for n in ("softmax_max", "softmax_exp", "softmax_sum"))
        assert "computed inside softmax's outer loop" in space.describe_config(config)
        s, _ = space.apply(config)
        module = check(s, wl)
        parallel = [n for n in ir.walk(module.func.body) if isinstance(n, ir.For) and n.kind == ir.PARALLEL]
        assert len(parallel) == 1
        inside = {n.buffer.name: n.buffer for n in ir.walk(parallel[0].body) if isinstance(n, ir.Allocate)}
        rows = d["softmax"].tiles[0][0]
        assert inside["softmax_exp"].shape == (rows, 300)  # a block of rows, not the whole array
        # intermediate memory: a block of rows per thread, far less than the 64x300 exp array
        assert explain(module.func.body).peak_bytes <= rows * 302 * 4


def test_an_attached_reduction_is_folded_and_an_attached_elementwise_stage_vectorized():
    wl = te.create_workload("softmax", shape=[16, 256])
    space = ConfigSpace.from_workload(wl)
    config = space.starting_points(random.Random(0))[0]
    s, _ = space.apply(config)
    source = check(s, wl).source
    assert "reduction(max:softmax_max_acc)" in source and "reduction(+:softmax_sum_acc)" in source
    assert source.count("#pragma omp parallel for") == 1


# ---------------------------------------------------------------- attention: a multi-level host


def test_attention_scores_and_softmax_have_the_product_with_v_as_host():
    wl = te.create_workload("attention", heads=2, seq=16, dim=8)
    by_name = plans(wl)
    assert by_name["attention_score"].role == MULTI_LEVEL and by_name["attention_score"].host.name == "attention"
    assert by_name["softmax_max"].role == SIMPLE  # was tiled for a reuse through the inlined logits it lacks
    assert all(by_name[n].host.name == "attention" for n in ("softmax_max", "softmax_exp", "softmax_sum"))
    knobs = {k.name: k for k in ConfigSpace.from_workload(wl).knobs.knobs}
    assert knobs["attention_score.attach"].candidates == (0, 1, 2)  # (head, query rows), not dim
    assert knobs["attention_score.attach"].default == 0
    assert "attention.attach" not in knobs  # the output


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_sampled_attention_configs_with_attached_stages_match_numpy(causal):
    wl = te.create_workload("attention", heads=2, seq=37, dim=8, causal=causal)
    space = ConfigSpace.from_workload(wl)
    rng = random.Random(2)
    attached = 0
    for _ in range(10):
        config = space.sample(rng)
        attached += space.decisions(config)["attention_score"].attached
        s, _ = space.apply(config)
        check(s, wl)
    assert attached > 0


def test_attention_starting_points_compute_score_blocks_inside_the_parallel_loop():
    """FlashAttention's blocking: per block of query rows, the scores over every key, their
    softmax and the product with V; the (heads, seq, seq) score matrix never exists."""
    heads, seq, dim = 8, 512, 16
    wl = te.create_workload("attention", heads=heads, seq=seq, dim=dim, causal=True)
    space = ConfigSpace.from_workload(wl)
    points = [c for c in space.starting_points(random.Random(0)) if space.algorithm(c) == "direct"]
    fused = [c for c in points if space.decisions(c)["attention_score"].attach == 2]
    alone = [c for c in points if not space.decisions(c)["attention_score"].attach]
    assert fused and alone
    for config in fused[:2]:
        d = space.decisions(config)
        assert all(d[n].attach == 2 for n in ("softmax_max", "softmax_exp", "softmax_sum"))
        assert "computed inside attention's outer loop over its axis i" in space.describe_config(config)
        s, _ = space.apply(config)
        module = check(s, wl)
        (parallel,) = [n for n in ir.walk(module.func.body) if isinstance(n, ir.For) and n.kind == ir.PARALLEL
                       and any(isinstance(a, ir.Allocate) for a in ir.walk(n.body))]  # not the panel copies
        inside = {n.buffer.name: n.buffer.shape for n in ir.walk(parallel.body) if isinstance(n, ir.Allocate)}
        rows = inside["softmax_exp"][1]
        assert inside["softmax_exp"] == (1, rows, seq) and rows < seq
        # the block of scores, in storage of its own or shared with a stage computed after it
        (score,) = [shape for name, shape in inside.items()
                    if name == "attention_score" or name.startswith("attention_score_")]
        assert math.prod(score) == rows * seq
        score_matrix = heads * seq * seq * 4
        # on 2 threads: two blocks of scores and exponentials, the panels of K and V
        assert explain(module.func.body, threads=2).peak_bytes_threads <= score_matrix / 2


# ---------------------------------------------------------------- one schedule, one trial


def test_configs_differing_only_in_what_an_attached_stage_ignores_build_one_schedule():
    wl = te.create_workload("softmax", shape=[16, 64])
    space = ConfigSpace.from_workload(wl)
    base = space.starting_points(random.Random(0))[0]
    d = space.decisions(base)
    other_tiles = [c for c in dict((k.name, k.candidates) for k in space.knobs.knobs)["softmax_max.tile.i0"]
                   if c != d["softmax_max"].tiles[0][0]][0]
    twin = space.encode(d.replace(dataclasses.replace(d["softmax_max"].with_tiles(i0=(other_tiles,)), parallel=1)))
    assert twin.to_json() != base.to_json() and space.check(twin) is None
    assert space.schedule_key(twin) == space.schedule_key(base)
    assert str(schedule.lower(*space.apply(twin))) == str(schedule.lower(*space.apply(base)))
    alone = space.encode(d.replace(dataclasses.replace(d["softmax_max"], attach=0)))
    alone_twin = space.encode(space.decisions(alone).replace(
        dataclasses.replace(space.decisions(alone)["softmax_max"].with_tiles(i0=(other_tiles,)))))
    assert space.check(alone) is None and space.check(alone_twin) is None
    assert space.schedule_key(alone) != space.schedule_key(alone_twin)  # on its own, its tiles count


def test_a_tuner_never_proposes_two_configs_of_one_schedule():
    from autotune.tuners import make_tuner

    wl = te.create_workload("softmax", shape=[4, 8])
    space = ConfigSpace.from_workload(wl)
    tuner = make_tuner("random", space, seed=0)
    proposed = [c for _ in range(6) for c in tuner.next_batch(32)]
    keys = [space.schedule_key(c) for c in proposed]
    assert len(set(keys)) == len(keys) == len(proposed)
    assert len({c.to_json() for c in proposed}) == len(proposed)
