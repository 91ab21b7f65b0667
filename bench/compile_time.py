"""What one candidate costs to compile: gcc's time over random configs of a few spaces.

    python bench/compile_time.py                       # 40 configs per workload, seed 2
    python bench/compile_time.py --configs 100 --seed 0

Each workload's space is sampled (the same configs for a given seed and space), each
config lowered and compiled once into an empty compile cache (a directory of its own, so
nothing is reused from earlier runs), and the build's wall time kept. The table prints
the median, 90th percentile, maximum and total per workload, and the configs over
``--slow`` seconds. A compile past the builder's timeout counts as that timeout.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO)]

WORKLOADS = {
    "matmul 1024^3": ("matmul", dict(M=1024, N=1024, K=1024)),
    "qkv 1x256": ("qkv", dict(M=1, D=256)),
    "qkv 32x512": ("qkv", dict(M=32, D=512)),
    "dense+bias+relu 128x768x768": ("dense", dict(M=128, N=768, K=768, bias=True, relu=True)),
}
TIMEOUT_S = 60.0


def compile_times(op: str, params: dict, configs: int, seed: int, slow: float) -> tuple[list[float], list[str]]:
    """Seconds to build each of ``configs`` random configs of the workload's space, and a
    line for each one slower than ``slow``."""
    import autotune
    from backends import errors
    from backends.registry import backend_for

    task = autotune.Task(op, params, target="cpu")
    backend = backend_for(task.target)
    rng = random.Random(seed)
    times, slow_lines = [], []
    for _ in range(configs):
        config = task.space.sample(rng)
        source = backend.generate_source(task.lower(config))
        start = time.perf_counter()
        try:
            backend.compile_source(source, timeout=TIMEOUT_S)
        except errors.BuildTimeout:
            pass
        took = min(time.perf_counter() - start, TIMEOUT_S)
        times.append(took)
        if took > slow:
            slow_lines.append(f"{took:.1f} s: {task.space.describe_config(config).splitlines()[0]}")
    return times, slow_lines


def report(args) -> None:
    """Compile ``args.configs`` configs of each workload and print the table."""
    print(f"# compile time per candidate, {args.configs} random configs per workload, seed {args.seed}, "
          f"empty compile cache, timeout {TIMEOUT_S:.0f} s")
    print("| workload | median | p90 | max | total |")
    print("| --- | --- | --- | --- | --- |")
    notes = []
    for name in args.only:
        op, params = WORKLOADS[name]
        times, slow_lines = compile_times(op, params, args.configs, args.seed, args.slow)
        ordered = sorted(times)
        p90 = ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))]
        print(f"| {name} | {statistics.median(times):.2f} s | {p90:.2f} s | {ordered[-1]:.2f} s | "
              f"{sum(times):.1f} s |", flush=True)
        notes += [f"<!-- {name}: {line} -->" for line in slow_lines]
    print("\n".join(notes))
    print(json.dumps({"seed": args.seed, "configs": args.configs}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--configs", type=int, default=40)
    parser.add_argument("--seed", type=int, default=2)
    parser.add_argument("--slow", type=float, default=5.0, help="list configs slower than this (seconds)")
    parser.add_argument("--only", nargs="+", choices=list(WORKLOADS), default=list(WORKLOADS))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="autotune-compile-time-") as cache:
        os.environ["AUTOTUNE_CACHE_DIR"] = cache
        report(args)


if __name__ == "__main__":
    main()
