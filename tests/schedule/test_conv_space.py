"""Convolution schedules: padding stored before the micro-kernel or inlined into it, and a
register tile vectorized over the output channels (the kernel read from output-channel
panels packed once, at build time) as well as over the output's last axis.

Every layout and sketch is checked against NumPy on shapes that stress it: odd channel
counts, channel counts no panel width divides, stride 2, dilation 2, a 7x7 window.
"""
from __future__ import annotations

import dataclasses
import random

import pytest

from autotune.task import Task
from backends.cpu import generate_source
from schedule import describe_lowered
from schedule.config import Config
from schedule.decisions import PRODUCERS_INLINE, PRODUCERS_STORED, VECTOR_LAST
from schedule.space import ConfigSpace, panel_inputs, vector_axes
from schedule.starting_points import _most_rows, _row_axis

from sched_helpers import runnable
from test_space import _check_sampled

#: (name, conv2d parameters): every one NCHW unless it says otherwise.
SHAPES = {
    "odd_channels": dict(N=1, C=5, H=9, W=11, K=7, R=3, S=3, padding=1),
    "no_block_divides": dict(N=2, C=3, H=6, W=6, K=24, R=3, S=3, padding=1),
    "stride2": dict(N=1, C=4, H=11, W=13, K=20, R=3, S=3, padding=1, stride=2),
    "dilation2": dict(N=1, C=3, H=10, W=9, K=18, R=3, S=3, padding=2, dilation=2),
    "window7_stride2": dict(N=1, C=3, H=20, W=18, K=16, R=7, S=7, padding=3, stride=2),
    "rectangular_padding": dict(N=1, C=6, H=8, W=10, K=17, R=3, S=5, padding=[1, 2]),
    "asymmetric_padding": dict(N=1, C=5, H=9, W=8, K=20, R=3, S=3, padding=[1, 0, 2, 1], stride=2),
    "pointwise": dict(N=1, C=19, H=5, W=7, K=33, R=1, S=1),
    "nhwc": dict(N=1, C=5, H=9, W=7, K=19, R=3, S=3, padding=1, stride=2, layout="NHWC"),
}


def _task(params: dict) -> Task:
    return Task("conv2d", params, target=runnable("cpu:avx512"))


def _decisions_with(space: ConfigSpace, config: Config, **changes) -> Config | None:
    """``config`` with the conv stage's decisions changed, or None when that is invalid."""
    decisions = space.decisions(config)
    stage = decisions["conv2d"]
    changed = space.encode(decisions.replace(dataclasses.replace(stage, **changes)))
    return changed if space.check(changed) is None else None


def _check(task: Task, configs: list[Config]) -> None:
    """Build every config, run it on random inputs and compare with the NumPy reference."""
    _check_sampled(None, configs=configs, task=task)


def _forced(task: Task, count: int, seed: int, **changes) -> list[Config]:
    """Up to ``count`` distinct valid random configs with ``changes`` made to the conv stage."""
    rng = random.Random(seed)
    out: dict[str, Config] = {}
    for _ in range(count * 20):
        changed = _decisions_with(task.space, task.space.sample(rng), **changes)
        if changed is not None:
            out.setdefault(changed.hash, changed)
        if len(out) == count:
            break
    return list(out.values())


def test_the_kernel_is_layout_free_and_the_output_channel_axis_can_be_vectorized():
    op = _task(SHAPES["odd_channels"]).workload.outputs[0].op
    assert op.attrs["layout_free_placeholders"] == ["kernel"]
    assert panel_inputs(op) == {} and panel_inputs(op, 1) == {"kernel": 0}
    assert vector_axes(op) == [1]
    knobs = {k.name: k for k in _task(SHAPES["odd_channels"]).space.knobs.knobs}
    assert knobs["conv2d.vector"].candidates == (VECTOR_LAST, "k")
    assert knobs["conv2d.producers"].candidates == (PRODUCERS_INLINE, PRODUCERS_STORED)
    # NHWC's last axis already is the output channel: no second vector axis, and no padding
    # knob without padding
    nhwc = _task(dict(SHAPES["nhwc"], padding=0)).space.knobs.knobs
    assert not any(k.name in ("conv2d.vector", "conv2d.producers") for k in nhwc)
    # depthwise reads its data along the channels too (with a stride): no channel vectors
    depthwise = Task("depthwise_conv2d", dict(N=1, C=8, H=9, W=9, R=3, S=3, padding=1)).workload.outputs[0].op
    assert depthwise.attrs["layout_free_placeholders"] == ["kernel"] and vector_axes(depthwise) == []
    matmul = Task("matmul", dict(M=8, N=8, K=8)).space.knobs.knobs  # nothing new for a GEMM
    assert not any(k.name.endswith((".vector", ".producers")) for k in matmul)


def test_vectorizing_the_channels_needs_the_kernel_in_channel_panels():
    task = _task(SHAPES["odd_channels"])
    space = task.space
    config = next(c for c in (space.sample(random.Random(n)) for n in range(200))
                  if space.decisions(c)["conv2d"].tile("k")[2] > 1
                  and space.decisions(c)["conv2d"].tile("x")[2] > 1)
    stage = space.decisions(config)["conv2d"]
    unpacked = space.encode(space.decisions(config).replace(dataclasses.replace(stage, vector="k", pack="none")))
    assert "only from its panels" in space.check(unpacked)
    wrong_axis = space.encode(space.decisions(config).replace(
        dataclasses.replace(stage, vector=VECTOR_LAST, pack="prepacked:kernel")))
    assert "is not read along alone" in space.check(wrong_axis)


def test_a_config_stored_before_the_new_knobs_means_padding_inlined_and_the_last_axis_vectorized():
    task = _task(SHAPES["odd_channels"])
    space = task.space
    config = space.sample(random.Random(3))
    old = Config(config.sketch, {k: v for k, v in config.values.items()
                                 if not k.endswith((".vector", ".producers"))})
    stage = space.decisions(old)["conv2d"]
    assert stage.producers is None and not stage.stores_producers and stage.vector_index == 3
    explicit = Config(config.sketch, dict(old.values, **{"conv2d.vector": VECTOR_LAST,
                                                         "conv2d.producers": PRODUCERS_INLINE}))
    assert space.check(old) == space.check(explicit)
    if space.check(old) is None:  # the same code as the knobs' defaults give
        assert generate_source(task.lower(old)) == generate_source(task.lower(explicit))


def test_stored_padding_is_a_stage_of_its_own_and_the_micro_kernel_reads_no_condition():
    task = _task(SHAPES["odd_channels"])
    (config,) = _forced(task, 1, seed=0, producers=PRODUCERS_STORED)
    described = describe_lowered(task.lower(config))
    assert "pad [global" in described
    assert "pad: computed on its own" in task.space.describe_config(config)
    (inlined,) = _forced(task, 1, seed=0, producers=PRODUCERS_INLINE)
    assert "pad [global" not in describe_lowered(task.lower(inlined))


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_channel_vectorized_configs_match_numpy(name):
    task = _task(SHAPES[name])
    if not vector_axes(task.workload.outputs[0].op):
        pytest.skip("the output channel is the last axis already")
    configs = _forced(task, 6, seed=1, vector="k", pack="prepacked:kernel")
    configs += _forced(task, 2, seed=2, vector="k", pack="panels:kernel")
    assert len(configs) >= 4
    _check(task, configs)


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_stored_and_inlined_padding_match_numpy(name):
    task = _task(SHAPES[name])
    if "conv2d.producers" not in {k.name for k in task.space.knobs.knobs}:
        pytest.skip("no padding")
    configs = _forced(task, 3, seed=3, producers=PRODUCERS_STORED)
    configs += _forced(task, 3, seed=4, producers=PRODUCERS_INLINE)
    _check(task, configs)


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_starting_points_of_every_layout_match_numpy(name):
    task = _task(SHAPES[name])
    points = task.space.starting_points(random.Random(0))
    assert points
    _check(task, points)


def test_starting_points_try_both_vector_axes_with_padding_stored():
    task = _task(dict(N=1, C=64, H=56, W=56, K=64, R=3, S=3, padding=1))
    space = task.space  # with Winograd's alternatives too (tests/schedule/test_alternatives.py)
    decisions = [space.decisions(c)["conv2d"] for c in space.starting_points(random.Random(0))
                 if space.algorithm(c) == "direct"]
    assert {d.vector for d in decisions} == {VECTOR_LAST, "k"}
    assert all(d.stores_producers for d in decisions)
    for d in decisions:
        if d.vector == "k":  # channels in vectors from panels packed at build time, rows along x
            assert d.pack == "prepacked:kernel" and d.tile("k")[2] % 16 == 0 and d.tile("x")[2] > 1
        else:  # x in vectors, rows along the output channels, which the data ignores
            assert d.tile("x")[2] % 16 == 0 and d.tile("k")[2] > 1


def test_the_rows_go_on_an_axis_the_streamed_input_ignores():
    conv = _task(SHAPES["odd_channels"]).workload.outputs[0].op
    assert _row_axis(conv) == 1  # vectorized over x: rows along k (the data does not read k)
    assert _row_axis(conv, 1) == 3  # vectorized over k: rows along x (the kernel does not read x)
    matmul = Task("matmul", dict(M=8, N=8, K=8)).workload.outputs[0].op
    assert _row_axis(matmul) == 0
    batch = Task("batch_matmul", dict(B=2, M=8, N=8, K=8)).workload.outputs[0].op
    assert _row_axis(batch) == 1


def test_rows_prefer_tiles_that_waste_no_row():
    assert _most_rows([8, 14, 16], 56) == 14  # 4 tiles of 14; 16 would compute 64 rows
    assert _most_rows([8, 16], 64) == 16
    assert _most_rows([7, 8], 7) == 7
    assert _most_rows([], 10) == 1


def test_a_fused_epilogue_keeps_both_decisions():
    """conv2d_bn_relu: the convolution's tiles are owned by the batch-norm-and-relu stage,
    which copies the channel-innermost register tile out to its NCHW output."""
    task = Task("conv2d_bn_relu", dict(N=1, C=5, H=9, W=8, K=20, R=3, S=3, padding=[1, 0, 2, 1]),
                target=runnable("cpu:avx512"))
    assert "fused into bn_relu" in task.space.describe()
    points = task.space.starting_points(random.Random(0))
    assert {task.space.decisions(c)["conv2d"].vector for c in points} == {VECTOR_LAST, "k"}
    _check(task, points + _forced(task, 4, seed=5, vector="k", pack="prepacked:kernel",
                                  producers=PRODUCERS_STORED))
