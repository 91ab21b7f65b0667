"""Long reductions with few results: the ``rfactor`` algorithm against the DAG as written.

    python bench/rfactor.py                              # softmax of one row of 262144, 150 trials
    python bench/rfactor.py --shape 2 1048576 --trials 200

Runs ``autotune softmax --shape ...`` into a database of its own (the space holds both
algorithms, so one run measures both) and reads the ratio it prints against NumPy
composed. Then a fresh process rebuilds the run's best ``direct`` config and its best
``rfactor`` config, checks both against the reference, and times them alternately with
NumPy: five rounds, each timing all three with at least 15 cache-flushed repeats, the
arrays placed anew for every round after the first (the final timing's protocol). The
table gives each one's GFLOP/s and ratio to NumPy, and rfactor over direct.
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "bench")]

from anchor import blas_description, reexec_without_blas_overrides  # noqa: E402
from final_figures import fresh_process_env, time_alternately, tune  # noqa: E402


def best_configs(task, db_path: Path) -> dict:
    """algorithm -> (its fastest ok record's config, that record's seconds) in the database."""
    from schedule.alternatives import ALGORITHM, DIRECT
    from schedule.config import Config
    from tuning_db import Database

    best: dict = {}
    with Database(db_path, create=False) as db:
        for rec in db.records_for_task(task.key, "cpu"):
            if rec.status != "ok" or not rec.costs:
                continue
            config = Config.from_json(rec.config)
            name = config.values.get(ALGORITHM, DIRECT)
            if name not in best or min(rec.costs) < best[name][1]:
                best[name] = (config, min(rec.costs))
    return best


def retime(shape: list[int], db_path: Path, rounds: int = 5) -> dict:
    """In this (fresh) process: per algorithm, GFLOP/s and ratio to NumPy composed (medians
    over ``rounds`` rounds timed alternately, ``final_figures.time_alternately``)."""
    import autotune
    from autotune.dispatch import build_config

    task = autotune.Task("softmax", dict(shape=shape), target="cpu")
    configs = best_configs(task, db_path)
    names = sorted(configs)
    ours, theirs = time_alternately(task, [build_config(task, configs[n][0]) for n in names], rounds)
    numpy_s = statistics.median(theirs)
    return {name: {"gflops": task.flops / statistics.median(t) / 1e9, "ratio": numpy_s / statistics.median(t),
                   "search_gflops": task.flops / configs[name][1] / 1e9}
            for name, t in zip(names, ours)} | {"numpy_gflops": task.flops / numpy_s / 1e9}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shape", type=int, nargs="+", default=[1, 262144])
    parser.add_argument("--trials", type=int, default=150)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--retime", type=Path, default=None, help=argparse.SUPPRESS)  # the fresh process
    args = parser.parse_args()
    if args.retime is not None:
        print(json.dumps(retime(args.shape, args.retime)))
        return
    reexec_without_blas_overrides()
    print(blas_description())
    env = fresh_process_env()
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "rfactor.db"
        params = dict(shape=args.shape)
        cli_ratio, best, numpy_gflops, wall = tune("softmax", params, args.trials, args.seed, 5, db, env)
        proc = subprocess.run([sys.executable, __file__, "--shape", *map(str, args.shape), "--retime", str(db)],
                              capture_output=True, text=True, env=env)
        if proc.returncode != 0:
            raise SystemExit(f"re-timing failed:\n{proc.stdout}\n{proc.stderr}")
        got = json.loads(proc.stdout.strip().splitlines()[-1])
    shape = "x".join(map(str, args.shape))
    print(f"softmax {shape}, {args.trials} trials, seed {args.seed}: the CLI printed {best:.2f} GFLOP/s, "
          f"ratio {cli_ratio:.2f}x NumPy composed ({wall:.0f} s)")
    print("| algorithm | search's best reading (GFLOP/s) | re-timed GFLOP/s | re-timed ratio to NumPy composed |")
    print("| --- | --- | --- | --- |")
    for name in ("direct", "rfactor"):
        if name in got:
            g = got[name]
            print(f"| {name} | {g['search_gflops']:.2f} | {g['gflops']:.2f} | {g['ratio']:.2f}x |")
    print(f"| NumPy composed | | {got['numpy_gflops']:.2f} | |")
    if "direct" in got and "rfactor" in got:
        print(f"rfactor over direct, re-timed: {got['rfactor']['gflops'] / got['direct']['gflops']:.2f}x")


if __name__ == "__main__":
    main()
