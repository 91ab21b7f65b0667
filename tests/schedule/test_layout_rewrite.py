"""Layout rewrite: an input packed once, before the kernel runs (constant weights), by hand,
in the space of ``dense`` and in the built module's calling convention."""
from __future__ import annotations

import random

import numpy as np
import pytest

import backends
import schedule
import te
from autotune.task import Task
from backends.cpu import PackedInput, packed_arrays, read_prepacks
from schedule.space import ConfigSpace, layout_free_inputs
from schedule.stage import ScheduleError
from te.ops.linalg import dense

from sched_helpers import check
from test_space import CASES, _check_sampled


def _dense(M, N, K, width):
    """dense (no epilogue) with W read as panels ``width`` wide, packed at build time."""
    X = te.placeholder((M, K), "float32", "X")
    W = te.placeholder((N, K), "float32", "W")
    Y = dense(X, W)
    wl = te.Workload("dense_by_hand", {}, [X, W, Y], 2)
    s = schedule.create_schedule(Y)
    YL = s.cache_write(Y, "local")
    packed = s.rewrite_layout(W, 0, width, [YL])
    return wl, s, packed, YL


@pytest.mark.parametrize("N,width", [(48, 16), (50, 16), (5, 8)])
def test_the_kernel_takes_the_panels_and_the_module_packs_the_users_layout(N, width):
    wl, s, packed, YL = _dense(13, N, 11, width)
    assert packed.shape == (-(-N // width), 11, width) and isinstance(packed.op, te.PlaceholderOp)
    func = schedule.lower(s, wl.args)
    X, W, Y = wl.args
    assert [b.name for b in func.params] == ["X", "W.panels", Y.name]
    assert [(b.name, b.shape) for b in func.user_params] == [("X", X.shape), ("W", W.shape), (Y.name, Y.shape)]
    (prepack,) = func.prepacks
    assert prepack.param == 1 and prepack.source.shape == W.shape
    assert [b.name for b in prepack.func.params] == ["W", "W.panels"]
    module = check(s, wl)  # called with W as the user lays it out: packed on the way in
    assert [(b.name, b.shape) for b in module.params] == [(b.name, b.shape) for b in func.user_params]

    x, w = wl.random_inputs(0)
    panels = module.pack("W", w)
    assert isinstance(panels, PackedInput) and panels.array.shape == packed.shape
    # The panels hold W, zero past N (the overhang a register tile may read).
    padded = np.zeros((panels.array.shape[0] * width, 11), np.float32)
    padded[:N] = w
    np.testing.assert_array_equal(panels.array, padded.reshape(-1, width, 11).transpose(0, 2, 1))
    y = np.full(Y.shape, np.nan, np.float32)
    module(x, panels, y)  # packed once, passed in its place
    np.testing.assert_allclose(y, x @ w.T, rtol=1e-5, atol=1e-5)


def test_the_shared_object_lists_its_packing_functions_for_the_measuring_process():
    wl, s, packed, _ = _dense(8, 20, 6, 8)
    module = backends.build(s, wl.args)
    (entry,) = read_prepacks(module._lib, "kernel")
    assert (entry.param, entry.shape, entry.dtype) == (1, packed.shape, "float32")
    x, w = wl.random_inputs(1)
    y = np.zeros((8, 20), np.float32)
    arrays = packed_arrays(module._lib, "kernel", [x, w, y])
    assert arrays[0] is x and arrays[2] is y and arrays[1].shape == packed.shape
    module.call_unchecked([a.ctypes.data for a in arrays])
    np.testing.assert_allclose(y, x @ w.T, rtol=1e-5, atol=1e-5)
    plain = backends.build(schedule.create_schedule(wl.outputs[0]), wl.args)
    assert read_prepacks(plain._lib, "kernel") == []


def test_misuse_is_refused_where_it_happens():
    wl, s, packed, YL = _dense(8, 20, 6, 8)
    X, W, Y = wl.args
    with pytest.raises(ScheduleError, match="already"):
        s.rewrite_layout(W, 0, 4, [YL])
    t = te.compute((8, 6), lambda i, k: X[i, k] * 2, name="T")
    U = te.compute((8, 8), lambda i, j: t[i, j % 6] + 1, name="U")
    s2 = schedule.create_schedule(U)
    with pytest.raises(ScheduleError, match="computed"):
        s2.rewrite_layout(t, 1, 4, [U])
    # Two stages read B: packing it for one would leave the other without B as laid out.
    A = te.placeholder((4, 4), "float32", "A")
    B = te.placeholder((4, 4), "float32", "B")
    P = te.compute((4, 4), lambda i, j: A[i, j] + B[i, j], name="P")
    Q = te.compute((4, 4), lambda i, j: P[i, j] * B[i, j], name="Q")
    s3 = schedule.create_schedule(Q)
    with pytest.raises(ScheduleError, match="also read 'B'"):
        s3.rewrite_layout(B, 1, 2, [Q])

    module = backends.build(s, wl.args)
    other_wl, other_s, _, _ = _dense(8, 20, 6, 4)
    other = backends.build(other_s, other_wl.args)
    x, w = wl.random_inputs(0)
    y = np.zeros((8, 20), np.float32)
    with pytest.raises(ValueError, match="packed for another layout"):
        module(x, other.pack("W", w), y)
    assert module.pack("X", x) is x  # taken as laid out: nothing to pack
    with pytest.raises(ValueError, match=r"no input named 'Z' \(inputs: X, W\)"):
        module.pack("Z", x)
    with pytest.raises(ValueError, match=r"argument 1 \(W\): expected shape"):
        module(x, w[:, :5].copy(), y)
    with pytest.raises(ValueError, match="takes 3 arrays"):
        module(x, w)
    plain = backends.build(schedule.create_schedule(wl.outputs[0]), wl.args)
    with pytest.raises(ValueError, match="takes it as laid out"):
        plain(x, module.pack("W", w), y)


def test_dense_declares_its_weights_layout_free_and_the_declaration_survives_json():
    wl = te.create_workload("dense", M=16, N=24, K=8)
    (op,) = [o for o in te.topological_order(wl.outputs) if o.name == "dense"]
    assert layout_free_inputs(op) == ("W",)
    again = te.workload_from_json(wl.dag_json)
    assert again.key == wl.key
    for space in (ConfigSpace.from_workload(wl, "cpu:avx512"), ConfigSpace.from_workload(again, "cpu:avx512")):
        (pack,) = [k for k in space.knobs.knobs if k.name == "dense.pack"]
        assert "prepacked:W" in pack.candidates and "panels:W" in pack.candidates
    matmul = ConfigSpace.from_workload(te.create_workload("matmul", M=16, N=24, K=8), "cpu:avx512")
    (pack,) = [k for k in matmul.knobs.knobs if k.name == "C.pack"]
    assert not any(c.startswith("prepacked:") for c in pack.candidates)  # B is an ordinary input


def test_sampled_dense_configs_that_pack_at_build_time_match_the_reference():
    space = Task("dense", CASES["dense"]).space
    rng = random.Random(3)
    configs = []
    while len(configs) < 6:
        config = space.sample(rng)
        if space.decisions(config)["dense"].panels_at_build_time:
            configs.append(config)
    _check_sampled("dense", configs=configs)
    described = space.describe_config(configs[0])
    assert "once, at build time" in described
