"""Differential fuzz of multi-stage DAGs: random fusion decisions against NumPy.

Each case draws a multi-stage workload at a small random shape (softmax over any axis,
layernorm, attention with or without the causal mask, FlashAttention's blocked form (its
key-block stages hosted at the combine's loop over blocks), mlp, conv2d + batch norm + relu,
average pooling, dense with its epilogue, the q, k and v projections (their siblings in
loops of their own or sharing the first's), and two DAGs written here: a chain of two
matmuls and an element-wise chain with expensive math), then a config of its CPU space
in which, half the time, every stage that has a host is computed at a random loop of it
(a random valid attachment: readers at the same loop or deeper), and checks the built
kernel against the workload's NumPy reference. Any mismatch, lowering error or compiler
error is a bug. The default suite runs ``QUICK_CASES``; the slow mark runs 1000
(``python -m pytest -m slow tests/schedule/test_fusion_fuzz.py``).

The fuzz checks the lowering, so its kernels compile without gcc's loop unswitching and
if-conversion. gcc 12.2 at -O3 -ffast-math, with AVX2 or AVX-512, miscompiles a guarded
sum such as (a softmax row sum computed per block of 5 rows of 6, one of its cases)

    for o in 0..1: for i0 in 0..4: for i1 in 0..1:
        sum[i0, i1] = 0
        for k in 0..6: if (o * 5 + i0 < 6) sum[i0, i1] += E[o * 5 + i0, k, i1]

(the same C, written by hand, sums the wrong elements; -fno-tree-loop-if-convert,
-fno-tree-loop-vectorize or no -ffast-math give the right ones), and the padding copy
described in ``test_sched_property``. Tuning keeps both optimisations and verifies every
candidate, so such a kernel costs one trial.
"""
from __future__ import annotations

import dataclasses
import random

import pytest

import te
from backends import cpu
from schedule.config import ConfigError
from schedule.space import ConfigSpace
from sched_helpers import check, workload

QUICK_CASES = 24


@pytest.fixture(autouse=True)
def _no_miscompiled_loops(monkeypatch):
    flags = cpu.CpuBackend.flags.fget
    monkeypatch.setattr(cpu.CpuBackend, "flags",
                        property(lambda self: (*flags(self), "-fno-unswitch-loops", "-fno-tree-loop-if-convert")))
LONG_CASES = 1000


def _matmul_chain(rng: random.Random):
    """E = relu(A B) D: the first product's only reader is the second."""
    m, k, n, p = (rng.randint(1, 24) for _ in range(4))
    A, B, D = te.placeholder((m, k), "float32", "A"), te.placeholder((k, n), "float32", "B"), \
        te.placeholder((n, p), "float32", "D")
    r = te.reduce_axis((0, k), "r")
    C = te.compute((m, n), lambda i, j: te.sum(A[i, r] * B[r, j], axis=r), name="C")
    R = te.compute((m, n), lambda i, j: te.max(C[i, j], 0.0), name="R")
    q = te.reduce_axis((0, n), "q")
    E = te.compute((m, p), lambda i, j: te.sum(R[i, q] * D[q, j], axis=q), name="E")
    return workload([A, B, D, E])


def _expensive_chain(rng: random.Random):
    """Row statistics of exp and log of a 2-d input feeding one element-wise output."""
    rows, cols = rng.randint(1, 30), rng.randint(1, 70)
    X = te.placeholder((rows, cols), "float32", "X")
    E = te.compute((rows, cols), lambda i, j: te.exp(X[i, j] * 0.25), name="E")
    k = te.reduce_axis((0, cols), "k")
    S = te.compute((rows,), lambda i: te.sum(E[i, k], axis=k), name="S")
    L = te.compute((rows,), lambda i: te.log(S[i] + 1.0), name="L")
    k2 = te.reduce_axis((0, cols), "k2")
    M = te.compute((rows,), lambda i: te.max(E[i, k2] - L[i], axis=k2), name="M")
    Y = te.compute((rows, cols), lambda i, j: E[i, j] * M[i] + L[i], name="Y")
    return workload([X, Y])


def _flash_attention(rng: random.Random):
    """te.ops.flash_attention over 1 to 5 blocks of 1 to 8 keys, causal half the time."""
    heads, dim, block = rng.randint(1, 3), rng.randint(1, 12), rng.randint(1, 8)
    shape = (heads, block * rng.randint(1, 5), dim)
    Q, K, V = (te.placeholder(shape, "float32", n) for n in "QKV")
    return workload([Q, K, V, te.ops.flash_attention(Q, K, V, rng.random() < 0.5, block)], name="flash_attention")


def _draw_workload(rng: random.Random):
    kind = rng.choice(["softmax", "layernorm", "attention", "flash_attention", "mlp", "conv2d_bn_relu", "pool2d",
                       "dense", "qkv", "matmul_chain", "expensive_chain"])
    small = lambda hi: rng.randint(1, hi)  # noqa: E731
    if kind == "softmax":
        shape = [small(9) for _ in range(rng.randint(1, 3))]
        return te.create_workload("softmax", shape=shape, axis=rng.randrange(-len(shape), len(shape)))
    if kind == "layernorm":
        return te.create_workload("layernorm", M=small(20), N=small(90))
    if kind == "attention":
        return te.create_workload("attention", heads=small(3), seq=small(40), dim=small(12),
                                  causal=rng.random() < 0.5)
    if kind == "flash_attention":
        return _flash_attention(rng)
    if kind == "mlp":
        return te.create_workload("mlp", M=small(12), D=small(16), H=small(24))
    if kind == "conv2d_bn_relu":
        size = rng.randint(3, 9)
        return te.create_workload("conv2d_bn_relu", N=1, C=small(4), H=size, W=size, K=small(5), R=3, S=3,
                                  padding=rng.randint(0, 1), layout=rng.choice(["NCHW", "NHWC"]))
    if kind == "pool2d":
        size = rng.randint(4, 10)
        return te.create_workload("pool2d", N=1, C=small(4), H=size, W=size, kernel=rng.randint(2, 3),
                                  stride=rng.randint(1, 2), padding=rng.randint(0, 1), pool_type="avg")
    if kind == "dense":
        return te.create_workload("dense", M=small(20), N=small(40), K=small(30))
    if kind == "qkv":
        return te.create_workload("qkv", M=small(20), D=small(24), N=small(30))
    return _matmul_chain(rng) if kind == "matmul_chain" else _expensive_chain(rng)


def _draw_config(space: ConfigSpace, rng: random.Random):
    """A valid config; half the time every stage with a host is attached at a random level."""
    config = space.sample(rng)
    hosted = [(p, layout.stage) for p, layout in space._layouts if p.host is not None and layout is not None]
    if not hosted or rng.random() < 0.5:
        return config
    levels = {k.name: k.candidates for k in space.knobs.knobs if k.name.endswith(".attach")}
    for _ in range(50):
        d = space.decisions(config)
        for _, stage in hosted:
            d = d.replace(dataclasses.replace(d[stage], attach=rng.choice(levels[f"{stage}.attach"])))
        attached = space.encode(d)
        if space.check(attached) is None:
            return attached
    return config


def _fuzz(cases: int, seed: int) -> None:
    rng = random.Random(seed)
    for case in range(cases):
        wl = _draw_workload(rng)
        space = ConfigSpace.from_workload(wl)
        try:
            config = _draw_config(space, rng)
        except ConfigError:
            continue  # a space with no valid sample at this shape: nothing to check
        s, _ = space.apply(config)
        try:
            check(s, wl)
        except Exception as exc:  # name the case, then fail with the original error
            raise AssertionError(f"case {case} (seed {seed}): {wl.name} {wl.params}\n"
                                 f"{space.describe_config(config)}\n{config.to_json()}") from exc


def test_random_fusion_decisions_match_numpy():
    _fuzz(QUICK_CASES, seed=0)


@pytest.mark.slow
def test_a_thousand_random_fusion_decisions_match_numpy():
    _fuzz(LONG_CASES, seed=1)
