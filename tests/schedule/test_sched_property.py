"""Property: every legal schedule computes what the reference computes.

Random schedules are built for the CPU and checked against NumPy:

- matmul (any M, N, K in 1..17, dtypes, transposes): splits with arbitrary factors or
  nparts (1..extent+3, and a second split of either part), any order of the leaf loops,
  a fuse of two adjacent spatial leaves, vectorize of an innermost spatial leaf, unroll,
  parallel of the outermost spatial leaf, a local register tile (cache_write) computed
  at any leaf of C, and packed copies of A and/or B (cache_read) at any leaf of the
  stage that reduces;
- elementwise_chain: each intermediate inlined, computed at any leaf of its reader,
  computed at one and moved back to the root, or left at the root;
- conv2d (NCHW/NHWC, stride, padding, dilation): the pad stage inlined, at the root or
  at any leaf of the convolution's randomly shaped loop nest.

Only legal schedules are drawn (a loop hosting a stage is not vectorized, and stages
computed inside another's loops stay serial so no parallel loop nests in another), so
a ScheduleError, IRVerifyError, gcc error or wrong answer is a bug, not a refusal.
SCHED_PROPERTY_EXAMPLES=N runs N examples per property instead of 60, 40 and 25.

These properties check the lowering, so their kernels compile without gcc's loop
unswitching: gcc 12.2 at -O3 with AVX2 or AVX-512 miscompiles a padding copy such as

    for i1 in 0..9: for i2 in 0..12: for i3 in 0..2:
        pad[i1, i2, i3] = (2 <= i1 < 7 && 2 <= i2 < 10) ? data[i1 - 2, i2 - 2, i3] : 0

once it unswitches the i1 test and vectorizes the rest with masked loads (the same C,
written by hand, gives wrong values; -fno-unswitch-loops, -O2 or SSE2 give the right
ones). Tuning keeps unswitching, which conv2d's padded loops gain from, and verifies
every candidate, so such a kernel costs one trial.
"""
from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

import schedule
import te
from backends import cpu
from sched_helpers import check, tensor


@pytest.fixture(autouse=True)
def _no_loop_unswitching(monkeypatch):
    flags = cpu.CpuBackend.flags.fget
    monkeypatch.setattr(cpu.CpuBackend, "flags", property(lambda self: (*flags(self), "-fno-unswitch-loops")))

#: Examples per property; SCHED_PROPERTY_EXAMPLES=1000 runs a longer bug hunt.
SCALE = os.environ.get("SCHED_PROPERTY_EXAMPLES")
SETTINGS = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def split_randomly(draw, stage, axis, label):
    """Maybe split ``axis`` (factor or nparts in 1..extent+3), maybe split a part again."""
    how = draw(st.sampled_from(["none", "factor", "nparts"]), label=f"{label}: split")
    if how == "none":
        return
    amount = draw(st.integers(1, axis.extent + 3), label=f"{label}: {how}")
    outer, inner = stage.split(axis, **{how: amount})
    again = draw(st.sampled_from(["none", "outer", "inner"]), label=f"{label}: split again")
    if again != "none":
        part = outer if again == "outer" else inner
        stage.split(part, factor=draw(st.integers(1, part.extent + 2), label=f"{label}: {again} factor"))


def shape_loops(draw, stage, label, *, fuse=True):
    """Random splits of every root axis, a random order of the leaves, maybe one fuse."""
    for axis in stage.root_iter_vars:
        split_randomly(draw, stage, axis, f"{label}.{axis.name}")
    order = draw(st.permutations(stage.leaf_iter_vars), label=f"{label}: order")
    stage.reorder(*order)
    leaves = stage.leaf_iter_vars
    pairs = [n for n in range(len(leaves) - 1) if leaves[n].kind == leaves[n + 1].kind == te.tensor.SPATIAL]
    if fuse and pairs and draw(st.booleans(), label=f"{label}: fuse"):
        n = draw(st.sampled_from(pairs), label=f"{label}: fuse at")
        stage.fuse(leaves[n], leaves[n + 1])


def annotate(draw, stage, label, *, keep_free=None, allow_parallel=True):
    """Maybe vectorize the innermost (spatial) leaf, unroll one leaf, parallelize the outermost spatial leaf.

    Leaves in ``keep_free`` host other stages: they must not be vectorized.
    """
    leaves = stage.leaf_iter_vars
    inner = leaves[-1]
    if inner.kind == te.tensor.SPATIAL and inner not in (keep_free or ()) and draw(st.booleans(), label=f"{label}: vectorize"):
        stage.vectorize(inner)
    free = [iv for iv in leaves if iv not in stage.iter_kinds]
    if free and draw(st.booleans(), label=f"{label}: unroll"):
        stage.unroll(draw(st.sampled_from(free), label=f"{label}: unroll which"))
    spatial = [iv for iv in leaves if iv.kind == te.tensor.SPATIAL]
    if allow_parallel and spatial and spatial[0] not in stage.iter_kinds and draw(st.booleans(), label=f"{label}: parallel"):
        stage.parallel(spatial[0])


def attach_randomly(draw, s, stage, host, label):
    """Compute ``stage`` at a random leaf of ``host`` (or leave it at the root); the leaf or None."""
    at = draw(st.sampled_from([None] + host.leaf_iter_vars), label=f"{label} at")
    if at is not None:
        stage.compute_at(host, at)
    return at


@settings(max_examples=int(SCALE or 60), **SETTINGS)
@given(data=st.data())
def test_random_matmul_schedules(data):
    draw = data.draw
    M, N, K = (draw(st.integers(1, 17), label=n) for n in "MNK")
    dtype = draw(st.sampled_from(["float32", "float32", "float64", "int32"]), label="dtype")
    ta, tb = draw(st.booleans(), label="transpose_a"), draw(st.booleans(), label="transpose_b")
    wl = te.create_workload("matmul", M=M, N=N, K=K, dtype=dtype, transpose_a=ta, transpose_b=tb)
    A, B, C = wl.args
    s = schedule.create_schedule(C)
    CL = s.cache_write(C, "local") if draw(st.booleans(), label="cache_write") else None
    reader = s[CL] if CL is not None else s[C]          # the stage doing the reduction
    packs = [(s.cache_read(X, "local", [reader]), f"{X.name}.local")
             for X in (A, B) if draw(st.booleans(), label=f"cache_read {X.name}")]
    # outer stages first: a host's loops take their final shape before anything attaches
    shape_loops(draw, s[C], "C")
    hosted = []
    if CL is not None:
        hosted.append(attach_randomly(draw, s, s[CL], s[C], "C.local"))
        annotate(draw, s[C], "C", keep_free=hosted, allow_parallel=True)
        shape_loops(draw, reader, "C.local")
    for P, label in packs:
        hosted.append(attach_randomly(draw, s, s[P], reader, label))
    # attached stages stay serial: no parallel loop nests in another
    annotate(draw, reader, reader.name, keep_free=hosted, allow_parallel=reader.attach == "root")
    for P, label in packs:
        shape_loops(draw, s[P], label)
        annotate(draw, s[P], label, allow_parallel=s[P].attach == "root")
    note(str(schedule.lower(s, wl.args)))
    check(s, wl)


@settings(max_examples=int(SCALE or 40), **SETTINGS)
@given(data=st.data())
def test_random_elementwise_chain_schedules(data):
    draw = data.draw
    shape = draw(st.lists(st.integers(1, 13), min_size=1, max_size=3), label="shape")
    dtype = draw(st.sampled_from(["float32", "int32"]), label="dtype")
    wl = te.create_workload("elementwise_chain", shape=shape, dtype=dtype)
    out = wl.outputs[0]
    T1, T2 = tensor(wl, "T_mul"), tensor(wl, "T_add1")
    s = schedule.create_schedule(out)
    modes = ["inline", "root", "at", "at_then_root"]
    mode2 = draw(st.sampled_from(modes), label="T_add1")
    mode1 = draw(st.sampled_from(modes), label="T_mul")
    # readers shape their loops before their producers attach at them
    shape_loops(draw, s[out], "T_relu")
    hosted = []
    if mode2 in ("at", "at_then_root"):
        at = draw(st.sampled_from(s[out].leaf_iter_vars), label="T_add1 at")
        s[T2].compute_at(s[out], at)
        hosted.append(at)
        if mode2 == "at_then_root":
            s[T2].compute_root()
            hosted.pop()
    elif mode2 == "inline":
        s[T2].compute_inline()
    if mode2 != "inline":
        shape_loops(draw, s[T2], "T_add1")
    if mode1 in ("at", "at_then_root"):
        host = s[out] if mode2 == "inline" else s[T2]  # its only (effective) reader
        at = draw(st.sampled_from(host.leaf_iter_vars), label="T_mul at")
        s[T1].compute_at(host, at)
        if mode1 == "at":
            hosted.append(at)
        else:
            s[T1].compute_root()
    elif mode1 == "inline":
        s[T1].compute_inline()
    if mode1 != "inline":
        shape_loops(draw, s[T1], "T_mul")
    for t, label in ((out, "T_relu"), (T2, "T_add1"), (T1, "T_mul")):
        stage = s[t]
        if stage.attach != "inline":  # attached stages stay serial: no parallel loop nests in another
            annotate(draw, stage, label, keep_free=hosted, allow_parallel=stage.attach == "root")
    note(str(schedule.lower(s, wl.args)))
    check(s, wl)



@settings(max_examples=int(SCALE or 25), **SETTINGS)
@given(data=st.data())
def test_random_conv2d_schedules(data):
    """The pad stage inlined, at the root or at any loop of the convolution; random conv loops."""
    draw = data.draw
    layout = draw(st.sampled_from(["NCHW", "NHWC"]), label="layout")
    stride, padding = draw(st.integers(1, 2), label="stride"), draw(st.integers(0, 2), label="padding")
    dilation = draw(st.integers(1, 2), label="dilation")
    H, W = draw(st.integers(5, 9), label="H"), draw(st.integers(5, 9), label="W")
    wl = te.create_workload("conv2d", N=1, C=2, H=H, W=W, K=3, R=3, S=3, stride=stride,
                            padding=padding, dilation=dilation, layout=layout)
    out = wl.outputs[0]
    s = schedule.create_schedule(out)
    shape_loops(draw, s[out], "conv")
    hosted = []
    if padding:
        P = tensor(wl, "pad")
        mode = draw(st.sampled_from(["inline", "root", "at"]), label="pad")
        if mode == "inline":
            s[P].compute_inline()
        else:
            if mode == "at":
                hosted.append(attach_randomly(draw, s, s[P], s[out], "pad"))
            shape_loops(draw, s[P], "pad")
            annotate(draw, s[P], "pad", allow_parallel=s[P].attach == "root")
    annotate(draw, s[out], "conv", keep_free=hosted)
    note(str(schedule.lower(s, wl.args)))
    check(s, wl)
