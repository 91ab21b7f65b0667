"""Shared pieces of the GPU tests: a hand-built GPU matmul schedule and config checking."""
from __future__ import annotations

import random
from concurrent.futures import ThreadPoolExecutor

import numpy as np

import te
import schedule
from autotune.verify import reference_checks
from schedule.passes import lower_gpu
from schedule.space import ConfigSpace, _split_levels


def _matmul_with_local_tile(M: int, N: int, K: int):
    """The library's float32 matmul (A, B, C), a fresh schedule and C's cache_write local tile."""
    A, B, C = te.create_workload("matmul", M=M, N=N, K=K).args
    s = schedule.create_schedule(C)
    return A, B, C, s, s.cache_write(C, "local")


def gpu_matmul(M=64, N=64, K=64, vthread=2, threads=4, s3=2, s4=2, r1=2, r2=4, unroll=False):
    """(schedule, args) of an SSSRRSRS matmul, built by hand with the primitives."""
    A, B, C, s, CL = _matmul_with_local_tile(M, N, K)
    AS = s.cache_read(A, "shared", [CL])
    BS = s.cache_read(B, "shared", [CL])
    st = s[C]
    i, j = st.op.axis
    bi, vi, ti, ii = _split_levels(st, i, [vthread, threads, s3 * s4])
    bj, vj, tj, ij = _split_levels(st, j, [vthread, threads, s3 * s4])
    st.reorder(bi, bj, vi, vj, ti, tj, ii, ij)
    st.bind(st.fuse(bi, bj), "blockIdx.x")
    st.bind(st.fuse(vi, vj), "vthread")
    tf = st.fuse(ti, tj)
    st.bind(tf, "threadIdx.x")
    cl = s[CL]
    cl.compute_at(st, tf)
    ci, cj = cl.op.axis
    ci3, ci4 = cl.split(ci, factor=s4)
    cj3, cj4 = cl.split(cj, factor=s4)
    k0, k1, k2 = _split_levels(cl, cl.op.reduce_axis[0], [r1, r2])
    cl.reorder(k0, k1, ci3, cj3, k2, ci4, cj4)
    if unroll:
        for ax in (ci4, cj4, k2):
            cl.unroll(ax)
    for sh in (AS, BS):
        sst = s[sh]
        sst.compute_at(cl, k0)
        fused = sst.fuse(*sst.op.axis)
        _, inner = sst.split(fused, factor=threads * threads)
        sst.bind(inner, "threadIdx.x")
    return s, [A, B, C]


def matmul_inputs(M, N, K, seed=0):
    rng = np.random.default_rng(seed)
    return rng.uniform(-1, 1, (M, K)).astype("float32"), rng.uniform(-1, 1, (K, N)).astype("float32")


def sample_configs(space, count: int, seed: int):
    """``count`` distinct valid configs (fewer if the space is smaller)."""
    rng = random.Random(seed)
    configs = {}
    for _ in range(count * 4):
        c = space.sample(rng)
        configs.setdefault(c.hash, c)
        if len(configs) == count:
            break
    return list(configs.values())


def check_sampled(name: str, params: dict, count: int, seed: int, compile: bool | None = None,
                  wl: te.Workload | None = None) -> int:
    """Sample GPU configs of a workload (the library's ``name`` with ``params``, or ``wl``);
    each must compile with NVRTC (when ``compile``; default: when NVRTC is installed) and
    match the reference under the emulator. Returns how many were checked."""
    from backends import cuda, emulator, nvrtc

    if compile is None:
        compile = nvrtc.available()

    wl = wl or te.create_workload(name, **params)
    space = ConfigSpace.from_workload(wl, "cuda")
    inputs = wl.random_inputs(seed)
    refs = wl.reference(*inputs)
    checks = reference_checks(wl.outputs, refs)
    configs = sample_configs(space, count, seed)

    def one(config):
        s, args = space.apply(config)
        program = lower_gpu(schedule.lower(s, args))
        source = cuda.generate_source(program)
        result = cuda.compile_ptx(source) if compile else None  # raises NVRTCError with the log
        reason = cuda.check_resources(program, space.limits, result)
        assert reason is None, f"{name} {config}: {reason}"
        assert sum(k.shared_bytes for k in program.kernels) == sum(
            space.shared_bytes(p, config.values) for p in space.sketch.plans if p.role == "multi_level"
        ), f"{name} {config}: check()'s shared-memory estimate differs from the kernel"
        module = emulator.build_program(program)
        outs = [np.full(r.shape, np.nan, dtype=r.dtype) for r in refs]
        module(*inputs, *outs)
        for out, check in zip(outs, checks):
            problem = check(out)
            assert problem is None, f"{name} {config}: {problem}"

    with ThreadPoolExecutor(max_workers=2) as pool:  # NVRTC in one, gcc in the other
        list(pool.map(one, configs))
    return len(configs)


def gpu_matmul_2d(M=48, N=40, K=24, ty=4, tx=8, rk=8):
    """(schedule, args) of a matmul on a 2-D block (threadIdx.y x threadIdx.x, blockIdx.y x
    blockIdx.x) whose cooperative fetch is split over both thread dimensions."""
    A, B, C, s, CL = _matmul_with_local_tile(M, N, K)
    shared = [s.cache_read(A, "shared", [CL]), s.cache_read(B, "shared", [CL])]
    st = s[C]
    i, j = st.op.axis
    bi, ti = st.split(i, factor=ty)
    bj, tj = st.split(j, factor=tx)
    st.reorder(bi, bj, ti, tj)
    st.bind(bi, "blockIdx.y")
    st.bind(bj, "blockIdx.x")
    st.bind(ti, "threadIdx.y")
    st.bind(tj, "threadIdx.x")
    cl = s[CL]
    cl.compute_at(st, tj)
    ko, ki = cl.split(cl.op.reduce_axis[0], factor=rk)
    for sh in shared:
        sst = s[sh]
        sst.compute_at(cl, ko)
        fused = sst.fuse(*sst.op.axis)
        _, inner = sst.split(fused, factor=ty * tx)
        y, x = sst.split(inner, factor=tx)
        sst.bind(y, "threadIdx.y")
        sst.bind(x, "threadIdx.x")
    return s, [A, B, C]
