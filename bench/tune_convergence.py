"""Tuner convergence, cost-model quality and the tuning time split, on one task.

    python bench/tune_convergence.py [--size 1024] [--trials 1000] [--tuners xgb,ga,random]
                                     [--xgb-seeds 2] [--db bench/out/convergence.db]

For each tuner: tune the float32 matmul for the same budget, then write
  bench/out/convergence.csv   trial, best-so-far GFLOP/s per tuner
  bench/out/convergence.png   the same as a plot, NumPy's GFLOP/s as a line
and print:
  - each tuner's best GFLOP/s and its ratio to NumPy (measured in the same run),
  - xgb's best after 250 trials against random's best after all trials (and, with
    ``--xgb-seeds N``, xgb's best after 250 trials with N more seeds: one run is one draw),
  - failed trials per tuner by status (every record is in ``--db``: ``autotune log errors``),
  - the cost model's pairwise accuracy and top-1/top-5 on held-out records of the xgb run
    (``bench/model_quality.py`` gives them per run and pooled over every run in ``--db``),
  - the wall time split into build, run, model and search, and model+search's share.
"""
from __future__ import annotations

import argparse
import csv
from collections import Counter
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import anchor  # noqa: E402

anchor.reexec_without_blas_overrides()

import numpy as np  # noqa: E402

from autotune.cost_model import evaluate_holdout  # noqa: E402
from autotune.features import FeatureCache  # noqa: E402
from autotune.task import Task  # noqa: E402
from autotune.tuning import tune  # noqa: E402
from tuning_db import Database  # noqa: E402

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "out")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--trials", type=int, default=1000)
    parser.add_argument("--tuners", default="xgb,ga,random")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--xgb-seeds", type=int, default=0,
                        help="extra 250-trial xgb runs with seeds seed+1.. (the spread of xgb@250)")
    parser.add_argument("--db", default=os.path.join(OUT, "convergence.db"),
                        help="tuning database for every record of the bench ('' for none)")
    args = parser.parse_args()
    os.makedirs(OUT, exist_ok=True)
    n = args.size
    task = Task("matmul", dict(M=n, N=n, K=n))
    db = Database(args.db) if args.db else None
    curves, results = {}, {}
    ref_before = anchor.numpy_matmul_gflops(n, n, n)
    for name in args.tuners.split(","):
        t0 = time.perf_counter()
        result = tune(task, trials=args.trials, tuner=name, seed=args.seed, batch_size=args.batch_size, db=db,
                      callbacks=[lambda p, name=name: print(
                          f"  {name}: {p.trials_done}/{p.trials_total} best "
                          f"{(p.best_gflops or 0):.1f} GFLOP/s, errors {p.errors}", flush=True)])
        results[name] = result
        curves[name] = result.best_so_far()
        print(f"{name}: {time.perf_counter() - t0:.0f} s wall, best {result.best_gflops or 0:.1f} GFLOP/s")
    extra_at250 = []
    for k in range(1, args.xgb_seeds + 1):
        result = tune(task, trials=250, tuner="xgb", seed=args.seed + k, batch_size=args.batch_size, db=db)
        extra_at250.append(_at(result.best_so_far(), 250))
        print(f"xgb seed {args.seed + k}: best after 250 trials {extra_at250[-1]:.1f} GFLOP/s", flush=True)
    ref_after = anchor.numpy_matmul_gflops(n, n, n)
    ref = max(ref_before, ref_after)  # the machine is shared: compare with NumPy at its best
    print(f"\nBLAS: {anchor.blas_description()}")
    print(f"numpy: {ref_before:.1f} GFLOP/s before tuning, {ref_after:.1f} after; ratios use {ref:.1f}")
    for name, result in results.items():
        best = result.best_gflops or 0.0
        failed = Counter(t.result.status for t in result.history if not t.result.ok)
        print(f"{name:>7}: best {best:8.1f} GFLOP/s  ratio {best / ref:.2f}x  after {len(result.history)} trials"
              f"  failed: {dict(failed) or 0}")
    _write_curves(curves, ref)
    if "xgb" in results and "random" in results:
        at250 = _at(curves["xgb"], 250)
        print(f"xgb best after 250 trials: {at250:.1f} GFLOP/s; random after {len(curves['random'])}: "
              f"{_at(curves['random'], len(curves['random'])):.1f} GFLOP/s")
    if extra_at250:
        print(f"xgb best after 250 trials over seeds {args.seed}..{args.seed + args.xgb_seeds}: "
              + ", ".join(f"{v:.1f}" for v in [_at(curves.get('xgb', []), 250)] * ('xgb' in curves) + extra_at250))
    if "xgb" in results:
        _model_quality(task, results["xgb"], args.seed)
        t = results["xgb"].timings
        share = (t["model_s"] + t["search_s"]) / t["total_s"]
        print("xgb time split: " + ", ".join(f"{k} {v:.1f} s" for k, v in t.items())
              + f"; model+search {100 * share:.1f}% of the wall time")


def _at(curve, trial: int) -> float:
    values = [v for v in curve[:trial] if v is not None]
    return max(values) if values else 0.0


def _write_curves(curves: dict, ref: float) -> None:
    length = max(len(c) for c in curves.values())
    path = os.path.join(OUT, "convergence.csv")
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["trial"] + list(curves) + ["numpy"])
        for i in range(length):
            w.writerow([i + 1] + [(c[i] if i < len(c) and c[i] is not None else "") for c in curves.values()] + [ref])
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    for name, c in curves.items():
        ax.plot(range(1, len(c) + 1), [v or 0 for v in c], label=name)
    ax.axhline(ref, color="k", linestyle="--", label="numpy")
    ax.set_xlabel("trials")
    ax.set_ylabel("best GFLOP/s so far")
    ax.legend()
    fig.tight_layout()
    fig.savefig(os.path.join(OUT, "convergence.png"), dpi=120)
    print(f"wrote {path} and convergence.png")


def _model_quality(task: Task, result, seed: int) -> None:
    cache = FeatureCache()
    trials = [t for t in result.history if t.result.status in ("ok",)]
    feats = np.stack([cache.get(task, t.config) for t in trials])
    costs = np.array([t.result.cost for t in trials])
    q = evaluate_holdout(feats, costs, test_fraction=0.2, seed=seed)
    print(f"cost model on held-out records: pairwise accuracy {q['pairwise_accuracy']:.3f}, "
          f"top-1 {q['top1']:.3f}, top-5 {q['top5']:.3f}, top-10 recall {q['recall10']:.3f} "
          f"({q['n_train']} train / {q['n_test']} test)")


if __name__ == "__main__":
    main()
