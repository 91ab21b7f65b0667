"""Horizontal fusion: ``Stage.compute_with``, sibling stages in the sketch, and the space's
``siblings`` knob, each checked against NumPy."""
from __future__ import annotations

import random

import numpy as np
import pytest

import backends
import te
from autotune.task import Task
from schedule import ir, lower
from schedule.config import Config
from schedule.sketch import derive_sketch
from schedule.stage import ScheduleError, create_schedule
from te.ops.linalg import dense

from test_space import _check_sampled


def _projections(M=12, D=10, N=9, relu=(False, False, False)):
    X = te.placeholder((M, D), "float32", "X")
    Ws = [te.placeholder((N, D), "float32", f"W{n}") for n in range(3)]
    bs = [te.placeholder((N,), "float32", f"b{n}") for n in range(3)]
    outs = [dense(X, W, b, relu=r, name=f"p{n}") for n, (W, b, r) in enumerate(zip(Ws, bs, relu))]
    return X, Ws, bs, outs


def _rows_in_parallel(s, outs, rows=4):
    """Each projection's rows split by ``rows``, the outer loop parallel, the product
    computed per row; returns each output stage's outer loop."""
    loops = []
    for out in outs:
        stage = s[out]
        io, ii = stage.split(stage.op.axis[0], factor=rows)
        stage.parallel(io)
        s[out.op.input_tensors[0]].compute_at(stage, ii)
        loops.append(io)
    return loops


def _parallel_loops(stmt) -> int:
    """Parallel loops that write an output (a packing of weights per call has its own)."""
    return sum(1 for n in ir.walk(stmt) if isinstance(n, ir.For) and n.kind == ir.PARALLEL
               and any(isinstance(m, ir.BufferStore) and m.buffer.is_arg for m in ir.walk(n.body)))


def test_compute_with_runs_three_projections_in_one_parallel_loop_and_matches_numpy():
    X, Ws, bs, outs = _projections()
    s = create_schedule(outs)
    loops = _rows_in_parallel(s, outs)
    for out in outs[1:]:
        s[out].compute_with(s[outs[0]], loops[0])
    args = [X, *Ws, *bs, *outs]
    assert _parallel_loops(lower(s, args).body) == 1
    module = backends.build(s, args)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((12, 10), dtype=np.float32)
    ws = [rng.standard_normal((9, 10), dtype=np.float32) for _ in range(3)]
    bias = [rng.standard_normal(9, dtype=np.float32) for _ in range(3)]
    got = [np.full((12, 9), np.nan, np.float32) for _ in range(3)]
    module(x, *ws, *bias, *got)
    for y, w, b in zip(got, ws, bias):
        np.testing.assert_allclose(y, x @ w.T + b, rtol=1e-5, atol=1e-5)


def test_without_compute_with_each_projection_has_its_own_parallel_loop():
    X, Ws, bs, outs = _projections()
    s = create_schedule(outs)
    _rows_in_parallel(s, outs)
    assert _parallel_loops(lower(s, [X, *Ws, *bs, *outs]).body) == 3


def test_compute_with_refuses_a_stage_that_reads_the_other():
    X = te.placeholder((8, 8), "float32", "X")
    Y = te.compute((8, 8), lambda i, j: X[i, j] * 2, name="Y")
    Z = te.compute((8, 8), lambda i, j: Y[i, j] + 1, name="Z")
    s = create_schedule([Y, Z])
    with pytest.raises(ScheduleError, match="'Z' reads 'Y'"):
        s[Z].compute_with(s[Y], s[Y].op.axis[0])
    with pytest.raises(ScheduleError, match="'Z' reads 'Y'"):
        s[Y].compute_with(s[Z], s[Z].op.axis[0])
    with pytest.raises(ScheduleError, match="cannot be computed with itself"):
        s[Y].compute_with(s[Y], s[Y].op.axis[0])


@pytest.mark.parametrize("change,message", [
    ("split", "extents differ"),
    ("serial", "not marked alike"),
    ("resplit_host", "no longer a loop there"),
])
def test_lowering_refuses_shared_loops_that_no_longer_match(change, message):
    X, Ws, bs, outs = _projections()
    s = create_schedule(outs)
    host, other = s[outs[0]], s[outs[1]]
    io, ii = host.split(host.op.axis[0], factor=4)
    host.parallel(io)
    oo, _ = other.split(other.op.axis[0], factor=3 if change == "split" else 4)
    if change != "serial":
        other.parallel(oo)
    other.compute_with(host, ii if change == "resplit_host" else io)
    if change == "resplit_host":
        host.split(ii, factor=2)
    with pytest.raises(ScheduleError, match=message):
        lower(s, [X, *Ws, *bs, *outs])


def test_lowering_refuses_a_shared_reduction_loop():
    A = te.placeholder((6, 5), "float32", "A")
    B1, B2 = (te.placeholder((5, 4), "float32", n) for n in ("B1", "B2"))
    k1, k2 = te.reduce_axis((0, 5), "k"), te.reduce_axis((0, 5), "k")
    C1 = te.compute((6, 4), lambda i, j: te.sum(A[i, k1] * B1[k1, j], axis=k1), name="C1")
    C2 = te.compute((6, 4), lambda i, j: te.sum(A[i, k2] * B2[k2, j], axis=k2), name="C2")
    s = create_schedule([C1, C2])
    for st in (s[C1], s[C2]):
        i, j, k = st.op.axis[0], st.op.axis[1], st.op.reduce_axis[0]
        st.reorder(k, i, j)
    s[C2].compute_with(s[C1], s[C1].op.reduce_axis[0])
    with pytest.raises(ScheduleError, match="must be spatial in both"):
        lower(s, [A, B1, B2, C1, C2])


def test_compute_with_joins_stages_at_the_root_to_a_host_of_its_own():
    X, Ws, bs, outs = _projections()
    s = create_schedule(outs)
    first, second, third = (s[o] for o in outs)
    second.compute_with(first, first.op.axis[0])
    with pytest.raises(ScheduleError, match="is itself computed with 'p0_epilogue'"):
        third.compute_with(second, second.op.axis[0])
    with pytest.raises(ScheduleError, match="stages p1_epilogue are computed with 'p0_epilogue'"):
        first.compute_with(third, third.op.axis[0])
    product = s[outs[2].op.input_tensors[0]]
    product.compute_at(third, third.op.axis[0])
    with pytest.raises(ScheduleError, match="computed at another stage"):
        product.compute_with(first, first.op.axis[0])


def test_a_reader_of_the_moved_stage_that_runs_before_its_host_is_refused():
    X = te.placeholder((8, 8), "float32", "X")
    A = te.compute((8, 8), lambda i, j: X[i, j] + 1, name="A")
    B = te.compute((8, 8), lambda i, j: X[i, j] * 2, name="B")
    C = te.compute((8, 8), lambda i, j: B[i, j] - 1, name="C")
    s = create_schedule([C, A])  # stage order: B, C, A
    assert [st.name for st in s.stages].index("C") < [st.name for st in s.stages].index("A")
    s[B].compute_with(s[A], s[A].op.axis[0])
    with pytest.raises(ScheduleError, match="'C', computed before 'A', reads it"):
        lower(s, [X, C, A, B])


# ---------------------------------------------------------------- the sketch


def test_the_sketch_groups_the_three_projections_under_the_first():
    plans = {p.name: p for p in derive_sketch(te.create_workload("qkv", M=8, D=6).outputs).plans}
    q, k, v = plans["q_proj"], plans["k_proj"], plans["v_proj"]
    assert [op.name for op in q.siblings] == ["k_proj", "v_proj"]
    assert k.leader is q.op and v.leader is q.op and not k.siblings
    assert k.sibling_inputs == {"Wq": "Wk", "bq": "bk"}


@pytest.mark.parametrize("what", ["different epilogue", "no shared input", "a chain", "another shape"])
def test_stages_that_are_not_siblings_stay_apart(what):
    if what == "different epilogue":
        *_, outs = _projections(relu=(False, True, False))
        expected = {"p0": ["p2"], "p1": []}
    elif what == "no shared input":
        Xs = [te.placeholder((6, 5), "float32", f"X{n}") for n in range(2)]
        Ws = [te.placeholder((4, 5), "float32", f"W{n}") for n in range(2)]
        outs = [dense(X, W, name=f"p{n}") for n, (X, W) in enumerate(zip(Xs, Ws))]
        expected = {"p0": [], "p1": []}
    elif what == "a chain":
        outs = te.create_workload("mlp", M=4, D=6, H=6).outputs
        expected = {"mlp_fc1": [], "mlp_fc2": []}
    else:
        X = te.placeholder((6, 5), "float32", "X")
        outs = [dense(X, te.placeholder((n, 5), "float32", f"W{n}"), name=f"p{n}") for n in (4, 3)]
        expected = {"p4": [], "p3": []}
    plans = {p.name: p for p in derive_sketch(outs).plans}
    assert {name: [op.name for op in plans[name].siblings] for name in expected} == expected


def test_siblings_may_share_weights_instead_of_the_activation():
    W = te.placeholder((4, 5), "float32", "W")
    outs = [dense(te.placeholder((6, 5), "float32", f"X{n}"), W, name=f"p{n}") for n in range(2)]
    plans = {p.name: p for p in derive_sketch(outs).plans}
    assert [op.name for op in plans["p0"].siblings] == ["p1"]
    assert plans["p1"].sibling_inputs == {"X0": "X1"}


# ---------------------------------------------------------------- the space


QKV = dict(M=13, D=11, N=17)  # odd: every tile has a tail


def _with_siblings(space, rng, level, pack=None):
    """A valid config of ``space`` whose q_proj shares loops down to ``level`` (0: none)."""
    while True:
        values = dict(space.sample(rng).values)
        values["q_proj.siblings"] = level
        if pack is not None:
            values["q_proj.pack"] = pack
        config = Config(space.sketch_version, values)
        if space.check(config) is None:
            return config


@pytest.mark.parametrize("pack", [None, "panels:Wq", "prepacked:Wq", "X"])
def test_sampled_configs_with_and_without_shared_loops_match_the_reference(pack):
    task = Task("qkv", QKV)
    rng = random.Random(7)
    configs = [_with_siblings(task.space, rng, level, pack) for level in (0, 1, 2, 2, 1, 2)]
    _check_sampled(None, configs=configs, task=task)


def test_shared_loops_lower_to_one_parallel_loop_whatever_the_siblings_own_knobs_say():
    task = Task("qkv", QKV)
    space = task.space
    rng = random.Random(1)
    config = _with_siblings(space, rng, 2)
    while space.check(Config(config.sketch, {**config.values, "q_proj.siblings": 0})) is not None:
        config = _with_siblings(space, rng, 2)  # valid with the siblings apart too
    assert _parallel_loops(task.lower(config).body) == 1
    assert "k_proj: computed with q_proj, inside its outer loops, with its tiles" in space.describe_config(config)
    # The siblings' own knobs no longer matter: one schedule, one key.
    other = dict(config.values)
    other["k_proj.unroll"] = next(u for u in (0, 16, 64, 256) if u != other["k_proj.unroll"])
    other = Config(config.sketch, other)
    assert space.schedule_key(other) == space.schedule_key(config)
    assert str(task.lower(other).body) == str(task.lower(config).body)
    apart = Config(config.sketch, {**config.values, "q_proj.siblings": 0})
    apart_other = Config(config.sketch, {**other.values, "q_proj.siblings": 0})
    assert space.schedule_key(apart) != space.schedule_key(apart_other)
    assert str(task.lower(apart).body) != str(task.lower(apart_other).body)
    assert _parallel_loops(task.lower(apart).body) == 3


def test_a_share_level_inside_the_fused_parallel_loop_is_invalid():
    space = Task("qkv", QKV).space
    config = _with_siblings(space, random.Random(2), 2)
    values = {**config.values, "q_proj.parallel": 2, "q_proj.siblings": 1}
    assert "share 2 or more" in space.check(Config(config.sketch, values))


def test_the_starting_points_try_the_siblings_shared_and_apart():
    space = Task("qkv", dict(M=128, D=256)).space
    points = space.starting_points(random.Random(0))
    levels = {p.values["q_proj.siblings"] for p in points}
    assert 0 in levels and levels - {0}
