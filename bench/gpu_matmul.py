"""On a machine with a GPU: run the GPU tests, then tune a 4096^3 float32 matmul against cuBLAS.

    python bench/gpu_matmul.py            # gpu tests + ~300 trials, all within 10 minutes
    python bench/gpu_matmul.py --quick    # gpu tests + 40 trials
    python bench/gpu_matmul.py --skip-tests --trials 500 --budget 900
    python bench/gpu_matmul.py --dry-run --quick   # no GPU: propose, lower, NVRTC only
    python bench/gpu_matmul.py --dry-run --target cuda:h200   # NVRTC for a preset's architecture

``--target`` is a spec of the target registry (``schedule.targets``): ``cuda`` (this GPU,
or the sm_90 preset without one) or ``cuda:<preset>``; the space's limits and the NVRTC
architecture come from its facts.

What it does, in one run:

1. ``pytest -m gpu tests/gpu``: the device tests (kernels through CuPy against NumPy);
2. cuBLAS (``cupy.matmul``) timed with the same protocol as the candidates;
3. a self-contained search over the "cuda-v1" schedule space: batches of configs (random at
   first, then half mutations of the best eight), each lowered here, compiled by NVRTC in a
   pool of worker processes, loaded through CuPy, checked against cuBLAS's product, and
   timed with CUDA events and an L2 flush before every repeat (``backends.cuda_timing``);
   a candidate more than 4x slower than the best on its first run is not timed further;
4. the best schedule, its GFLOP/s, and cuBLAS's GFLOP/s.

Random sampling is steered toward plausible matmul tiles (at least 64 threads, a multiple
of 32, at least 16 accumulators per thread); the space itself is the tuner's.
Everything stops at the time budget (default 540 s, leaving room for the tests).
"""
from __future__ import annotations

import argparse
import math
import multiprocessing
import os
import random
import statistics
import subprocess
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import te  # noqa: E402
import schedule  # noqa: E402
from backends import cuda, nvrtc  # noqa: E402
from schedule.space import ConfigSpace  # noqa: E402
from schedule.targets import parse_target  # noqa: E402
from tuning_db.records import Status  # noqa: E402


def run_tests(timeout: float) -> bool:
    print("== GPU tests: pytest -m gpu tests/gpu", flush=True)
    cmd = [sys.executable, "-m", "pytest", "-q", "-m", "gpu", "tests/gpu", "-p", "no:cacheprovider"]
    try:
        proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        print(f"   timed out after {timeout:.0f} s")
        return False
    tail = "\n".join(proc.stdout.strip().splitlines()[-15:])
    print(tail)
    return proc.returncode == 0


def plausible(space, config) -> bool:
    """A prior for big matmuls: warp-multiple thread counts and real register tiles."""
    tiles = [t for stage in space.decisions(config) for t in getattr(stage, "tiles", ())]
    threads = math.prod(t[1] for t in tiles)
    local = math.prod(t[0] * t[2] * t[3] for t in tiles)
    return threads >= 64 and threads % 32 == 0 and local >= 16


def propose(space, rng, best: list, seen: set, count: int):
    out = []
    tries = 0
    while len(out) < count and tries < count * 200:
        tries += 1
        if best and rng.random() < 0.5:
            config = space.mutate(rng.choice(best[:8])[1], rng)
            if space.check(config) is not None:
                continue
        else:
            config = space.sample(rng)
        if config.hash in seen or not plausible(space, config):
            continue
        seen.add(config.hash)
        out.append(config)
    return out


def verify(c, ref, rtol: float) -> bool:
    import cupy

    atol = rtol * max(1.0, float(cupy.abs(ref).mean()))
    return bool(cupy.all(cupy.abs(c - ref) <= atol + rtol * cupy.abs(ref)))


def time_once(fn) -> float:
    """Seconds of one call, between two CUDA events (warm: the module is loaded already)."""
    import cupy

    start, end = cupy.cuda.Event(), cupy.cuda.Event()
    start.record()
    fn()
    end.record()
    end.synchronize()
    return cupy.cuda.get_elapsed_time(start, end) / 1e3


def dry_run(args, trials: int, start: float, deadline: float) -> int:
    """The search's CPU half without a device: how many candidates compile, and how fast."""
    n = args.size
    space = ConfigSpace.from_workload(te.create_workload("matmul", M=n, N=n, K=n), args.target)
    rng = random.Random(args.seed)
    configs = propose(space, rng, [], set(), trials)
    stats: dict = {}
    workers = max(1, min(32, os.cpu_count() or 1))
    lower_s = 0.0
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        jobs = []
        for config in configs:
            t0 = time.perf_counter()
            s, targs = space.apply(config)
            program = cuda.lower_program(schedule.lower(s, targs))
            source = cuda.generate_source(program)
            lower_s += time.perf_counter() - t0
            jobs.append((program, pool.submit(nvrtc.compile_ptx, source, args.target.facts.arch, cuda.NVRTC_OPTIONS)))
        for program, future in jobs:
            try:
                result = future.result(timeout=max(1.0, deadline - time.perf_counter()))
                status = Status.INVALID if cuda.check_resources(program, space.limits, result) else Status.OK
            except nvrtc.NVRTCError as exc:
                status = Status.INVALID if "too much" in exc.log else Status.COMPILE_ERROR
            stats[status.value] = stats.get(status.value, 0) + 1
    print(f"dry run: {len(configs)} candidates of {n}^3 matmul, lowering {lower_s:.1f} s, "
          f"total {time.perf_counter() - start:.1f} s with {workers} NVRTC workers: {stats}")
    return 0 if stats.get("ok") else 1


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="40 trials (a couple of minutes)")
    ap.add_argument("--trials", type=int, default=None, help="candidates to measure (default 300, quick 40)")
    ap.add_argument("--size", type=int, default=4096, help="M = N = K")
    ap.add_argument("--budget", type=float, default=540.0, help="seconds for the whole run")
    ap.add_argument("--skip-tests", action="store_true")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--dry-run", action="store_true",
                    help="no GPU needed: propose, lower and NVRTC-compile the candidates, time nothing")
    ap.add_argument("--target", type=parse_target, default="cuda",
                    help="cuda or cuda:<preset> (sm_80, a100, sm_90, h100, h200, ...); default: this GPU")
    args = ap.parse_args()
    if not args.target.is_gpu:
        ap.error(f"--target {args.target}: this benchmark measures GPU kernels; name a GPU target")
    trials = args.trials or (40 if args.quick else 300)
    start = time.perf_counter()
    deadline = start + args.budget

    if args.dry_run:
        return dry_run(args, trials, start, deadline)
    if not cuda.gpu_available():
        print("no CUDA GPU visible (needs CuPy and an NVIDIA driver); nothing to benchmark "
              "(--dry-run checks the pipeline without one)")
        return 2
    import cupy
    from autotune.verify import tolerance
    from backends.cuda_timing import do_bench

    props = cupy.cuda.runtime.getDeviceProperties(0)
    name = props["name"].decode() if isinstance(props["name"], bytes) else props["name"]
    arch = args.target.facts.arch
    print(f"device: {name} ({arch}), L2 {props['l2CacheSize'] / 2**20:.0f} MiB, NVRTC {nvrtc.version()}")

    tests_ok = True
    if not args.skip_tests:
        tests_ok = run_tests(timeout=min(240.0, args.budget / 3))

    n = args.size
    flops = 2 * n * n * n
    wl = te.create_workload("matmul", M=n, N=n, K=n)
    space = ConfigSpace.from_workload(wl, args.target)
    a_h, b_h = wl.random_inputs(args.seed)
    a, b = cupy.asarray(a_h), cupy.asarray(b_h)
    ref = cupy.matmul(a, b)
    cublas = statistics.median(do_bench(lambda: cupy.matmul(a, b), warmup_ms=25, rep_ms=100))
    cublas_gflops = flops / cublas / 1e9
    print(f"cuBLAS (cupy.matmul): {cublas * 1e3:.3f} ms, {cublas_gflops:.0f} GFLOP/s", flush=True)
    rtol = tolerance("float32", n)[0]

    rng = random.Random(args.seed)
    seen: set = set()
    best: list = []  # (seconds, config), sorted
    stats = {s.value: 0 for s in Status if s is not Status.TIMEOUT}
    workers = max(1, min(32, os.cpu_count() or 1))
    batch = max(8, 2 * workers)
    c = cupy.empty((n, n), dtype="float32")
    measured = 0
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        while measured < trials and time.perf_counter() < deadline - 20:
            configs = propose(space, rng, best, seen, min(batch, trials - measured))
            if not configs:
                break
            jobs = []
            for config in configs:
                s, targs = space.apply(config)
                program = cuda.lower_program(schedule.lower(s, targs))
                reason = cuda.check_resources(program, space.limits)
                if reason is not None:
                    stats[Status.INVALID.value] += 1
                    continue
                source = cuda.generate_source(program)
                jobs.append((config, program, pool.submit(nvrtc.compile_ptx, source, arch, cuda.NVRTC_OPTIONS)))
            for config, program, future in jobs:
                measured += 1
                try:
                    result = future.result()
                except nvrtc.NVRTCError as exc:
                    stats[(Status.INVALID if "too much" in exc.log else Status.COMPILE_ERROR).value] += 1
                    continue
                if cuda.check_resources(program, space.limits, result) is not None:
                    stats[Status.INVALID.value] += 1
                    continue
                if time.perf_counter() > deadline - 10:
                    break
                try:
                    module = cuda.build(program, cubin=result.cubin)
                    c.fill(float("nan"))
                    module(a, b, c)
                    cupy.cuda.Device().synchronize()
                except Exception as exc:  # a launch failure costs this trial only
                    stats[Status.RUNTIME_ERROR.value] += 1
                    print(f"   runtime error: {type(exc).__name__}: {str(exc)[:200]}")
                    continue
                if not verify(c, ref, rtol):
                    stats[Status.WRONG_ANSWER.value] += 1
                    print(f"   WRONG ANSWER: {config}")
                    continue
                first = time_once(lambda: module.launch((a, b, c)))
                if best and first > 4 * best[0][0]:
                    cost = first  # hopeless: not worth the full timing
                else:
                    cost = statistics.median(do_bench(lambda: module.launch((a, b, c)), warmup_ms=10, rep_ms=40))
                stats[Status.OK.value] += 1
                best.append((cost, config))
                best.sort(key=lambda x: x[0])
            if best:
                top = best[0][0]
                print(f"   {measured:4d} trials, {time.perf_counter() - start:5.0f} s: best {flops / top / 1e9:7.0f} "
                      f"GFLOP/s ({flops / top / 1e9 / cublas_gflops:.2f}x cuBLAS)", flush=True)

    print(f"== results ({measured} trials in {time.perf_counter() - start:.0f} s): {stats}")
    print(f"cuBLAS:   {cublas_gflops:8.0f} GFLOP/s")
    if best:
        cost, config = best[0]
        ours = flops / cost / 1e9
        print(f"best:     {ours:8.0f} GFLOP/s = {ours / cublas_gflops:.2f}x cuBLAS ({cost * 1e3:.3f} ms)")
        print(space.describe_config(config))
        print(config.to_json())
    else:
        print("best:     no candidate ran")
    print(f"gpu tests: {'passed' if tests_ok else 'FAILED (see above)' if not args.skip_tests else 'skipped'}")
    return 0 if tests_ok and best else 1


if __name__ == "__main__":
    sys.exit(main())
