"""Seconds to build one batch of candidates, as the tuning loop does: lower, generate, compile.

    python bench/batch_build.py                       # matmul 64 configs, conv2d 24, seed 7
    python bench/batch_build.py --only conv2d --batch 32

The space's starting points, then random configs, are built together by ``LocalBuilder``
(one compile per core, each source compiling as soon as it is generated) into an empty
compile cache of their own, so nothing is reused from earlier runs. Prints the batch's wall
time, the time spent lowering and generating in the tuning process (summed over the batch,
``BuildResult.build_s`` holds both parts) and how many built.
"""
from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO)]

WORKLOADS = {
    "matmul": ("matmul", dict(M=1024, N=1024, K=1024), 64),
    "conv2d": ("conv2d", dict(N=1, C=64, H=56, W=56, K=64, R=3, S=3, padding=1), 24),
}


def build_batch(op: str, params: dict, count: int, seed: int) -> tuple[float, float, int]:
    """(wall seconds, seconds lowering and generating, configs built ok) for one batch."""
    import autotune
    from autotune.builder import LocalBuilder
    from autotune.measure import MeasureInput, Status

    task = autotune.Task(op, params, target="cpu")
    rng = random.Random(seed)
    configs = task.space.starting_points(rng)[:min(8, count)]
    configs += [task.space.sample(rng) for _ in range(count - len(configs))]
    builder = LocalBuilder()
    inputs = [MeasureInput(task, c) for c in configs]
    codegen = 0.0
    for inp in inputs:  # the code generation alone, timed apart (the build below repeats it)
        t0 = time.perf_counter()
        try:
            builder.source(inp)
        except Exception:  # noqa: BLE001 - the build reports it
            pass
        codegen += time.perf_counter() - t0
    start = time.perf_counter()
    results = builder.build(inputs)
    wall = time.perf_counter() - start
    return wall, codegen, sum(r.status == Status.OK for r in results)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="+", choices=sorted(WORKLOADS), default=list(WORKLOADS))
    parser.add_argument("--batch", type=int, default=None, help="configs per batch [default: per workload]")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    print(f"{os.cpu_count()} cores; each batch into an empty compile cache")
    print("| workload | configs | built ok | batch wall s | lowering + generating s (of it) |")
    print("| --- | --- | --- | --- | --- |")
    for key in args.only:
        op, params, count = WORKLOADS[key]
        count = args.batch or count
        with tempfile.TemporaryDirectory() as cache:
            os.environ["AUTOTUNE_CACHE_DIR"] = cache
            wall, codegen, ok = build_batch(op, params, count, args.seed)
        print(f"| {key} | {count} | {ok} | {wall:.1f} | {codegen:.1f} |", flush=True)


if __name__ == "__main__":
    main()
