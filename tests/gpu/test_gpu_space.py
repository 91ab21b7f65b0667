"""The CUDA schedule space: sampled configs compile with NVRTC and match the reference
under the emulator; limits are refused before any build."""
from __future__ import annotations

import random

import pytest

import te
from schedule.config import Config, ConfigError
from schedule.passes import GPULimits
from schedule.space import ConfigSpace
from schedule.space_gpu import SKETCH_VERSION, GPUConfigSpace
from backends import nvrtc

from gpu_helpers import check_sampled, sample_configs

needs_nvrtc = pytest.mark.skipif(not nvrtc.available(), reason="NVRTC not installed (pip install -e '.[cuda]')")

# Small shapes, float32 and float16 (with float32 accumulation where the op takes an
# out_dtype, or summed in float32 and cast back with acc_dtype): the default suite checks
# 30 configs per case (350 in all: softmax's space holds 25), the slow one 60 more per case
# (650), each compiled by NVRTC and emulated.
DEFAULT = {
    "matmul": ("matmul", dict(M=32, N=32, K=32)),
    "matmul_f16_f32": ("matmul", dict(M=32, N=32, K=32, dtype="float16", out_dtype="float32")),
    "matmul_f16": ("matmul", dict(M=32, N=32, K=32, dtype="float16")),
    "conv2d": ("conv2d", dict(N=1, C=8, H=10, W=10, K=16, R=3, S=3, padding=1)),
    "conv2d_f16_f32": ("conv2d", dict(N=1, C=8, H=10, W=10, K=16, R=3, S=3, padding=1, dtype="float16",
                                      out_dtype="float32")),
    "dense": ("dense", dict(M=32, N=32, K=32, bias=True, relu=True)),
    "dense_f16": ("dense", dict(M=32, N=32, K=32, bias=True, relu=True, dtype="float16")),
    "dense_f16_acc32": ("dense", dict(M=32, N=32, K=32, bias=True, relu=True, dtype="float16", acc_dtype="float32")),
    "matmul_f16_acc32": ("matmul", dict(M=32, N=32, K=32, dtype="float16", acc_dtype="float32")),
    "batch_matmul_f16_f32": ("batch_matmul", dict(B=2, M=16, N=16, K=16, dtype="float16", out_dtype="float32")),
    "softmax": ("softmax", dict(shape=[16, 32])),
    "softmax_f16": ("softmax", dict(shape=[16, 32], dtype="float16")),
}
# Odd shapes (tails everywhere) and the other library ops, for the slow suite.
SLOW = {
    "matmul_odd": ("matmul", dict(M=13, N=17, K=11)),
    "dense_odd": ("dense", dict(M=13, N=17, K=11, bias=True, relu=True)),
    "conv2d_stride": ("conv2d", dict(N=1, C=3, H=9, W=7, K=5, R=3, S=3, padding=1, stride=2)),
    "conv2d_nhwc": ("conv2d", dict(N=1, C=3, H=9, W=7, K=5, R=3, S=3, padding=1, stride=2, layout="NHWC")),
    "batch_matmul": ("batch_matmul", dict(B=3, M=7, N=9, K=5)),
    "depthwise_conv2d": ("depthwise_conv2d", dict(N=1, C=3, H=9, W=7, R=3, S=3, padding=1)),
    "softmax": ("softmax", dict(shape=[7, 13])),
}


def _space(name, **params) -> GPUConfigSpace:
    return ConfigSpace.from_workload(te.create_workload(name, **params), "cuda")


@pytest.mark.parametrize("case", sorted(DEFAULT))
def test_sampled_configs_compile_and_match(case):
    # Without the NVRTC wheel the configs are still emulated; only the compile step is skipped.
    name, params = DEFAULT[case]
    assert check_sampled(name, params, count=30, seed=0) >= 25  # softmax's space holds 25 configs


@needs_nvrtc
def test_flash_attention_configs_compile_and_match_under_the_emulator():
    """te.softmax_sum on the GPU: its running maximum is a second accumulator beside each
    thread's local one; causal, so blocks of keys after the query are left out."""
    Q, K, V = (te.placeholder((1, 32, 8), "float32", n) for n in "QKV")
    wl = te.Workload("flash_attention", {}, [Q, K, V, te.ops.flash_attention(Q, K, V, True, block=16)], 3)
    assert check_sampled("flash_attention", {}, count=3, seed=0, wl=wl) == 3


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(DEFAULT))
def test_many_sampled_configs_compile_and_match(case):
    name, params = DEFAULT[case]
    assert check_sampled(name, params, count=60, seed=1) >= 25


@needs_nvrtc
@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(SLOW))
def test_sampled_configs_of_other_shapes_and_ops(case):
    name, params = SLOW[case]
    assert check_sampled(name, params, count=30, seed=2) >= 1


def test_space_dispatch_and_sketch():
    space = _space("dense", M=32, N=32, K=32)
    assert isinstance(space, GPUConfigSpace) and space.knobs.sketch == SKETCH_VERSION == "cuda-v1"
    text = space.describe()
    assert "SSSRRSRS" in text and "tiles owned by dense_epilogue" in text
    names = {k.name for k in space.knobs.knobs}
    assert any(n.endswith(".unroll") for n in names) and any(".rtile." in n for n in names)


def test_configs_replay_and_round_trip_json():
    space = _space("matmul", M=32, N=32, K=32)
    config = space.sample(random.Random(3))
    again = Config.from_json(config.to_json())
    assert again == config and space.check(again) is None
    s1, _ = space.apply(config)
    s2, _ = space.apply(again)
    import schedule

    assert str(schedule.lower(s1, space.args)) == str(schedule.lower(s2, space.args))


def test_cpu_configs_do_not_fit_the_cuda_space():
    cpu = ConfigSpace.from_workload(te.create_workload("matmul", M=32, N=32, K=32))
    gpu = _space("matmul", M=32, N=32, K=32)
    reason = gpu.check(cpu.sample(random.Random(0)))
    assert reason is not None and "sketch" in reason


def _config(space, tiles: dict, reduce_tiles: dict | None = None) -> Config:
    """A sampled config of ``space`` with the tiles of stage C replaced (axis name -> sizes)."""
    decisions = space.decisions(space.sample(random.Random(0)))
    c = decisions["C"].with_tiles(**tiles).with_reduce_tiles(**(reduce_tiles or {}))
    return decisions.replace(c).to_config()


def test_check_refuses_too_many_threads():
    space = _space("matmul", M=2048, N=2048, K=64)
    config = _config(space, dict(i=(1, 64, 1, 1), j=(1, 32, 1, 1)))
    reason = space.check(config)
    assert reason is not None and "2048 threads per block exceed 1024" in reason
    with pytest.raises(ConfigError):
        space.apply(config)


def test_check_refuses_too_much_shared_memory():
    space = _space("matmul", M=512, N=512, K=512)
    config = _config(space, dict(i=(1, 16, 4, 4), j=(1, 16, 4, 4)), dict(k=(8, 16)))
    # A: 256 x 128 floats, B: 128 x 256 floats = 256 KB.
    reason = space.check(config)
    assert reason is not None and "262144 bytes of shared memory" in reason
    space.limits = GPULimits(max_shared_bytes=1 << 20, max_local_elements=1 << 20)
    assert space.check(config) is None


def test_check_refuses_too_many_accumulators_and_vthreads():
    space = _space("matmul", M=4096, N=512, K=64)
    big = _config(space, dict(i=(1, 8, 16, 16), j=(1, 8, 1, 2)))
    assert "accumulators per thread" in space.check(big)
    many = _config(space, dict(i=(4, 8, 1, 1), j=(4, 8, 1, 1)))
    assert "virtual threads" in space.check(many)


def test_most_of_the_space_is_valid_enough_to_sample():
    for name, params in DEFAULT.values():
        space = _space(name, **params)
        assert len(sample_configs(space, 20, seed=5)) == 20
