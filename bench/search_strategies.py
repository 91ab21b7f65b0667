"""Search strategies compared offline: replays over sampled recordings of four workloads.

    python bench/search_strategies.py [--record 3000] [--tuners xgb,ga,random] [--seeds 20]
                                      [--trials 1000] [--db bench/out/strategies.db] [--only matmul]

For each workload below: unless ``--db`` already holds ``--record`` records of it, measure
that many distinct random configs into it (``autotune.replaying.sample``: the long part,
hours for 3000 configs of four workloads), then replay every tuner with every seed against
everything recorded for it, searching the recorded configs only (``autotune.replay(...,
restrict=True)``: a random sample is sparse, so other proposals would nearly all miss),
and write
  bench/out/strategies-<op>.json   the report: summary, curves, every run
  bench/out/strategies-<op>.png    best-so-far against trials and simulated seconds
and print each workload's table: trials and simulated seconds to 0.9x / 0.95x / 1.0x of
the recorded optimum. ``--record 0`` replays what the database holds without measuring.
"""
from __future__ import annotations

import argparse
import json
import os
import sys

from autotune.replaying import Recording, replay, sample
from autotune.task import Task
from tuning_db import Database

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "out")

#: The recorded workloads: a compute-bound product, a convolution, a fused epilogue, a reduction.
WORKLOADS = {
    "matmul": dict(M=512, N=512, K=512),
    "conv2d": dict(N=1, C=64, H=28, W=28, K=64, R=3, S=3, padding=1),
    "dense": dict(M=256, N=512, K=512, bias=True, relu=True),
    "softmax": dict(shape=[256, 1024]),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--record", type=int, default=3000, help="records wanted per workload (0: measure nothing)")
    parser.add_argument("--tuners", default="xgb,ga,random")
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--trials", type=int, default=1000)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--db", default=os.path.join(OUT, "strategies.db"))
    parser.add_argument("--only", default=None, help="one workload of " + ", ".join(WORKLOADS))
    args = parser.parse_args()
    os.makedirs(OUT, exist_ok=True)
    chosen = {args.only: WORKLOADS[args.only]} if args.only else WORKLOADS
    with Database(args.db) as db:
        for op, params in chosen.items():
            task = Task(op, params, "cpu")
            have = len(db.records_for_task(task.key, "cpu"))
            if have < args.record:
                print(f"{op}: measuring {args.record - have} random configs (have {have})", flush=True)
                sample(task, args.record, db, resume=True, batch_size=args.batch_size)  # the rest, no repeats
            recording = Recording.from_db(db, task.key, "cpu", task=task)
            report = replay(recording, args.tuners.split(","), args.seeds, trials=args.trials,
                            batch_size=args.batch_size, restrict=True, on_run=_progress)
            stem = os.path.join(OUT, f"strategies-{op}")
            with open(stem + ".json", "w") as f:
                json.dump(report.to_json(), f)
            report.plot(stem + ".png")
            print(report.header())
            print("\n".join(report.table()))
            print(f"wrote {stem}.json and {stem}.png\n", flush=True)


def _progress(run) -> None:
    print(f"  {run.tuner} seed {run.seed}: {len(run.costs)} trials, {run.misses} misses, "
          f"stopped by {run.stopped}, {run.wall_s:.1f} s", file=sys.stderr, flush=True)


if __name__ == "__main__":
    main()
