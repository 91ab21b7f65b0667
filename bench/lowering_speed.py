"""Milliseconds to lower one config and extract its features: the unit cost of the model-guided search.

    python bench/lowering_speed.py [--size 1024] [--configs 300] [--repeats 3]

The xgb tuner scores several hundred candidates per batch and each new candidate is
lowered once (``FeatureCache``), so this figure times the search. Prints the median over
``--repeats`` passes of lowering ``--configs`` random matmul configs, then of extracting
their features.
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--configs", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    n = args.size
    task = Task("matmul", dict(M=n, N=n, K=n))
    rng = random.Random(0)
    configs = [task.space.sample(rng) for _ in range(args.configs)]
    lower_ms, extract_ms = [], []
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        funcs = [task.lower(c) for c in configs]
        t1 = time.perf_counter()
        for f in funcs:
            extract(f)
        t2 = time.perf_counter()
        lower_ms.append((t1 - t0) / len(configs) * 1e3)
        extract_ms.append((t2 - t1) / len(configs) * 1e3)
    print(f"matmul {n}^3, {len(configs)} random configs, median of {args.repeats} passes: "
          f"lower {statistics.median(lower_ms):.2f} ms, extract features {statistics.median(extract_ms):.2f} ms "
          f"per config (one process)")


if __name__ == "__main__":
    main()
