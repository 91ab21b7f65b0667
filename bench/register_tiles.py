"""Four rules of the CPU backend that keep register tiles in registers, each against the code
without it, in one run.

    python bench/register_tiles.py                   # 6 starting points and 6 random configs per op
    python bench/register_tiles.py --points 10 --only matmul conv2d
    python bench/register_tiles.py --rule pointer --only matmul-few-rows
    python bench/register_tiles.py --rule one-vector --changed-only --points 8
    python bench/register_tiles.py --rule vector-variables --changed-only --points 8

``--rule ivdep`` (the default): the backend prints a vectorized loop as ``#pragma omp
simd``, except the constant-extent vector loops of a promoted register tile, which it prints
as ``#pragma GCC ivdep`` (``backends/cpu.py``, ``_touches_register_tile``); the other way
is ``omp simd`` on every vector loop. ``--rule pointer``: every stack buffer but a register
tile is declared as storage and used through a restrict pointer (``_reached_through_pointer``);
the other way declares them all as plain arrays. ``--rule one-vector``: a register tile's
vector loop exactly one vector long gets ``#pragma GCC unroll 1`` and the unrolled loops
around it in the tile no unroll pragma (``CPUDialect._one_vector_of_tile``); the other way
prints them as for longer vector loops. ``--rule vector-variables``: a register tile shaped
for it is printed as vector variables (``backends/vector_tile.py``); the other way prints
it as an array, under the three rules above. ``--changed-only`` times only configs whose source
the rule changes (the others time alike both ways).

This builds each config both ways (the other way by making the rule answer "no") and times
the two kernels alternately, 5 rounds of 5 calls each, the median of each round, then the
median over rounds; every kernel is checked against the reference first. It prints per op
the GFLOP/s of each config both ways, and the fastest and the median of each.
"""
from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path
from unittest import mock

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO)]

OPS = {
    "matmul": dict(M=1024, N=1024, K=1024),
    "matmul-few-rows": dict(M=128, N=4096, K=4096),
    "dense": dict(M=128, N=768, K=768),
    "conv2d": dict(N=1, C=64, H=56, W=56, K=64, R=3, S=3, padding=1),
    "attention": dict(heads=4, seq=512, dim=64),
    "layernorm": dict(M=1024, N=1024),
}


#: The workload of an entry of OPS named otherwise.
WORKLOAD = {"matmul-few-rows": "matmul"}

#: The backend function (or ``Class.method``) behind each rule (answering "no" turns the rule off).
RULES = {"ivdep": "_touches_register_tile", "pointer": "_reached_through_pointer",
         "one-vector": "CPUDialect._one_vector_of_tile", "vector-variables": "CPUDialect.register_tile"}
#: What a rule's function answers to turn it off, where that is not False.
ANSWER_OFF = {"vector-variables": None}


def build_both(task, config, rule: str = "ivdep"):
    """(kernel with the rule, kernel without it)."""
    import backends
    from backends import cpu

    s, args = task.space.apply(config)
    ruled = backends.build(s, args, target="cpu")
    owner, _, name = RULES[rule].rpartition(".")
    answer = ANSWER_OFF.get(rule, False)
    with mock.patch.object(getattr(cpu, owner) if owner else cpu, name, lambda *_: answer):
        s, args = task.space.apply(config)
        plain = backends.build(s, args, target="cpu")
    return ruled, plain


def changed_configs(task, rng, count: int, rule: str) -> list:
    """(config, (kernel with the rule, kernel without)) for configs whose source the rule
    changes: the starting points it changes, then random configs, ``count`` in all."""
    found = []
    candidates = task.space.starting_points(rng)
    draws = 0
    while len(found) < count and (candidates or draws < 50 * count):
        if candidates:
            config = candidates.pop(0)
        else:
            config, draws = task.space.sample(rng), draws + 1
        kernels = build_both(task, config, rule)
        if kernels[0].source != kernels[1].source:
            found.append((config, kernels))
    return found


def time_pair(kernels, inputs, outputs, rounds: int = 5, calls: int = 5) -> list[float]:
    """Median seconds of each kernel: per round, each timed ``calls`` times in turn."""
    per = [[] for _ in kernels]
    for _ in range(rounds):
        for n, kernel in enumerate(kernels):
            ts = []
            for _ in range(calls):
                t = time.perf_counter()
                kernel(*inputs, *outputs)
                ts.append(time.perf_counter() - t)
            per[n].append(statistics.median(ts))
    return [statistics.median(p) for p in per]


def main() -> None:
    import numpy as np

    import autotune
    from autotune.verify import reference_checks

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", nargs="+", choices=sorted(OPS), default=list(OPS))
    parser.add_argument("--points", type=int, default=6, help="starting points and random configs per op, each")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--rule", choices=sorted(RULES), default="ivdep")
    parser.add_argument("--changed-only", action="store_true",
                        help="only configs whose source the rule changes: the starting points that it "
                             "changes, then random configs until --points of them (at most 50 draws per point)")
    args = parser.parse_args()
    without = {"ivdep": "omp simd everywhere", "pointer": "plain arrays",
               "one-vector": "gcc unrolls one-vector loops", "vector-variables": "tile as an array"}[args.rule]
    print(f"| op | configs | {args.rule} rule: fastest / median GFLOP/s | {without}: fastest / median "
          f"| per config (rule/{without}) |")
    print("| --- | --- | --- | --- | --- |")
    for op in args.only:
        task = autotune.Task(WORKLOAD.get(op, op), OPS[op], target="cpu")
        wl = task.workload
        rng = random.Random(args.seed)
        if args.changed_only:
            pairs = changed_configs(task, rng, args.points, args.rule)
        else:
            configs = task.space.starting_points(rng)[:args.points] + [task.space.sample(rng) for _ in range(args.points)]
            pairs = [(config, build_both(task, config, args.rule)) for config in configs]
        if not pairs:
            print(f"| {op} | 0 | - | - | - |", flush=True)
            continue
        inputs = wl.random_inputs(args.seed)
        refs = wl.reference(*inputs)
        checks = reference_checks(wl.outputs, refs)
        outputs = [np.empty(r.shape, r.dtype) for r in refs]
        ruled, plain = [], []
        for config, kernels in pairs:
            for kernel in kernels:
                kernel(*inputs, *outputs)
                problems = [c(o) for c, o in zip(checks, outputs) if c(o) is not None]
                assert not problems, f"{op} {config}: {problems}"
            a, b = time_pair(kernels, inputs, outputs)
            ruled.append(task.flops / a / 1e9)
            plain.append(task.flops / b / 1e9)
        each = " ".join(f"{a:.0f}/{b:.0f}" for a, b in zip(ruled, plain))
        print(f"| {op} | {len(pairs)} | {max(ruled):.1f} / {statistics.median(ruled):.1f} "
              f"| {max(plain):.1f} / {statistics.median(plain):.1f} | {each} |", flush=True)


if __name__ == "__main__":
    main()
