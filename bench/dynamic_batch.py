"""A dense layer whose batch is known only at run time: kernels tuned for a few batch sizes
(buckets) serving sizes between them, against kernels tuned for each exact size.

    python bench/dynamic_batch.py                          # N = K = 1024, 100 trials per task
    python bench/dynamic_batch.py --trials 200 --sizes 5 24 100 160 200

1. ``autotune.tune_buckets`` tunes dense + bias + relu at M = 1, 8, 64, 256; then each
   held-out size is tuned as a task of its own, same trials, all into one database.
2. A fresh process builds the bucketed module (``build_buckets``: the rows no bucket fits
   run as a tail, the bucket's schedule compiled at their size; ``warm`` compiles them
   before timing and keeps, per size, the faster of its plan and one tail of a larger
   bucket), the same module padding those rows instead (``tails=False``), and each
   exact-size kernel through ``apply_best``, and times them alternately, weights packed
   beforehand for all, five rounds of at least 0.2 s each; the ratios of the medians per
   size, and the plan of bucket calls. Goal: within 1.25x of the exact kernel.
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "bench")]

from anchor import seconds_per_call  # noqa: E402

BUCKETS = (1, 8, 64, 256)
SETTLE_S = 0.05


def retime(db: str, size: int, sizes: list[int]) -> dict:
    import autotune
    import tuning_db
    from autotune.dynamic import DynamicDim, build_buckets

    params = dict(N=size, K=size)
    dim = DynamicDim("M", 1, max(BUCKETS), BUCKETS)
    rng = np.random.default_rng(0)
    w = rng.uniform(-0.05, 0.05, (size, size)).astype(np.float32)
    b = rng.uniform(-0.1, 0.1, size).astype(np.float32)
    out = {}
    with tuning_db.Database(db, create=False) as opened:
        bucketed = build_buckets("dense", params, dim, db=opened)
        bucketed.warm(*sizes)
        padded = build_buckets("dense", params, dim, db=opened, tails=False)
        packed, packed_padded = bucketed.pack("W", w), padded.pack("W", w)
        for m in sizes:
            exact = autotune.build(autotune.Task("dense", dict(params, M=m)), db=opened)
            x = rng.uniform(-1, 1, (m, size)).astype(np.float32)
            y1, y2, y3 = (np.empty((m, size), np.float32) for _ in range(3))
            w_exact = exact.pack("W", w)
            runs = [("bucketed", lambda: bucketed(x, packed, b, y1)), ("exact", lambda: exact(x, w_exact, b, y2)),
                    ("padded", lambda: padded(x, packed_padded, b, y3))]
            times = {name: [] for name, _ in runs}
            for round_ in range(5):
                for name, fn in (runs if round_ % 2 == 0 else runs[::-1]):
                    time.sleep(SETTLE_S)
                    times[name].append(seconds_per_call(fn))
            ref = np.maximum(x @ w.T + b, 0)
            assert all(np.allclose(y, ref, rtol=1e-3, atol=1e-3) for y in (y1, y2, y3))
            out[m] = {name: statistics.median(t) for name, t in times.items()} | {"plan": bucketed.plan(m)}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", type=int, default=1024, help="N = K of the layer")
    parser.add_argument("--trials", type=int, default=100)
    parser.add_argument("--sizes", type=int, nargs="+", default=[5, 24, 100, 160, 200], help="held-out batches")
    parser.add_argument("--retime", metavar="DB", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.retime:
        print(json.dumps(retime(args.retime, args.size, args.sizes)))
        return
    import autotune
    import tuning_db
    from autotune.dynamic import DynamicDim, tune_buckets

    params = dict(N=args.size, K=args.size)
    db_path = Path(tempfile.mkdtemp(prefix="dynamic-bench-")) / "t.db"
    print(f"# dense + bias + relu, N = K = {args.size}, buckets {BUCKETS}, {args.trials} trials per task")
    t0 = time.perf_counter()
    with tuning_db.Database(db_path) as db:
        tune_buckets("dense", params, DynamicDim("M", 1, max(BUCKETS), BUCKETS), trials=args.trials, db=db)
        for m in args.sizes:
            autotune.tune(autotune.Task("dense", dict(params, M=m)), trials=args.trials, db=db)
    print(f"# tuned {len(BUCKETS) + len(args.sizes)} tasks in {time.perf_counter() - t0:.0f} s; database {db_path}")
    proc = subprocess.run([sys.executable, __file__, "--retime", str(db_path), "--size", str(args.size),
                           "--sizes", *map(str, args.sizes)], capture_output=True, text=True, check=True)
    figures = json.loads(proc.stdout.strip().splitlines()[-1])
    print("| batch | bucket calls (bucket: rows) | bucketed ms | exact-size kernel ms | bucketed / exact | "
          "padded instead of tails / exact |")
    print("| --- | --- | --- | --- | --- | --- |")
    ratios = []
    for m, f in figures.items():
        ratio = f["bucketed"] / f["exact"]
        ratios.append(ratio)
        plan = ", ".join(f"{bucket}: {rows}" for bucket, rows in f["plan"])
        print(f"| {m} | {plan} | {f['bucketed'] * 1e3:.3f} | {f['exact'] * 1e3:.3f} | {ratio:.2f}x | "
              f"{f['padded'] / f['exact']:.2f}x |")
    print(f"worst {max(ratios):.2f}x (goal: within 1.25x)")


if __name__ == "__main__":
    main()
