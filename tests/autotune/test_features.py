"""Features from the loop IR: shape, determinism, and that they see what schedules change."""
from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest

import schedule
import te
from autotune import features as F
from autotune.task import Task
from schedule.config import Config

NAMES = F.FEATURE_NAMES


def _value(x: np.ndarray, name: str) -> float:
    return float(x[NAMES.index(name)])


def _accesses(x: np.ndarray, row: int = 0) -> list[dict]:
    """The present access slots of a store row, as {feature: value}."""
    out = []
    for a in range(1 + F.MAX_LOADS):
        prefix = f"s{row}.a{a}."
        slot = {n[len(prefix):]: float(v) for n, v in zip(NAMES, x) if n.startswith(prefix)}
        if slot["present"]:
            out.append(slot)
    return out


def _matmul(M=64, N=64, K=64):
    A, B, C = te.create_workload("matmul", M=M, N=N, K=K).args
    return A, B, C


def test_fixed_length_and_names():
    assert len(NAMES) == F.FEATURE_DIM == len(set(NAMES))
    task = Task("matmul", dict(M=32, N=32, K=32))
    x = F.extract(task.lower(task.space.sample(random.Random(0))))
    assert x.shape == (F.FEATURE_DIM,) and x.dtype == np.float32
    assert np.isfinite(x).all()


def test_deterministic_across_lowerings():
    task = Task("matmul", dict(M=64, N=48, K=32))
    config = task.space.sample(random.Random(3))
    a = F.extract(task.lower(config))
    b = F.extract(task.lower(Config.from_json(config.to_json())))
    assert np.array_equal(a, b)


def test_differs_between_tilings_and_vectorization():
    task = Task("matmul", dict(M=64, N=64, K=64))
    rng = random.Random(0)
    xs = {F.extract(task.lower(task.space.sample(rng))).tobytes() for _ in range(12)}
    assert len(xs) == 12

    A, B, C = _matmul()
    s1 = schedule.create_schedule(C)
    jo, ji = s1[C].split(C.op.axis[1], factor=8)
    s1[C].reorder(C.op.axis[0], jo, C.op.reduce_axis[0], ji)
    plain = F.extract(schedule.lower(s1, [A, B, C]))
    s2 = schedule.create_schedule(C)
    jo, ji = s2[C].split(C.op.axis[1], factor=8)
    s2[C].reorder(C.op.axis[0], jo, C.op.reduce_axis[0], ji)
    s2[C].vectorize(ji)
    vec = F.extract(schedule.lower(s2, [A, B, C]))
    assert not np.array_equal(plain, vec)
    assert _value(plain, "s0.vec_lanes") == 0.0 and _value(plain, "s0.inner_serial") == 1.0
    assert _value(vec, "s0.vec_lanes") == pytest.approx(np.log2(1 + 8))
    assert _value(vec, "s0.inner_vectorized") == 1.0 and _value(vec, "s0.vec_inner") == 1.0
    assert _value(vec, "g.vec_flop_frac") == 1.0


def test_parallel_and_unroll_are_seen():
    A, B, C = _matmul()
    s = schedule.create_schedule(C)
    ko, ki = s[C].split(C.op.reduce_axis[0], factor=4)
    s[C].reorder(C.op.axis[0], C.op.axis[1], ko, ki)
    s[C].parallel(C.op.axis[0])
    s[C].unroll(ki)
    x = F.extract(schedule.lower(s, [A, B, C]))
    assert _value(x, "s0.par_prod") == pytest.approx(np.log2(65))
    assert _value(x, "s0.unroll_prod") == pytest.approx(np.log2(5))
    assert _value(x, "s0.inner_unrolled") == 1.0
    assert _value(x, "g.max_par") == pytest.approx(np.log2(65))
    assert _value(x, "s0.rmw") == 1.0  # C[i, j] = C[i, j] + ...


def test_stride_contiguous_vs_strided():
    """Default i, j, k nest: B[k, j] walks a column (stride N) in the innermost loop.
    Reordered i, k, j: every access is contiguous or a broadcast."""
    A, B, C = _matmul()
    s = schedule.create_schedule(C)
    default = F.extract(schedule.lower(s, [A, B, C]))
    s = schedule.create_schedule(C)
    s[C].reorder(C.op.axis[0], C.op.reduce_axis[0], C.op.axis[1])
    reordered = F.extract(schedule.lower(s, [A, B, C]))

    d, r = _accesses(default), _accesses(reordered)
    assert len(d) == len(r) == 3  # the store C and loads A, B (C's own load folds into rmw)
    assert sorted(a["stride"] for a in d) == pytest.approx([0.0, 1.0, np.log2(1 + 64)])
    assert sum(a["stride_big"] for a in d) == 1 and sum(a["stride_zero"] for a in d) == 1
    assert sum(a["stride_big"] for a in r) == 0
    assert sum(a["stride_one"] for a in r) == 2 and sum(a["stride_zero"] for a in r) == 1


def test_footprint_and_reuse_of_a_tile():
    """Innermost loop over j of C[i, j] += A[i, k] * B[k, j]: A is reused 64 times."""
    A, B, C = _matmul()
    s = schedule.create_schedule(C)
    s[C].reorder(C.op.axis[0], C.op.reduce_axis[0], C.op.axis[1])
    x = F.extract(schedule.lower(s, [A, B, C]))
    acc = {a["stride"]: a for a in _accesses(x)}
    broadcast = acc[0.0]  # A[i, k]
    assert broadcast["bytes_l0"] == pytest.approx(np.log2(1 + 4))
    assert broadcast["reuse_l0"] == pytest.approx(np.log2(1 + 64))
    # reused by the very next iteration of the innermost loop, 64 times in a row
    assert broadcast["reuse_dis_iter"] == 1.0 and broadcast["reuse_ct"] == pytest.approx(np.log2(65))
    assert broadcast["reuse_dis_bytes"] == pytest.approx(np.log2(1 + 3 * 4))  # one iteration: C, A, B
    # The store accumulates one row of C in a promoted local tile (schedule/promote.py): 64 floats.
    assert _value(x, "s0.a0.bytes_all") == pytest.approx(np.log2(1 + 64 * 4))


def test_sliding_window_footprint_is_not_a_product():
    """conv2d's data[y + ry] touches H + R - 1 rows, not H * R."""
    task = Task("conv2d", dict(N=1, C=4, H=8, W=8, K=4, R=3, S=3, padding=0))
    data, kernel, out = task.workload.args
    s = schedule.create_schedule(out)
    x = F.extract(schedule.lower(s, [data, kernel, out]))
    bytes_all = sorted(a["bytes_all"] for a in _accesses(x))
    # data: 1*4*8*8 elements (every row and column is touched), kernel 4*4*3*3, out 4*6*6
    expect = sorted(np.log2(1 + 4 * n) for n in (4 * 8 * 8, 4 * 4 * 9, 4 * 6 * 6))
    assert bytes_all == pytest.approx(expect)


WORKLOADS = [
    ("matmul", dict(M=32, N=24, K=16)),
    ("conv2d", dict(N=1, C=4, H=8, W=8, K=4, R=3, S=3, padding=1)),
    ("dense", dict(M=16, N=16, K=16)),
    ("softmax", dict(shape=[8, 16])),
    ("pool2d", dict(N=1, C=4, H=8, W=8, kernel=3)),
    ("elementwise_chain", dict(shape=[16, 16])),
    ("batch_matmul", dict(B=2, M=8, N=8, K=8)),
    ("depthwise_conv2d", dict(N=1, C=4, H=8, W=8, R=3, S=3, padding=1)),
]


@pytest.mark.parametrize("name,params", WORKLOADS, ids=[w[0] for w in WORKLOADS])
def test_every_library_workload(name, params):
    task = Task(name, params)
    rng = random.Random(0)
    xs = []
    for _ in range(6):
        x = F.extract(task.lower(task.space.sample(rng)))
        assert x.shape == (F.FEATURE_DIM,) and np.isfinite(x).all()
        assert _value(x, "s0.present") == 1.0 and _value(x, "g.n_stores") > 0
        xs.append(x)
    assert len({x.tobytes() for x in xs}) > 1


def test_tail_loops_are_counted_with_their_largest_extent():
    task = Task("elementwise", dict(op="exp", shape=[17, 33]))
    config = next(c for c in task.space.enumerate()
                  if c.values["T_exp.tile.i0"] == 6 and c.values["T_exp.tile.i1"] == 1)
    func = task.lower(config)
    # i0 (17) in tiles of 6: the innermost loop is `range(min(6, 17 - i0_outer * 6))`
    assert "min(6, 17 - i0_outer * 6)" in str(func), func
    x = F.extract(func)
    assert _value(x, "s0.tail_loops") == pytest.approx(np.log2(1 + 1))    # one tail loop
    assert _value(x, "g.tail_loops") == pytest.approx(np.log2(1 + 1))
    assert _value(x, "s0.inner_extent") == pytest.approx(np.log2(1 + 6))  # its largest extent, not 5 or 1
    # executions: 3 outer x 33 x 6 (the largest extent), not the 17 x 33 the guard leaves
    assert _value(x, "s0.executions") == pytest.approx(np.log2(1 + 3 * 33 * 6))
    # bytes touched by the innermost loop: 6 floats read and 6 written
    assert _value(x, "s0.total_bytes_l0") == pytest.approx(np.log2(1 + 6 * 4 * 2))


def test_feature_cache_lowers_once():
    task = Task("matmul", dict(M=32, N=32, K=32))
    cache = F.FeatureCache(max_entries=4)
    configs = [task.space.sample(random.Random(n)) for n in range(6)]
    a = cache.get(task, configs[0])
    b = cache.get(task, Config.from_json(configs[0].to_json()))
    assert a is b and cache.hits == 1 and cache.misses == 1
    assert not a.flags.writeable
    many = cache.get_many(task, configs)
    assert many.shape == (6, F.FEATURE_DIM) and len(cache) == 4  # LRU bound
    fn = cache.feature_fn(task)
    assert np.array_equal(fn(configs[-1]), many[-1])
    assert cache.lower_s > 0 and cache.extract_s > 0


def test_feature_cache_lowers_one_schedule_once():
    """Configs that build one schedule (unroll budgets that unroll the same loops) share
    their features; a budget that unrolls other loops is lowered anew."""
    task = Task("matmul", dict(M=256, N=256, K=256))
    space = task.space
    rng = random.Random(3)
    def budget(c, b):
        return Config(c.sketch, {**c.values, "C.unroll": b})

    config = next(c for c in (space.sample(rng) for _ in range(200)) if c.values["C.unroll"] == 256
                  and space.schedule_key(budget(c, 64)) == space.schedule_key(c) != space.schedule_key(budget(c, 0)))
    twin = budget(config, 64)
    cache = F.FeatureCache()
    many = cache.get_many(task, [config, twin])
    assert cache.misses == 1 and many[0] is not None and np.array_equal(many[0], many[1])
    assert np.array_equal(many[1], F.extract(task.lower(twin)))  # what lowering the twin (verified) gives
    cache.get(task, budget(config, 0))
    assert cache.misses == 2  # no unrolling at all: another schedule


def test_feature_cache_survives_a_config_that_does_not_lower():
    task = Task("matmul", dict(M=32, N=32, K=32))
    cache = F.FeatureCache()
    bad = Config(task.space.knobs.sketch, {"nope": 1})
    x = cache.get(task, bad)
    assert cache.failures == 1 and not x.any()


FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "features"


def test_vectors_match_the_stored_fixture():
    """Feature vectors are the trained models' input: same order, same values, bit for bit.

    ``cases.json`` names a task and a config per row of ``vectors.npy`` (matmul, conv2d
    and dense+relu on cpu, matmul and conv2d on cuda), stored before the extraction was
    split into modules.
    """
    stored = json.loads((FIXTURES / "cases.json").read_text())
    expected = np.load(FIXTURES / "vectors.npy")
    assert stored["feature_dim"] == F.FEATURE_DIM and expected.shape == (len(stored["cases"]), F.FEATURE_DIM)
    for case, want in zip(stored["cases"], expected):
        task = Task(case["workload"], case["params"], case["target"])
        got = F.extract(task.lower(Config.from_json(json.dumps(case["config"]))))
        bad = [n for n, a, b in zip(NAMES, got, want) if a != b]
        assert not bad, f"{case['workload']} on {case['target']}: {bad[:8]}"


@pytest.mark.parametrize("workload,params", [
    ("matmul", dict(M=96, N=80, K=64)),
    ("dense", dict(M=40, N=96, K=48, bias=True, relu=True)),
])
def test_the_vector_tile_share_says_whether_the_c_source_declares_vector_variables(workload, params):
    """``g.vector_tile_frac`` is the share of register tiles the C backend prints as vector
    variables: positive exactly when the generated source declares some, on sampled configs
    (both kinds occur), and the same on every machine (checked at a fixed width)."""
    from autotune.builder import LocalBuilder
    from autotune.measure import MeasureInput

    task = Task(workload, params, "cpu")
    builder = LocalBuilder(n_workers=1)
    rng = random.Random(3)
    seen = set()
    for _ in range(24):
        config = task.space.sample(rng)
        share = _value(F.extract(task.lower(config)), "g.vector_tile_frac")
        assert 0.0 <= share <= 1.0
        declares = " at_f32x" in builder.source(MeasureInput(task, config))
        assert (share > 0) == declares, config
        seen.add(declares)
    assert seen == {True, False}
