"""The CUDA backend without a GPU: source text, NVRTC compilation, candidate statuses.

Statuses come from ``autotune.builder.LocalBuilder`` on cuda tasks: it builds through the
target's backend (``backends.backend_for``), which raises typed errors the builder maps.
``HandBuilder`` builds a hand-made schedule in place of each config's.
"""
from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

import random

import te
import schedule
from autotune import Task
from autotune.builder import LocalBuilder
from autotune.measure import MeasureInput
from backends import BuildError, ResourceLimitError, backend_for, cuda, nvrtc
from schedule.passes import lower_gpu
from schedule.targets import parse_target

from gpu_helpers import gpu_matmul

needs_nvrtc = pytest.mark.skipif(not nvrtc.available(), reason="NVRTC not installed (pip install -e '.[cuda]')")


class HandBuilder(LocalBuilder):
    """Builds the schedule ``(s, args)`` given to it, whatever the config (the task's target decides
    the backend): lets a hand-made schedule go through the builder's error mapping."""

    def __init__(self, s, args, **kw):
        super().__init__(n_workers=1, **kw)
        self.s, self.args = s, args

    def source(self, inp):
        return self.backend(inp.task.target).generate_source(schedule.lower(self.s, self.args))


def _build(s, args, target="cuda"):
    """(status, error) of building ``(s, args)`` for ``target`` with the builder."""
    task = Task("matmul", dict(M=64, N=64, K=64), target=target)
    config = task.space.sample(random.Random(0))
    result = HandBuilder(s, args).build([MeasureInput(task, config)])[0]
    return result.status, result.error


def _source(s, args):
    return cuda.generate_source(schedule.lower(s, args))


def test_source_spells_the_cuda_constructs():
    src = _source(*gpu_matmul(64, 64, 64, unroll=True))
    assert 'extern "C" __global__ __launch_bounds__(16) void kernel(float* __restrict__ A, ' \
           'float* __restrict__ B, float* __restrict__ C)' in src
    assert "(int32_t)blockIdx.x;" in src and "(int32_t)threadIdx.x;" in src
    assert "__shared__ float A_shared[256];" in src and "__shared__ float B_shared[256];" in src
    assert "float C_local[64];" in src
    assert src.count("__syncthreads();") == 2
    assert "#pragma unroll" in src
    assert "vthread" not in src


def test_partial_thread_loops_are_guarded():
    A = te.placeholder((100,), name="A")
    B = te.compute((100,), lambda i: A[i] + 1, name="B")
    C = te.compute((100,), lambda i: B[i] * 2, name="C")
    s = schedule.create_schedule(C)
    co, ci = s[C].split(C.op.axis[0], factor=64)
    s[C].bind(co, "blockIdx.x")
    s[C].bind(ci, "threadIdx.x")
    bo, bi = s[B].split(B.op.axis[0], factor=32)
    s[B].bind(bo, "blockIdx.x")
    s[B].bind(bi, "threadIdx.x")
    program = lower_gpu(schedule.lower(s, [A, C]))
    assert [k.block for k in program.kernels] == [(32, 1, 1), (64, 1, 1)]
    assert [b.name for b in program.workspace] == ["B"]
    src = cuda.generate_source(program)
    assert "void kernel_0(float* __restrict__ A, float* __restrict__ C, float* __restrict__ B)" in src
    assert "< 100)" in src  # the tail guard of the last block


def test_generate_source_accepts_a_lowered_func_like_other_callers():
    func = schedule.lower(*gpu_matmul(32, 32, 32))
    assert cuda.generate_source(func) == cuda.generate_source(lower_gpu(func))


def test_build_without_a_gpu_says_so():
    if cuda.gpu_available():
        pytest.skip("a GPU is present")
    import backends

    s, args = gpu_matmul(32, 32, 32)
    with pytest.raises(cuda.CUDAUnavailable, match="GPU|CuPy"):
        backends.build(s, args, target="cuda")


def test_importing_the_cuda_backend_needs_no_cupy():
    code = textwrap.dedent("""
        import sys
        sys.modules["cupy"] = None          # any import of cupy fails
        import backends.cuda as cuda, backends.emulator, backends.cuda_timing
        assert cuda.gpu_available() is False
        try:
            cuda._require_gpu()
        except cuda.CUDAUnavailable as exc:
            assert "CuPy" in str(exc)
        else:
            raise SystemExit("no error")
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=".")
    assert proc.returncode == 0, proc.stderr


def test_float16_is_cuda_half_with_its_header():
    A = te.placeholder((8,), "float16", name="A")
    B = te.compute((8,), lambda i: A[i] + 1, name="B")
    s = schedule.create_schedule(B)
    source = _source(s, [A, B])
    assert "#include <cuda_fp16.h>" in source and "__half* __restrict__ A" in source.replace("const ", "")
    float32 = _source(*gpu_matmul(16, 16, 16))
    assert "cuda_fp16.h" not in float32  # only kernels that use it include it


@needs_nvrtc
def test_float16_kernels_compile_with_the_wheels_headers():
    from backends import nvrtc

    assert nvrtc.header_dirs(), "no cuda_fp16.h found (pip install -e '.[cuda]' brings nvidia-cuda-runtime)"
    A = te.placeholder((64,), "float16", name="A")
    B = te.compute((64,), lambda i: te.max(A[i] * A[i], te.const(0.5, "float16")), name="B")
    s = schedule.create_schedule(B)
    i, = s[B].op.axis
    bx, tx = s[B].split(i, factor=32)
    s[B].bind(bx, "blockIdx.x")
    s[B].bind(tx, "threadIdx.x")
    result = cuda.compile_ptx(_source(s, [A, B]), arch="sm_80")
    assert result.cubin and "kernel" in result.kernels


# ---------------------------------------------------------------- NVRTC


@needs_nvrtc
def test_nvrtc_compiles_and_reports_resources():
    src = _source(*gpu_matmul(64, 64, 64, unroll=True))
    result = cuda.compile_ptx(src, arch="sm_80")
    assert ".entry kernel(" in result.ptx and result.cubin
    res = result.kernels["kernel"]
    assert res.registers > 0 and res.shared_bytes == 2048


@needs_nvrtc
def test_nvrtc_compile_error_carries_the_log():
    with pytest.raises(nvrtc.NVRTCError) as info:
        cuda.compile_ptx('extern "C" __global__ void kernel(float* a) { a[0] = undefined_name; }')
    assert "undefined_name" in info.value.log


@needs_nvrtc
def test_ctypes_binding_gives_the_same_report():
    src = _source(*gpu_matmul(32, 32, 32))
    via_default = nvrtc.compile_ptx(src, "sm_80")
    via_ctypes = nvrtc.compile_ptx(src, "sm_80", binding="ctypes")
    assert via_default.kernels == via_ctypes.kernels


def test_ptxas_log_parsing():
    log = textwrap.dedent("""\
        ptxas info    : 0 bytes gmem
        ptxas info    : Compiling entry function 'kernel_0' for 'sm_80'
        ptxas info    : Function properties for kernel_0
        ptxas         .     256 bytes stack frame, 8 bytes spill stores, 12 bytes spill loads
        ptxas info    : Used 40 registers, used 1 barriers, 256 bytes cumulative stack size, 1024 bytes smem
        ptxas info    : Compiling entry function 'kernel_1' for 'sm_80'
        ptxas info    : Function properties for kernel_1
        ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
        ptxas info    : Used 12 registers
    """)
    got = nvrtc.parse_ptxas_log(log)
    assert got["kernel_0"] == nvrtc.KernelResources("kernel_0", 40, 1024, 256, 8, 12)
    assert got["kernel_1"] == nvrtc.KernelResources("kernel_1", 12, 0, 0, 0, 0)


@needs_nvrtc
def test_candidate_statuses():
    s, args = gpu_matmul(64, 64, 64)
    assert _build(s, args) == ("ok", None)
    small = parse_target("cuda").with_facts(shared_bytes_per_block=1024)
    status, error = _build(*gpu_matmul(64, 64, 64), target=small)
    assert status == "invalid" and "shared memory" in error
    # 2048 threads per block: lowering is fine, the launch is not.
    status, error = _build(*gpu_matmul(256, 256, 8, vthread=1, threads=64, s3=1, s4=1, r1=1, r2=8))
    assert status == "invalid" and "threads per block" in error
    # A schedule lowering rejects is a compile error, not an exception.
    A = te.placeholder((64,), name="A")
    B = te.compute((64,), lambda i: A[i] + 1, name="B")
    s = schedule.create_schedule(B)
    s[B].parallel(B.op.axis[0])
    status, error = _build(s, [A, B])
    assert status == "compile_error" and "parallel" in error
    with pytest.raises((BuildError, cuda.GPUError), match="parallel"):  # the typed error behind it
        backend_for("cuda").generate_source(schedule.lower(s, [A, B]))


@needs_nvrtc
def test_builder_builds_configs_of_a_cuda_task_with_nvrtc():
    task = Task("matmul", dict(M=64, N=64, K=64), target="cuda:sm_80")
    rng = random.Random(1)
    configs = [task.space.sample(rng) for _ in range(3)]
    results = LocalBuilder(n_workers=2).build([MeasureInput(task, c) for c in configs])
    assert [r.status for r in results] == ["ok"] * 3, [r.error for r in results]
    cubin = open(results[0].artifact, "rb").read()
    assert cubin[:4] == b"\x7fELF"  # a CUBIN for the preset's architecture, in the compile cache
    assert backend_for(task.target).describe().flags.startswith("--gpu-architecture=sm_80")


@needs_nvrtc
def test_ptxas_shared_memory_overrun_is_invalid():
    # 64 KB of static shared memory: ptxas refuses it; that is a resource limit, not a bug.
    src = ('extern "C" __global__ void kernel(float* a) { __shared__ float s[16384]; '
           's[threadIdx.x] = a[threadIdx.x]; __syncthreads(); a[threadIdx.x] = s[16383 - threadIdx.x]; }')
    with pytest.raises(nvrtc.NVRTCError) as info:
        cuda.compile_ptx(src)
    assert "too much shared data" in info.value.log
    # A schedule past the hardware's 48 KB that our (raised) limit lets through: ptxas says no.
    s, args = gpu_matmul(128, 128, 128, vthread=1, threads=16, s3=2, s4=2, r1=8, r2=16)
    raised = parse_target("cuda").with_facts(shared_bytes_per_block=1 << 20)
    status, error = _build(s, args, target=raised)
    assert status == "invalid" and "too much shared data" in error
    with pytest.raises(ResourceLimitError):
        backend_for(raised).compile_source(_source(s, args))


@needs_nvrtc
def test_two_dimensional_blocks_compile():
    from gpu_helpers import gpu_matmul_2d

    s, args = gpu_matmul_2d(37, 29, 19)
    src = _source(s, args)
    assert "(int32_t)threadIdx.y;" in src and "(int32_t)blockIdx.y;" in src
    assert _build(s, args) == ("ok", None)
