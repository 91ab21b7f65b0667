"""A space that chooses among algorithms (``schedule.alternatives``): conv2d's own DAG and
Winograd's F(2, 3) and F(4, 3) behind the knob ``algorithm``, every candidate checked
against conv2d's reference."""
from __future__ import annotations

import random

import pytest

import schedule
import te
from autotune.task import Task
from schedule.alternatives import ALGORITHM, DIRECT, SEPARATOR, AlternativesSpace, alternatives
from schedule.config import Config
from schedule.space import ConfigSpace

from sched_helpers import runnable
from test_space import _check_sampled

PARAMS = dict(N=1, C=16, H=9, W=11, K=20, R=3, S=3, padding=[1, 0, 2, 1])


def _task(**changes) -> Task:
    return Task("conv2d", {**PARAMS, **changes}, target=runnable("cpu:avx512"))


def test_a_3x3_stride_1_conv_has_winograd_alternatives_over_the_same_inputs():
    wl = te.create_workload("conv2d", **PARAMS)
    found = alternatives(wl.outputs)
    assert sorted(found) == ["winograd2", "winograd4"]
    for (out,) in found.values():
        assert out.shape == wl.outputs[0].shape and out.name == wl.outputs[0].name
        assert {t.op for t in _placeholders(out)} == {t.op for t in wl.inputs}


def _placeholders(out):
    return [op.output(0) for op in te.topological_order([out]) if isinstance(op, te.PlaceholderOp)]


@pytest.mark.parametrize("changes", [
    dict(stride=2), dict(dilation=2), dict(R=5, S=5, padding=2), dict(R=1, S=1, padding=0), dict(layout="NHWC"),
    dict(C=8), dict(K=8), dict(dtype="int32"), dict(dtype="float16", out_dtype="float32"),
], ids=str)
def test_other_convolutions_have_none(changes):
    wl = te.create_workload("conv2d", **{**PARAMS, **changes})
    assert alternatives(wl.outputs) == {}
    assert not isinstance(Task("conv2d", {**PARAMS, **changes}).space, AlternativesSpace)


def test_the_gpu_space_and_a_dag_of_two_convolutions_have_none():
    wl = te.create_workload("conv2d", **PARAMS)
    assert not isinstance(ConfigSpace.from_workload(wl, "cuda:sm_80"), AlternativesSpace)
    data = te.placeholder((1, 16, 8, 8), "float32", "data")
    w1, w2 = (te.placeholder((16, 16, 3, 3), "float32", name) for name in ("w1", "w2"))
    both = te.ops.add(te.ops.conv2d_nchw(data, w1, 1, 1, name="first"), te.ops.conv2d_nchw(data, w2, 1, 1, name="second"))
    assert alternatives([both]) == {}  # one algorithm knob would decide for both
    chained = te.ops.conv2d_nchw(te.ops.conv2d_nchw(data, w1, 1, 1, name="first"), w2, 1, 1, name="second")
    (out,) = alternatives([chained])["winograd2"]  # only the first reads an input: the second stays direct
    assert [op.name for op in te.topological_order([out]) if getattr(op, "tag", "") == "conv2d_nchw"] == ["second"]


def test_a_fused_epilogue_reads_the_winograd_result_and_matches():
    params = dict(N=1, C=16, H=7, W=9, K=16, R=3, S=3, padding=1)
    wl = te.create_workload("conv2d_bn_relu", **params)
    found = alternatives(wl.outputs)
    assert sorted(found) == ["winograd2", "winograd4"]
    (out,) = found["winograd4"]
    assert out.name == wl.outputs[0].name and out.op.tag == wl.outputs[0].op.tag
    names = {op.name for op in te.topological_order([out])}
    assert {"winograd_gemm", "kernel_transform"} <= names
    _check_every_algorithm(Task("conv2d_bn_relu", params, target=runnable("cpu:avx512")), count=9, seed=1)


def _check_every_algorithm(task: Task, count: int, seed: int) -> None:
    """Sample configs until there are ``count`` and every algorithm is among them (within
    ``20 * count`` draws), build each and compare with the task's own reference."""
    rng = random.Random(seed)
    configs: dict = {}
    seen: set = set()  # the algorithms among ``configs``
    algorithms = {DIRECT, "winograd2", "winograd4"}
    for _ in range(20 * count):
        c = task.space.sample(rng)
        if len(configs) < count or task.space.algorithm(c) not in seen:
            configs[c.hash] = c
            seen.add(task.space.algorithm(c))
        if len(configs) >= count and seen == algorithms:
            break
    assert seen == algorithms
    _check_sampled(None, configs=list(configs.values()), task=task)


def test_sampled_configs_of_every_algorithm_match_the_direct_reference():
    _check_every_algorithm(_task(), count=15, seed=0)


def test_a_config_stored_before_the_knob_builds_what_it_built():
    task = _task()
    space = task.space
    old = space.primary.sample(random.Random(4))  # the knobs a stored conv2d config has
    assert ALGORITHM not in old.values
    assert space.check(old) is None and space.algorithm(old) == DIRECT
    assert space.schedule_key(old) == space.primary.schedule_key(old)
    assert str(schedule.lower(*space.apply(old))) == str(schedule.lower(*space.primary.apply(old)))


def test_a_config_stored_before_the_knob_switches_algorithm_and_keeps_mutating():
    """A stored direct config lists no Winograd knob: switched to Winograd by a mutation,
    the alternative's knobs read their defaults, and further mutations and builds work."""
    task = _task()
    space = task.space
    rng = random.Random(7)
    old = space.primary.sample(rng)
    for name in ("winograd2", "winograd4"):
        switched = Config(old.sketch, dict(old.values, **{ALGORITHM: name}))
        sub_space, sub = space.sub_config(switched)
        assert sub_space.knobs.check(sub) is None
        for _ in range(20):
            child = space.mutate(switched, rng, local=0.5)
            assert space.sub_config(child)[0].knobs.check(space.sub_config(child)[1]) is None
    switched = Config(old.sketch, dict(old.values, **{ALGORITHM: "winograd4"}))
    valid = [c for c in (space.mutate(switched, rng, 0.5) for _ in range(40))
             if space.algorithm(c) == "winograd4" and space.check(c) is None]
    assert valid
    _check_sampled(None, configs=valid[:2], task=task)


def test_knobs_of_other_algorithms_change_no_schedule():
    space = _task().space
    rng = random.Random(2)
    winograd = next(c for c in (space.sample(rng) for _ in range(100)) if space.algorithm(c) == "winograd4")
    direct = next(c for c in (space.sample(rng) for _ in range(100)) if space.algorithm(c) == DIRECT)
    for config, foreign in ((winograd, "winograd2" + SEPARATOR), (direct, "winograd4" + SEPARATOR)):
        knob = next(k for k in space.knobs.knobs if k.name.startswith(foreign) and len(k.candidates) > 1)
        other = next(v for v in knob.candidates if v != config.values[knob.name])
        changed = Config(config.sketch, dict(config.values, **{knob.name: other}))
        assert changed != config and space.schedule_key(changed) == space.schedule_key(config)
    assert space.schedule_key(winograd) != space.schedule_key(
        Config(winograd.sketch, dict(winograd.values, **{ALGORITHM: "winograd2"})))


def test_mutations_change_the_algorithm_or_one_of_its_own_knobs():
    space = _task().space
    rng = random.Random(5)
    config = next(c for c in (space.sample(rng) for _ in range(100)) if space.algorithm(c) == "winograd2")
    switched = 0
    for _ in range(200):
        child = space.mutate(config, rng, local=0.5)
        changed = {k for k in child.values if child.values[k] != config.values.get(k)}
        if changed == {ALGORITHM}:
            switched += 1
        else:
            assert changed and all(k.startswith("winograd2" + SEPARATOR) for k in changed), changed
    assert 5 < switched < 60


def test_starting_points_cover_every_algorithm_and_are_valid():
    space = _task().space
    points = space.starting_points(random.Random(0))
    assert {space.algorithm(c) for c in points} == {DIRECT, "winograd2", "winograd4"}
    assert all(space.check(c) is None for c in points)
    assert "algorithm winograd4" in space.describe() and "Winograd F(4x4, 3x3)" in space.describe_config(
        next(c for c in points if space.algorithm(c) == "winograd4"))
