"""One tuning run, each algorithm's best re-timed: what a space's algorithms are worth.

    python bench/algorithms.py attention -p heads=8 -p seq=1024 -p dim=64 --trials 300
    python bench/algorithms.py softmax -p shape=1,262144 --trials 150

Runs ``autotune <op> ...`` into a database of its own (an op whose space holds several
algorithms, ``direct`` and its alternatives, measures all of them in one run) and reads the
ratio it prints. Then a fresh process rebuilds the run's best config of each algorithm,
checks each against the reference, and times them alternately with NumPy composed: five
rounds, each timing all of them with at least 15 cache-flushed repeats, the arrays placed
anew for every round after the first (the final timing's protocol). The table gives each
algorithm's GFLOP/s, ratio to NumPy and peak intermediate memory (what its best allocates,
live at once on this machine's threads), with the search's own best reading beside it.
"""
from __future__ import annotations

import argparse
import json
import os
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


def retime(op: str, params: dict, db_path: Path, rounds: int = 5) -> dict:
    """In this (fresh) process: per algorithm, GFLOP/s, ratio to NumPy composed (medians over
    ``rounds`` rounds timed alternately, ``final_figures.time_alternately``), the search's
    best reading and the peak intermediate bytes; and NumPy's GFLOP/s."""
    import autotune
    from autotune.dispatch import build_config
    from schedule.explain import explain

    task = autotune.Task(op, params, target="cpu")
    configs = best_configs(task, db_path)
    names = sorted(configs)
    ours, theirs = time_alternately(task, [build_config(task, configs[n][0]) for n in names], rounds)
    numpy_s = statistics.median(theirs)
    threads = len(os.sched_getaffinity(0))
    out = {}
    for name, t in zip(names, ours):
        peak = explain(task.lower(configs[name][0]).body, threads=threads).peak_bytes_threads
        out[name] = {"gflops": task.flops / statistics.median(t) / 1e9, "ratio": numpy_s / statistics.median(t),
                     "search_gflops": task.flops / configs[name][1] / 1e9, "peak_bytes": peak}
    return out | {"numpy_gflops": task.flops / numpy_s / 1e9}


def parse_params(pairs: list[str]) -> dict:
    """``name=value`` pairs: an int, a comma-separated list of ints, true/false, or text."""
    params = {}
    for pair in pairs:
        name, _, text = pair.partition("=")
        if text.lower() in ("true", "false"):
            params[name] = text.lower() == "true"
        elif "," in text:
            params[name] = [int(x) for x in text.split(",")]
        else:
            try:
                params[name] = int(text)
            except ValueError:
                params[name] = text
    return params


def measure(op: str, params: dict, trials: int, seed: int) -> tuple[float, float, float, dict]:
    """Tune, then re-time each algorithm's best in a fresh process: (the CLI's ratio, its
    best GFLOP/s, its wall time, ``retime``'s result)."""
    env = fresh_process_env()
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "algorithms.db"
        cli_ratio, best, _, wall, _ = tune(op, params, trials, seed, 5, db, env)
        proc = subprocess.run([sys.executable, __file__, op, "--params-json", json.dumps(params), "--retime", str(db)],
                              capture_output=True, text=True, env=env)
        if proc.returncode != 0:
            raise SystemExit(f"re-timing failed:\n{proc.stdout}\n{proc.stderr}")
        return cli_ratio, best, wall, json.loads(proc.stdout.strip().splitlines()[-1])


def print_table(got: dict, order: list[str] | None = None) -> None:
    print("| algorithm | search's best reading (GFLOP/s) | re-timed GFLOP/s | re-timed ratio to NumPy composed "
          "| peak intermediate memory |")
    print("| --- | --- | --- | --- | --- |")
    for name in order or sorted(k for k in got if k != "numpy_gflops"):
        if name in got:
            g = got[name]
            print(f"| {name} | {g['search_gflops']:.2f} | {g['gflops']:.2f} | {g['ratio']:.2f}x "
                  f"| {g['peak_bytes'] / 2**20:.2f} MiB |")
    print(f"| NumPy composed | | {got['numpy_gflops']:.2f} | | |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("op")
    parser.add_argument("-p", "--param", action="append", default=[], help="name=value, as the op command takes it")
    parser.add_argument("--trials", type=int, default=300)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--params-json", default=None, help=argparse.SUPPRESS)  # the fresh process
    parser.add_argument("--retime", type=Path, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.retime is not None:
        print(json.dumps(retime(args.op, json.loads(args.params_json), args.retime)))
        return
    reexec_without_blas_overrides()
    print(blas_description())
    params = parse_params(args.param)
    cli_ratio, best, wall, got = measure(args.op, params, args.trials, args.seed)
    shown = " ".join(f"{k}={v}" for k, v in params.items())
    print(f"{args.op} {shown}, {args.trials} trials, seed {args.seed}: the CLI printed {best:.2f} GFLOP/s, "
          f"ratio {cli_ratio:.2f}x NumPy composed ({wall:.0f} s)")
    print_table(got)


if __name__ == "__main__":
    main()
