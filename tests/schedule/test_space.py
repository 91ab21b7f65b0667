"""The schedule space: sampled configs build and match the reference, replay exactly."""
from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import random
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import te
from autotune.builder import LocalBuilder
from autotune.measure import MeasureInput
from autotune.task import Task
from autotune.verify import mismatch, reduction_length
from backends import cpu
from schedule import ir
from schedule.config import Config, ConfigError
from schedule.decisions import AT_OUTER
from schedule.space import factor_candidates

# Small odd shapes: no split factor divides them, so every tail path is exercised.
CASES = {
    "matmul": dict(M=13, N=17, K=11),
    "batch_matmul": dict(B=3, M=7, N=9, K=5),
    "dense": dict(M=13, N=17, K=11, bias=True, relu=True),
    "conv2d": dict(N=1, C=3, H=9, W=7, K=5, R=3, S=3, padding=1, stride=1),
    "conv2d_nhwc": dict(N=1, C=3, H=9, W=7, K=5, R=3, S=3, padding=1, stride=2, layout="NHWC"),
    "depthwise_conv2d": dict(N=1, C=3, H=9, W=7, R=3, S=3, padding=1),
    "softmax": dict(shape=[7, 13]),
}


def _task(case: str) -> Task:
    name = "conv2d" if case == "conv2d_nhwc" else case
    return Task(name, CASES[case])


def _check_sampled(case: str | None, count: int = 0, seed: int = 0, configs=None, task: Task | None = None) -> None:
    """Build ``count`` distinct random configs (or ``configs``) of ``case``'s task (or of
    ``task``) and compare each with the reference."""
    task = task or _task(case)
    wl = task.workload
    rng = random.Random(seed)
    if configs is None:
        configs = list({c.hash: c for c in (task.space.sample(rng) for _ in range(count))}.values())
    builds = LocalBuilder().build([MeasureInput(task, c) for c in configs])
    inputs = wl.random_inputs(seed)
    refs = wl.reference(*inputs)
    red = reduction_length(wl.outputs)
    for config, build in zip(configs, builds):
        assert build.status == "ok", f"{config}: {build.error}"
        module = cpu.CPUModule(task.lower(config), "", build.artifact)
        outs = [np.full(r.shape, np.nan, dtype=r.dtype) for r in refs]
        module(*inputs, *outs)
        for out, ref in zip(outs, refs):
            problem = mismatch(out, ref, red)
            assert problem is None, f"{case or task.key} {task.space.describe_config(config)}: {problem}"


@pytest.mark.parametrize("case", sorted(CASES))
def test_sampled_configs_match_reference(case):
    _check_sampled(case, count=16, seed=1)


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(CASES))
def test_a_few_hundred_sampled_configs_match_reference(case):
    _check_sampled(case, count=300, seed=2)


def _allocation_depth(stmt, name: str, depth: int = 0):
    """Number of loops around the Allocate of buffer ``name`` (None if not allocated)."""
    if isinstance(stmt, ir.Allocate) and stmt.buffer.name == name:
        return depth
    for child in ir.child_stmts(stmt):
        found = _allocation_depth(child, name, depth + isinstance(stmt, ir.For))
        if found is not None:
            return found
    return None


def test_dense_epilogue_is_fused_into_the_tile():
    task = Task("dense", CASES["dense"])
    plans = {p.name: p.role for p in task.space.sketch.plans}
    assert plans == {"dense": "multi_level", "dense_epilogue": "fused"}
    rng = random.Random(0)
    for _ in range(20):
        func = task.lower(task.space.sample(rng))
        depth = _allocation_depth(func.body, "dense")
        assert depth is not None and depth >= 1, "dense must be computed inside the epilogue's loops"
        root_buffers = [s.buffer.name for s in ir.walk(func.body) if isinstance(s, ir.Allocate)]
        assert "dense" in root_buffers
        # The dense buffer holds one tile, never the whole M x N matrix.
        alloc = next(s for s in ir.walk(func.body) if isinstance(s, ir.Allocate) and s.buffer.name == "dense")
        assert alloc.buffer.size < 13 * 17


def test_padding_is_inlined_into_the_convolution():
    task = _task("conv2d")
    plans = {p.name: p.role for p in task.space.sketch.plans}
    assert plans["pad"] == "inline" and plans["conv2d"] == "multi_level"
    sampled = task.space.sample(random.Random(0))
    config = Config(sampled.sketch, {**sampled.values, "conv2d.producers": "inline"})
    func = task.lower(config)
    assert not any(isinstance(s, ir.Allocate) and s.buffer.name == "pad" for s in ir.walk(func.body))
    stored = task.lower(Config(sampled.sketch, {**sampled.values, "conv2d.producers": "stored"}))
    assert any(isinstance(s, ir.Allocate) and s.buffer.name == "pad" for s in ir.walk(stored.body))


def test_config_json_round_trip_and_stable_hash():
    task = _task("conv2d")
    rng = random.Random(3)
    for _ in range(200):
        config = task.space.sample(rng)
        again = Config.from_json(json.loads(json.dumps(config.to_dict())))
        assert again == config and again.hash == config.hash
        assert task.space.check(again) is None


def test_configs_replay_to_identical_code_in_a_fresh_process():
    task = _task("dense")
    rng = random.Random(4)
    configs = [task.space.sample(rng) for _ in range(25)]
    here = [hashlib.sha256(cpu.generate_source(task.lower(c)).encode()).hexdigest() for c in configs]
    hashes_here = [c.hash for c in configs]
    script = textwrap.dedent(f"""
        import hashlib, json, sys
        from autotune.task import Task
        from backends import cpu
        from schedule.config import Config
        task = Task("dense", {CASES['dense']!r})
        out = []
        for text in json.load(sys.stdin):
            c = Config.from_json(text)
            out.append([c.hash, hashlib.sha256(cpu.generate_source(task.lower(c)).encode()).hexdigest()])
        print(json.dumps(out))
    """)
    proc = subprocess.run([sys.executable, "-c", script], input=json.dumps([c.to_json() for c in configs]),
                          capture_output=True, text=True, check=True)
    there = json.loads(proc.stdout)
    assert [h for h, _ in there] == hashes_here
    assert [s for _, s in there] == here


def test_space_size_description_and_validity():
    task = Task("matmul", dict(M=64, N=64, K=64))
    space = task.space
    assert space.size == np.prod([len(k.candidates) for k in space.knobs.knobs])
    assert 0 < space.estimated_valid_size(samples=300) <= space.size
    text = space.describe()
    assert "multi-level tiling" in text and "C.tile.i" in text
    config = space.sample(random.Random(0))
    assert "C:" in space.describe_config(config)
    # A local tile far beyond the limit is refused before any build.
    large = Task("matmul", dict(M=1024, N=1024, K=1024)).space
    decisions = large.decisions(large.sample(random.Random(0)))
    tiled = dataclasses.replace(decisions["C"].with_tiles(i=(64, 1, 16), j=(16, 1, 64)), at=AT_OUTER)
    big = decisions.replace(tiled).to_config()
    assert "local tile" in large.check(big)
    with pytest.raises(ConfigError, match="invalid config"):
        large.apply(big)
    # Unknown or missing knobs are reported, not ignored.
    assert "missing" in space.check(Config(config.sketch, {"C.at": "a"}))


def test_mutation_changes_one_decision_and_crossover_mixes_parents():
    space = _task("matmul").space
    rng = random.Random(5)
    a, b = space.sample(rng), space.sample(rng)
    for _ in range(50):
        m = space.mutate(a, rng)
        assert sum(m.values[k] != a.values[k] for k in a.values) == 1
        child = space.crossover(a, b, rng)
        assert all(child.values[k] in (a.values[k], b.values[k]) for k in a.values)


def test_knob_neighbors_are_one_small_step_away():
    from schedule.config import Knob

    unroll = Knob("u", (0, 16, 64, 256))
    assert [unroll.neighbors(i) for i in range(4)] == [(1,), (0, 2), (1, 3), (2,)]
    tiles = Knob("t", ((1, 1, 8), (1, 2, 4), (2, 1, 4), (1, 1, 4), (4, 1, 2), (1, 1, 16), (8, 8, 8)))
    # (1,1,8): halve the last level, move a factor 2 to another level, or double it.
    assert {tiles.candidates[j] for j in tiles.neighbors(0)} == {(1, 2, 4), (2, 1, 4), (1, 1, 4), (1, 1, 16)}
    # A candidate with no neighbour within one step may move anywhere.
    assert len(tiles.neighbors(6)) == 6
    names = Knob("at", ("a", "b", "c"))
    assert names.neighbors(1) == (0, 2)


def test_local_mutation_moves_a_tile_by_a_factor_of_two():
    space = _task("matmul").space
    rng = random.Random(3)
    a = space.sample(rng)
    changed = 0
    for _ in range(200):
        m = space.mutate(a, rng, local=1.0)
        (name,) = [k for k in a.values if m.values[k] != a.values[k]]
        knob = next(k for k in space.knobs.knobs if k.name == name)
        assert knob.index(m.values[name]) in knob.neighbors(knob.index(a.values[name]))
        if name.startswith("C.tile"):
            steps = sum(abs(math.log2(x / y)) for x, y in zip(m.values[name], a.values[name]))
            assert steps <= 2 + 1e-9
            changed += 1
    assert changed > 0


def test_unrolling_copies_the_innermost_loop_at_most_the_cap_whatever_the_budget(monkeypatch):
    """A budget of 256 spent on a vector loop of one instruction (a GEMV's narrow tiles)
    copied it 256 times, which gcc took tens of seconds to compile; the cap stops at 64."""
    import schedule.space as space_module
    from autotune.builder import unrolled_copies

    task = Task("dense", dict(M=1, N=256, K=256, bias=False, relu=False))
    rng = random.Random(0)
    configs = []
    while len(configs) < 40:
        config = task.space.sample(rng)
        if task.space.decisions(config)["dense"].unroll == 256:
            configs.append(config)
    capped = [unrolled_copies(task.lower(c)) for c in configs]
    assert max(capped) == space_module.MAX_UNROLLED_LOOP_COPIES
    monkeypatch.setattr(space_module, "MAX_UNROLLED_LOOP_COPIES", 10 ** 9)
    uncapped = [unrolled_copies(task.lower(c)) for c in configs]
    assert max(uncapped) > space_module.UNROLL_STEPS[-1] // 2  # the budget alone let them grow
    assert all(c == u for c, u in zip(capped, uncapped) if u <= 64)  # below the cap nothing changed


@pytest.mark.parametrize("case", ["matmul-large", "dense", "conv2d", "batch_matmul", "matmul-cuda"])
def test_unroll_budgets_that_unroll_the_same_loops_are_one_schedule(case):
    """A larger unroll budget that stops at the same loop as a smaller one builds the same
    code; the schedule key says so (so a tuner measures it once), and only then: the IR of
    every pair of budgets is equal exactly when their keys are."""
    if case == "matmul-large":
        task = Task("matmul", dict(M=1024, N=1024, K=1024))
    elif case == "matmul-cuda":
        task = Task("matmul", dict(M=256, N=256, K=256), target="cuda")
    else:
        task = _task(case)
    space = task.space
    unroll = next(k for k in space.knobs.knobs if k.name.endswith(".unroll"))
    rng = random.Random(1)
    merged = split = 0
    for _ in range(12):
        base = space.sample(rng)
        variants = [Config(base.sketch, {**base.values, unroll.name: b}) for b in unroll.candidates]
        variants = [v for v in variants if space.check(v) is None]
        lowered = [str(task.lower(v)) for v in variants]
        keys = [space.schedule_key(v) for v in variants]
        for i in range(len(variants)):
            for j in range(i):
                assert (keys[i] == keys[j]) == (lowered[i] == lowered[j]), (variants[i], variants[j])
                merged += keys[i] == keys[j]
                split += keys[i] != keys[j]
    assert merged and split  # the sample holds budgets of both kinds


def test_factor_candidates_cover_odd_and_prime_extents():
    assert factor_candidates(13) == [1, 2, 3, 4, 5, 6, 7, 8, 13]
    assert 3 not in factor_candidates(1024) and 512 in factor_candidates(1024)
    assert factor_candidates(12) == [1, 2, 3, 4, 6, 8, 12]


@pytest.fixture
def gemv_workload_name():
    """A user workload name, unregistered after the test (the registry is process-wide)."""
    from te import workload as te_workload

    yield "test_space_gemv_relu"
    te_workload._REGISTRY.pop("test_space_gemv_relu", None)


def test_user_workload_gets_a_space(gemv_workload_name):
    """The space comes from the DAG, not from per-op templates."""

    @te.register_workload(gemv_workload_name, override=True)
    def gemv_relu(N, K):
        A = te.placeholder((N, K), name="A")
        x = te.placeholder((K,), name="x")
        k = te.reduce_axis((0, K), name="k")
        y = te.compute((N,), lambda i: te.sum(A[i, k] * x[k], axis=k), name="y")
        z = te.compute((N,), lambda i: te.max(y[i], 0.0), name="z")
        return [A, x, z]

    task = Task(gemv_workload_name, dict(N=19, K=23))
    roles = {p.name: p.role for p in task.space.sketch.plans}
    assert roles == {"y": "multi_level", "z": "fused"}
    wl = task.workload
    inputs = wl.random_inputs(0)
    (ref,) = wl.reference(*inputs)
    rng = random.Random(0)
    configs = [task.space.sample(rng) for _ in range(10)]
    for config, build in zip(configs, LocalBuilder().build([MeasureInput(task, c) for c in configs])):
        assert build.status == "ok", build.error
        out = np.full_like(ref, np.nan)
        cpu.CPUModule(task.lower(config), "", build.artifact)(*inputs, out)
        np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4)
