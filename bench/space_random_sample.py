"""Random configs of the schedule space for float32 matmul, against NumPy in the same run.

    python bench/space_random_sample.py [--size 1024] [--samples 200] [--seed 0]

Samples N valid configs of the space derived from the matmul expression, builds and
measures them with the real builder and runner, and prints the best GFLOP/s, the
hand-written schedule's (bench/matmul_handwritten.py) and NumPy's, with ratios.
"""
from __future__ import annotations

import argparse
import os
import random
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import anchor  # noqa: E402

anchor.reexec_without_blas_overrides()

import numpy as np  # noqa: E402

from autotune.builder import LocalBuilder  # noqa: E402
from autotune.measure import MeasureInput  # noqa: E402
from autotune.runner import LocalRunner  # noqa: E402
from autotune.task import Task  # noqa: E402
import backends  # noqa: E402


def handwritten_gflops(n: int) -> float:
    from matmul_handwritten import handwritten_schedule

    s, tensors, wl = handwritten_schedule(n, n, n)
    f = backends.build(s, tensors)
    a, b = wl.random_inputs(0)
    c = np.zeros((n, n), np.float32)
    ptrs = [x.ctypes.data for x in (a, b, c)]
    t = anchor.median_seconds(lambda: f.call_unchecked(ptrs))
    return wl.flops / t / 1e9


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--samples", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    n = args.size
    task = Task("matmul", dict(M=n, N=n, K=n))
    rng = random.Random(args.seed)
    configs, seen = [], set()
    while len(configs) < args.samples:
        c = task.space.sample(rng)
        if c.hash not in seen:
            seen.add(c.hash)
            configs.append(c)
    t0 = time.perf_counter()
    results = []
    with LocalRunner(timeout=20) as runner:
        for start in range(0, len(configs), 32):
            batch = configs[start:start + 32]
            builds = LocalBuilder().build([MeasureInput(task, c) for c in batch])
            best = min((r.cost for r in results), default=None)
            results += runner.run(task, builds, best_cost=best if best and best != float("inf") else None)
    wall = time.perf_counter() - t0
    ok = [(r.cost, c) for r, c in zip(results, configs) if r.ok]
    statuses = {}
    for r in results:
        statuses[r.status] = statuses.get(r.status, 0) + 1
    best_cost, best_config = min(ok, key=lambda x: x[0])
    ours = task.flops / best_cost / 1e9
    hand = handwritten_gflops(n)
    ref = anchor.numpy_matmul_gflops(n, n, n)
    print(f"BLAS: {anchor.blas_description()}")
    print(f"matmul {n}^3 float32, {len(configs)} random configs in {wall:.0f} s, statuses {statuses}")
    print(f"best sampled config: {ours:8.1f} GFLOP/s   {best_config}")
    print(f"hand-written:        {hand:8.1f} GFLOP/s")
    print(f"numpy:               {ref:8.1f} GFLOP/s")
    print(f"best sampled / numpy: {ours / ref:.2f}x   hand-written / numpy: {hand / ref:.2f}x")


if __name__ == "__main__":
    main()
