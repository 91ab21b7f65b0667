"""On a real GPU: kernels built through CuPy give the reference answers; timing works.

Marked ``gpu`` (skipped by default) and skipped anyway where no GPU is visible.
Run with ``python -m pytest -m gpu tests/gpu`` (``bench/gpu_suite.sh`` does).
"""
from __future__ import annotations

import random

import numpy as np
import pytest

import te
import backends
from autotune.verify import mismatch, reduction_length
from backends import cuda
from schedule.space import ConfigSpace

from gpu_helpers import gpu_matmul, matmul_inputs, sample_configs

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not cuda.gpu_available(), reason="no CUDA GPU visible (needs CuPy and a driver)"),
]


def test_hand_built_matmul_on_the_device_with_numpy_and_cupy_arrays():
    import cupy

    M, N, K = 96, 80, 40
    f = backends.build(*gpu_matmul(M, N, K, unroll=True), target="cuda")
    a, b = matmul_inputs(M, N, K)
    c = np.full((M, N), np.nan, dtype="float32")
    f(a, b, c)  # NumPy: copied in and back
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)
    ca, cb, cc = cupy.asarray(a), cupy.asarray(b), cupy.zeros((M, N), dtype="float32")
    f(ca, cb, cc)  # CuPy: in place
    np.testing.assert_allclose(cc.get(), a @ b, rtol=1e-4, atol=1e-4)
    assert f.resources()["kernel"]["registers"] > 0


@pytest.mark.parametrize("name,params", [
    ("matmul", dict(M=128, N=96, K=64)),
    ("dense", dict(M=64, N=48, K=40, bias=True, relu=True)),
    ("conv2d", dict(N=1, C=8, H=14, W=14, K=16, R=3, S=3, padding=1)),
    ("softmax", dict(shape=[33, 70])),
])
def test_sampled_configs_on_the_device(name, params):
    wl = te.create_workload(name, **params)
    space = ConfigSpace.from_workload(wl, "cuda")
    inputs = wl.random_inputs(0)
    refs = wl.reference(*inputs)
    red = reduction_length(wl.outputs)
    for config in sample_configs(space, 8, seed=0):
        s, args = space.apply(config)
        f = backends.build(s, args, target="cuda")
        outs = [np.full(r.shape, np.nan, dtype=r.dtype) for r in refs]
        f(*inputs, *outs)
        for out, ref in zip(outs, refs):
            assert mismatch(out, ref, red) is None, f"{config}: {mismatch(out, ref, red)}"


def test_device_and_emulator_agree_bit_for_bit_on_integer_free_paths():
    from backends import emulator

    M = N = K = 64
    s, args = gpu_matmul(M, N, K)
    a, b = matmul_inputs(M, N, K)
    dev = np.zeros((M, N), dtype="float32")
    backends.build(s, args, target="cuda")(a, b, dev)
    (emu,) = emulator.run(*gpu_matmul(M, N, K), [a, b])
    np.testing.assert_allclose(dev, emu, rtol=1e-5, atol=1e-5)


def test_timing_with_events_and_l2_flush():
    import cupy
    from backends.cuda_timing import do_bench, l2_cache_bytes

    assert l2_cache_bytes() > 0
    M = N = K = 256
    f = backends.build(*gpu_matmul(M, N, K, vthread=2, threads=8, s3=2, s4=2, r1=2, r2=4), target="cuda")
    a, b = (cupy.asarray(x) for x in matmul_inputs(M, N, K))
    c = cupy.empty((M, N), dtype="float32")
    times = f.time(a, b, c, warmup_ms=5, rep_ms=20)
    assert len(times) >= 5 and all(t > 0 for t in times)
    assert len(do_bench(lambda: cupy.matmul(a, b), warmup_ms=5, rep_ms=10)) >= 5


def test_compile_report_uses_the_device_arch():
    arch = cuda.default_arch()
    assert arch.startswith("sm_")
    result = cuda.compile_ptx(cuda.generate_source(__import__("schedule").lower(*gpu_matmul(64, 64, 64))))
    assert result.arch == arch


def test_random_configs_of_a_bigger_matmul_do_not_crash():
    """Sampled configs either stay within the device's limits and match NumPy, or are refused
    before they run; at least one of them runs."""
    wl = te.create_workload("matmul", M=512, N=512, K=512)
    space = ConfigSpace.from_workload(wl, "cuda")
    rng = random.Random(0)
    a, b = wl.random_inputs(0)
    ref = a @ b
    ran = 0
    for _ in range(5):
        s, args = space.apply(space.sample(rng))
        program = cuda.lower_program(__import__("schedule").lower(s, args))
        if cuda.check_resources(program, space.limits) is not None:
            continue
        c = np.zeros((512, 512), dtype="float32")
        backends.build(s, args, target="cuda")(a, b, c)
        assert mismatch(c, ref, 512) is None
        ran += 1
    assert ran >= 1
