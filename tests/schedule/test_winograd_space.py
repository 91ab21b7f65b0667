"""Winograd convolutions in the CPU space: transforms stored (not inlined into the matrix
products, which would redo them for every product), the products tiled as a batched GEMM,
and the transforms' rows specialized in the loop nest (``passes.specialize_rows``)."""
from __future__ import annotations

import random

import pytest

import schedule
import te
from autotune.task import Task
from schedule import ir
from schedule.config import Config
from schedule.passes.ir_tools import stmt_exprs
from schedule.sketch import INLINE, MULTI_LEVEL, PRECOMPUTED, SIMPLE, derive_sketch
from te.expr import Select, post_order
from te.ops.winograd import _by_row, TRANSFORMS

from sched_helpers import check, runnable, tensor, workload
from test_space import _check_sampled


def _selects(func) -> int:
    return sum(isinstance(n, Select) for e in stmt_exprs(func.body) for n in post_order(e))


def _winograd(**params):
    return te.create_workload("conv2d_winograd", **{**dict(N=1, C=5, H=9, W=11, K=7, padding=1, tile=4), **params})


def test_transforms_are_stored_the_kernels_precomputed_and_the_products_one_batched_gemm():
    wl = _winograd()
    roles = {p.op.name: p.role for p in derive_sketch(wl.outputs).plans}
    assert roles == {"kernel_transform_rows": PRECOMPUTED, "kernel_transform": PRECOMPUTED, "pad": INLINE,
                     "input_transform_rows": SIMPLE, "input_transform": SIMPLE, "winograd_gemm": MULTI_LEVEL,
                     "output_transform_cols": SIMPLE, "conv2d": SIMPLE}
    # A target that runs nothing at build time (the GPU) computes the kernel's transform per call.
    roles = {p.op.name: p.role for p in derive_sketch(wl.outputs, precompute=False).plans}
    assert roles["kernel_transform"] == SIMPLE


def test_every_config_reads_the_kernel_transform_packed_at_build_time():
    task = Task("conv2d_winograd", dict(N=1, C=5, H=9, W=11, K=7, padding=1, tile=2), target=runnable("cpu:avx512"))
    func = task.lower(task.space.sample(random.Random(3)))
    assert [b.name for b in func.user_params] == ["data", "kernel", "conv2d"]
    assert [b.name for b in func.params] == ["data", "kernel_transform", "conv2d"]
    assert func.params[1].shape == (4, 4, 7, 5)
    (prepack,) = func.prepacks
    assert prepack.source.name == "kernel"
    names = {b.name for n in ir.walk(func.body) if isinstance(n, ir.Allocate) for b in [n.buffer]}
    assert not {"kernel_transform", "kernel_transform_rows"} & names


def test_precompute_by_hand_matches_and_refuses_what_it_cannot_do():
    wl = _winograd()
    s = schedule.create_schedule(wl.outputs)
    packed = s.precompute(tensor(wl, "kernel_transform"))
    assert packed.name == "kernel_transform" and "kernel_transform_rows" not in [st.name for st in s.stages]
    check(s, wl)
    s = schedule.create_schedule(wl.outputs)
    with pytest.raises(schedule.ScheduleError, match="computed from data, kernel"):
        s.precompute(tensor(wl, "winograd_gemm"))
    with pytest.raises(schedule.ScheduleError, match="is an output"):
        s.precompute(wl.outputs[0])
    s.precompute(tensor(wl, "kernel_transform_rows"))  # only the first pass; the second runs per call
    with pytest.raises(schedule.ScheduleError, match="packed or precomputed already"):
        s.precompute(tensor(wl, "kernel_transform"))
    check(s, wl)


def test_a_stencil_is_stored_where_a_pure_element_wise_stage_is_inlined():
    X = te.placeholder((16, 18), "float32", "X")
    W = te.placeholder((8, 16), "float32", "W")
    blur = te.compute((16, 16), lambda i, j: X[i, j] + X[i, j + 2], name="blur")
    scaled = te.compute((16, 16), lambda i, j: X[i, j] * 2.0, name="scaled")
    k = te.reduce_axis((0, 16), "k")
    Y = te.compute((8, 16), lambda i, j: te.sum(W[i, k] * (blur[k, j] + scaled[k, j]), axis=k), name="Y")
    roles = {p.op.name: p.role for p in derive_sketch([Y]).plans}
    assert roles["blur"] == SIMPLE and roles["scaled"] == INLINE


@pytest.mark.parametrize("tile", [2, 4])
def test_sampled_winograd_configs_match_the_reference(tile):
    task = Task("conv2d_winograd", dict(N=1, C=5, H=9, W=11, K=7, padding=1, tile=tile), target=runnable("cpu:avx512"))
    _check_sampled(None, count=10, seed=tile, task=task)


def test_a_config_attaching_a_stage_its_reader_packs_into_panels_is_invalid():
    task = Task("conv2d_winograd", dict(N=1, C=5, H=9, W=11, K=7, padding=1, tile=4), target=runnable("cpu:avx512"))
    space = task.space
    config = space.sample(random.Random(0))
    values = dict(config.values, **{"input_transform.attach": 1, "winograd_gemm.pack": "panels:input_transform"})
    problem = space.check(Config(config.sketch, values))
    assert problem is not None and "panels" in problem


def _row_chain(vectorize: bool):
    """Y[r, j] = (B^T of F(4, 3))[r, :] . X[:, j], a select chain over the row r."""
    BT = TRANSFORMS[4][0]
    X = te.placeholder((6, 40), "float32", "X")
    Y = te.compute((6, 40), lambda r, j: _by_row(BT, r, lambda i: X[i, j], "float32"), name="Y")
    s = schedule.create_schedule(Y)
    if vectorize:
        r, j = s[Y].op.axis
        s[Y].reorder(j, r)
        s[Y].vectorize(r)
    return s, workload([X, Y])


def test_a_short_loop_choosing_a_row_is_copied_out_per_row_and_still_matches():
    s, wl = _row_chain(vectorize=False)
    module = check(s, wl)
    assert _selects(module.func) == 0
    without = schedule.lower(s, wl.args, pipeline=[p for p in schedule.passes.pipeline("cpu")
                                                   if p.name != "specialize_rows"])
    assert _selects(without) > 0
    rows = [n for n in ir.walk(without.body) if isinstance(n, ir.For) and n.var.name.startswith("r")]
    assert rows and not [n for n in ir.walk(module.func.body) if isinstance(n, ir.For) and n.var.name.startswith("r")]


def test_a_vectorized_row_loop_is_left_alone():
    s, wl = _row_chain(vectorize=True)
    module = check(s, wl)
    assert _selects(module.func) > 0


def test_loops_bounding_padding_are_not_copied():
    wl = te.create_workload("conv2d", N=1, C=3, H=8, W=8, K=4, R=3, S=3, padding=1)
    s = schedule.create_schedule(wl.outputs)
    full = schedule.lower(s, wl.args)
    without = schedule.lower(s, wl.args, pipeline=[p for p in schedule.passes.pipeline("cpu")
                                                   if p.name != "specialize_rows"])
    assert str(full) == str(without)


def test_a_constant_the_kernel_also_reads_is_not_precomputed():
    """Precomputing would take the weights away from the stage that reads them as they are."""
    X = te.placeholder((8, 16), "float32", "X")
    W = te.placeholder((16, 16), "float32", "W")
    Wt = te.compute((16, 16), lambda i, j: W[j, i] + W[i, j], name="Wt")
    k = te.reduce_axis((0, 16), "k")
    Y = te.compute((8, 16), lambda i, j: te.sum(X[i, k] * (Wt[k, j] + W[k, j]), axis=k), name="Y",
                   attrs={"layout_free_placeholders": ["W"]})
    assert {p.op.name: p.role for p in derive_sketch([Y]).plans}["Wt"] == SIMPLE
    k2 = te.reduce_axis((0, 16), "k2")
    Z = te.compute((8, 16), lambda i, j: te.sum(X[i, k2] * Wt[k2, j], axis=k2), name="Z",
                   attrs={"layout_free_placeholders": ["W"]})
    assert {p.op.name: p.role for p in derive_sketch([Z]).plans}["Wt"] == PRECOMPUTED
    task = Task.from_tensors([X, W, Z], name="precomputed_transpose")
    _check_sampled(None, count=4, seed=0, task=task)
