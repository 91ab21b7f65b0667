"""Milliseconds to lower one config and extract its features: the unit cost of the model-guided search.

    python bench/lowering_speed.py                       # every workload below
    python bench/lowering_speed.py --only matmul conv2d --configs 300 --repeats 3

The xgb tuner scores several hundred candidates per batch and each new candidate is
lowered once (``FeatureCache``), so this figure times the search. For each workload it
prints the median over ``--repeats`` passes of lowering ``--configs`` random configs (the
space's starting points first), then of extracting their features, in one process.
"""
from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from autotune.features import extract  # noqa: E402
from autotune.task import Task  # noqa: E402

#: The workloads timed, with the shapes of the benchmarks elsewhere in bench/.
WORKLOADS = {
    "matmul": ("matmul", dict(M=1024, N=1024, K=1024)),
    "matmul-odd": ("matmul", dict(M=127, N=1023, K=511)),
    "dense": ("dense", dict(M=128, N=768, K=768, bias=True, relu=True)),
    "conv2d": ("conv2d", dict(N=1, C=64, H=56, W=56, K=64, R=3, S=3, padding=1)),
    "conv2d_winograd": ("conv2d_winograd", dict(N=1, C=64, H=56, W=56, K=64)),
    "depthwise_conv2d": ("depthwise_conv2d", dict(N=1, C=32, H=28, W=28, R=3, S=3, padding=1)),
    "attention": ("attention", dict(heads=4, seq=512, dim=64)),
    "qkv": ("qkv", dict(M=32, D=512)),
    "layernorm": ("layernorm", dict(M=1024, N=1024)),
    "softmax": ("softmax", dict(shape=(1024, 1024))),
}


def time_workload(name: str, params: dict, count: int, repeats: int, seed: int) -> tuple[int, float, float]:
    """(configs lowered, lower ms, extract ms) per config, medians over ``repeats`` passes;
    configs that do not lower are left out of both."""
    task = Task(name, params)
    rng = random.Random(seed)
    configs = task.space.starting_points(rng)[:count]
    configs += [task.space.sample(rng) for _ in range(count - len(configs))]
    lowerable = []
    for c in configs:
        try:
            task.lower(c)
            lowerable.append(c)
        except Exception:  # noqa: BLE001 - the search scores such configs as zeros
            pass
    lower_ms, extract_ms = [], []
    for _ in range(repeats):
        t0 = time.perf_counter()
        funcs = [task.lower(c) for c in lowerable]
        t1 = time.perf_counter()
        for f in funcs:
            extract(f)
        t2 = time.perf_counter()
        lower_ms.append((t1 - t0) / len(lowerable) * 1e3)
        extract_ms.append((t2 - t1) / len(lowerable) * 1e3)
    return len(lowerable), statistics.median(lower_ms), statistics.median(extract_ms)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="+", choices=sorted(WORKLOADS), default=list(WORKLOADS))
    parser.add_argument("--configs", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    print(f"median of {args.repeats} passes over up to {args.configs} configs each, one process")
    print("| workload | configs | lower ms / config | extract features ms / config |")
    print("| --- | --- | --- | --- |")
    for key in args.only:
        name, params = WORKLOADS[key]
        count, lower, extract_ = time_workload(name, params, args.configs, args.repeats, args.seed)
        print(f"| {key} | {count} | {lower:.2f} | {extract_:.2f} |", flush=True)


if __name__ == "__main__":
    main()
