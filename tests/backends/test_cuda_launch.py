"""A CUDA build's launch manifest (``backends.cuda_launch``) and the simulated device's
timing model (``backends.cuda_sim``): what the measuring processes read beside a CUBIN."""
from __future__ import annotations

import random

import pytest

import te
from autotune import Task
from backends import backend_for, cuda, nvrtc
from backends.cuda_launch import KernelLaunch, LaunchManifest
from backends.cuda_sim import KernelWork, simulated_seconds
from schedule.targets import parse_target

needs_nvrtc = pytest.mark.skipif(not nvrtc.available(), reason="NVRTC is not installed (pip install -e '.[cuda]')")


def _program(name: str, **params):
    task = Task.from_workload(te.create_workload(name, **params), target="cuda")
    return task, cuda.lower_program(task.lower(task.space.sample(random.Random(0))))


def test_the_manifest_describes_every_kernel_and_buffer_of_the_program():
    _, program = _program("softmax", shape=[16, 32])  # four kernels, two workspace buffers
    manifest = LaunchManifest.from_program(program)
    assert [(k.name, k.grid, k.block) for k in manifest.kernels] == [
        (k.name, tuple(k.grid), tuple(k.block)) for k in program.kernels]
    assert [(a.name, a.shape, a.dtype) for a in manifest.params] == [
        (b.name, tuple(b.shape), b.dtype) for b in program.params]
    assert [a.shape for a in manifest.workspace] == [tuple(b.shape) for b in program.workspace]
    assert len(manifest.kernels) == 4 and len(manifest.workspace) == 2
    assert LaunchManifest.from_json(manifest.to_json()) == manifest


def test_the_source_carries_its_manifest_on_its_first_line():
    _, program = _program("matmul", M=32, N=32, K=32)
    source = cuda.generate_source(program)
    assert LaunchManifest.from_source(source) == LaunchManifest.from_program(program)
    assert LaunchManifest.from_source("extern \"C\" __global__ void k() {}") is None


@needs_nvrtc
def test_a_cached_cubin_always_has_its_manifest_beside_it(tmp_path, monkeypatch):
    monkeypatch.setenv("AUTOTUNE_CACHE_DIR", str(tmp_path))
    task, program = _program("dense", M=32, N=32, K=32, bias=True, relu=True)
    backend = backend_for(task.target)
    source = backend.generate_source(program)
    artifact = backend.compile_source(source)
    assert artifact.read_bytes()[:4] == b"\x7fELF"  # a CUBIN is an ELF file
    assert LaunchManifest.read_beside(artifact) == LaunchManifest.from_program(program)
    assert backend.compile_source(source) == artifact  # the second time: from the cache


def _one_kernel(grid: int, block: int) -> LaunchManifest:
    return LaunchManifest((KernelLaunch("kernel", (grid, 1, 1), (block, 1, 1)),), (), ())


def test_the_timing_model_rewards_what_gpus_reward():
    facts = parse_target("cuda_sim:sm_90").facts
    # Per thread: many statements, little traffic (a register-tiled product).
    work = KernelWork(statements=65536, global_bytes=256, shared_bytes=4096, local_elements=16)

    def seconds(grid, block, work=work, registers=64, shared=8192):
        return simulated_seconds(_one_kernel(grid, block), [work], {"kernel": registers}, [shared], facts)

    base = seconds(4096, 128)
    assert seconds(4096, 128) == base  # deterministic
    assert seconds(65536, 8) > 2 * base  # the same threads in blocks of 8: partial warps idle 3/4 of their lanes
    few_accumulators = KernelWork(65536, 256, 4096, local_elements=1)
    assert seconds(4096, 128, work=few_accumulators) > 2 * base  # no independent sums to hide latency
    assert seconds(4096, 128, registers=255) > base  # fewer warps fit on an SM
    assert seconds(64, 128) < base  # less work in all
    traffic = KernelWork(65536, 1 << 20, 4096, 16)
    assert seconds(4096, 128, work=traffic) > 10 * base  # bound by global memory
