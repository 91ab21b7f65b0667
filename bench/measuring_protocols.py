"""What each measuring protocol of the tuning loop costs, and what it gets right.

    python bench/measuring_protocols.py --db run.db            # a run stored in a tuning database
    python bench/measuring_protocols.py --db run.db --top 48 --spread 48 --passes 2

Measuring is the largest part of a tuning run's wall time (``autotune.runner``), and late
in a run most candidates are within a few per cent of the best: with three rounds, they
all get every round. This bench asks what cheaper protocols lose. It takes configs of a run stored in a
database (the ``--top`` fastest records and ``--spread`` others evenly spaced over the
rest by rank), builds them once, and then:

- times them all twice with the final timing's protocol (``FinalTimingOptions``:
  interleaved rounds of cache-flushed repeats, the median round kept): the *reference*;
- measures them through ``LocalRunner.run`` with each protocol in ``PROTOCOLS``,
  ``--passes`` times, each pass in a new random order, as one batch whose best known cost
  is the reference's best (a tuning run passes the best measured before the batch).

Per protocol it prints the measuring seconds per config; the share of pairs ordered as
the reference (the mean of its two timings) orders them, among all pairs and among those
it puts at least 3 % apart (closer pairs are within its own noise); the same share between
two passes of the protocol; and what it would pick: the speed of its fastest config and
the mean speed of its five fastest (the final timing's shortlist), both as the reference's
second timing measures them. That timing takes no part in any pick, so the figures carry
no winner's curse; the first row is the pick of the reference's first timing, judged the
same way. Each figure is the mean over passes.
"""
from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO)]

import numpy as np  # noqa: E402

from autotune.cost_model import pairwise_accuracy  # noqa: E402
from autotune.runner import TimingOptions  # noqa: E402

#: The protocols compared: the default, the earlier default of three rounds, and one
#: knob changed at a time.
PROTOCOLS = {
    "one round (default)": TimingOptions(),
    "three rounds": TimingOptions(rounds=3),
    "three rounds, recheck within 1.15x": TimingOptions(rounds=3, recheck_within=1.15),
    "two rounds": TimingOptions(rounds=2),
    "one round of two repeats": TimingOptions(min_repeats=2),
}

#: Pairs the reference puts closer than this (relative) are left out of the "apart" share.
APART = 0.03


def pick_records(db_path: str, top: int, spread: int):
    """(task, configs) of the run in ``db_path`` with the most ok records (the last of
    those): its ``top`` fastest ok records and
    ``spread`` others evenly spaced by rank over the rest."""
    from autotune.task import Task
    from schedule.config import Config, ConfigError
    from tuning_db import Database

    with Database(db_path, create=False) as db:
        runs = [r for wl in db.list_workloads() for r in db.list_runs(wl.key)]
        if not runs:
            raise SystemExit(f"{db_path}: no run stored")
        histories = {r.id: [rec for rec in db.history(r.id) if rec.status == "ok" and rec.median_s] for r in runs}
        run = max(runs, key=lambda r: (len(histories[r.id]), r.id))
        records = histories[run.id]
    task = Task(run.workload_name, dict(records[0].params), run.target.kind)
    distinct: dict[Config, None] = {}  # fastest first
    for rec in sorted(records, key=lambda r: r.median_s):
        try:
            config = Config.from_json(rec.config)
        except ConfigError:
            continue
        if task.space.check(config) is None:
            distinct.setdefault(config)
    configs = list(distinct)
    rest = configs[top:]
    step = max(1, len(rest) // max(1, spread))
    return task, configs[:top] + rest[::step][:spread]


def reference_costs(task, builds, runner, rounds: int) -> list[float]:
    """The median round of each build under the final timing's protocol (no anchor)."""
    from autotune.final_timing import FinalTimingOptions

    times = runner.time_final(task, builds, FinalTimingOptions(rounds=rounds, anchor=False))
    if times.errors:
        raise SystemExit(f"the reference timing failed: {next(iter(times.errors.values()))}")
    return [statistics.median(rounds_) for rounds_ in times.candidates]


def agreement(costs: list[float], reference: list[float], apart: float = 0.0) -> float:
    """Share of pairs ``costs`` order as ``reference`` does, among the pairs the reference
    puts more than ``apart`` (relative) apart."""
    return pairwise_accuracy(-np.asarray(costs), reference, apart=apart)


def measure_pass(task, builds, options: TimingOptions, best_cost: float, rng: random.Random,
                 seed: int) -> tuple[list[float], float]:
    """One pass of ``options`` over ``builds`` in a random order: (cost per build, in the
    builds' order; measuring seconds per build)."""
    from autotune.runner import LocalRunner

    order = list(range(len(builds)))
    rng.shuffle(order)
    with LocalRunner(options=options, seed=seed) as runner:
        runner.run(task, builds[:1], best_cost=best_cost)  # start the process outside the timing
        start = time.perf_counter()
        results = runner.run(task, [builds[i] for i in order], best_cost=best_cost)
        seconds = time.perf_counter() - start
    costs = [0.0] * len(builds)
    for i, result in zip(order, results):
        costs[i] = result.cost if result.ok else float("inf")
    return costs, seconds / len(builds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", required=True,
                        help="a tuning database holding a run (the run with the most records is used)")
    parser.add_argument("--top", type=int, default=48, help="fastest records taken")
    parser.add_argument("--spread", type=int, default=48, help="other records taken, evenly by rank")
    parser.add_argument("--passes", type=int, default=2, help="passes of each protocol")
    parser.add_argument("--reference-rounds", type=int, default=5)
    parser.add_argument("--only", nargs="+", choices=sorted(PROTOCOLS), help="protocols to run")
    args = parser.parse_args()

    from autotune.builder import LocalBuilder
    from autotune.measure import MeasureInput, Status
    from autotune.runner import LocalRunner

    task, configs = pick_records(args.db, args.top, args.spread)
    with tempfile.TemporaryDirectory() as cache:
        os.environ["AUTOTUNE_CACHE_DIR"] = cache
        builds = LocalBuilder().build([MeasureInput(task, c) for c in configs])
        kept = [b for b in builds if b.status == Status.OK]
        print(f"{task.key}: {len(kept)} of {len(configs)} configs built; {args.passes} passes per protocol",
              flush=True)
        with LocalRunner() as runner:
            t0 = time.perf_counter()
            first = reference_costs(task, kept, runner, args.reference_rounds)
            reference_s = (time.perf_counter() - t0) / len(kept)
            second = reference_costs(task, kept, runner, args.reference_rounds)
        reference = [(a + b) / 2 for a, b in zip(first, second)]
        best = min(reference)
        print(f"reference: fastest {task.flops / best / 1e9:.1f} GFLOP/s; the slowest {max(reference) / best:.1f}x "
              f"that time; {sum(r <= 1.1 * best for r in reference)} configs within 1.1x", flush=True)

        def judged(costs: list[float]) -> tuple[float, float]:
            """GFLOP/s, by the reference's second timing, of the fastest config by ``costs`` and
            the mean of its five fastest (the second timing is independent of any pick)."""
            ranked = sorted(range(len(costs)), key=costs.__getitem__)
            return (task.flops / second[ranked[0]] / 1e9,
                    statistics.mean(task.flops / second[i] / 1e9 for i in ranked[:5]))

        print("| protocol | s per config | pairs as the reference | pairs >= 3 % apart | pairs as its other pass "
              "| its fastest, GFLOP/s | its 5 fastest, mean GFLOP/s |")
        print("| --- | --- | --- | --- | --- | --- | --- |")
        pick, five = judged(first)
        print(f"| the reference's first timing | {reference_s:.3f} | - | - | {agreement(first, second):.3f} "
              f"({agreement(first, second, APART):.3f} >= 3 % apart) | {pick:.1f} | {five:.1f} |", flush=True)
        rng = random.Random(0)
        for name in args.only or list(PROTOCOLS):
            rows, passes = [], []
            for p in range(args.passes):
                costs, seconds = measure_pass(task, kept, PROTOCOLS[name], best, rng, seed=p)
                passes.append(costs)
                rows.append((seconds, agreement(costs, reference), agreement(costs, reference, APART),
                             *judged(costs)))
            mean = [statistics.mean(col) for col in zip(*rows)]
            consistent = statistics.mean(agreement(a, b) for a, b in zip(passes, passes[1:])) if len(passes) > 1 \
                else float("nan")
            print(f"| {name} | {mean[0]:.3f} | {mean[1]:.3f} | {mean[2]:.3f} | {consistent:.3f} | {mean[3]:.1f} "
                  f"| {mean[4]:.1f} |", flush=True)

if __name__ == "__main__":
    main()
