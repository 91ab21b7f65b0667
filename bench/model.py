"""A whole network tuned under one budget, end to end against NumPy composed, in one run.

    python bench/model.py                         # the MLP, 2000 trials, gradient and round-robin
    python bench/model.py --trials 400 --no-round-robin

The network: a 4-layer MLP, batch 64, 1024 -> 4096 -> 1024 -> 4096 -> 1024, bias and relu
after each layer but the last (``autotune.graph``; two distinct tasks of weight 2).

1. ``tune_graph`` with the gradient task scheduler into a database of its own, and (unless
   ``--no-round-robin``) with round-robin into another, same seed and budget; the
   scheduler's estimate of the network's latency (sum of weight x best time) after each
   batch is kept, to say at which trial the gradient run reached round-robin's final one.
2. In a fresh process: the network rebuilt from the gradient run's database
   (``build_graph``: each task's best stored config, weights packed once) and timed
   alternately with NumPy composed of the same steps (``x @ w.T``, ``+= b``, ``maximum``
   on preallocated buffers, OpenBLAS's threads at their default settings), five rounds of
   at least 0.2 s each, a pause before each timing; the medians and their ratio. The
   outputs are checked against ``Graph.run_numpy`` first.
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

from anchor import blas_description, reexec_without_blas_overrides  # noqa: E402

LAYERS = [(1024, 4096), (4096, 1024), (1024, 4096), (4096, 1024)]
BATCH = 64


def mlp():
    from autotune.graph import Graph

    g = Graph("mlp4", seed=0)
    h = g.input("x", (BATCH, LAYERS[0][0]))
    for n, (n_in, n_out) in enumerate(LAYERS):
        h = g.dense(h, g.param(f"w{n}", (n_out, n_in)), g.param(f"b{n}", (n_out,)))
        h = g.relu(h) if n < len(LAYERS) - 1 else h
    g.output("y", h)
    return g


def numpy_composed(g):
    """The network on NumPy, step by step on preallocated buffers (the anchor)."""
    params = {v.name: a for v, a in g.params.items()}
    bufs = [np.empty((BATCH, n_out), np.float32) for _, n_out in LAYERS]

    def run(x):
        h = x
        for n, buf in enumerate(bufs):
            np.matmul(h, params[f"w{n}"].T, out=buf)
            buf += params[f"b{n}"]
            if n < len(LAYERS) - 1:
                np.maximum(buf, 0, out=buf)
            h = buf
        return h

    return run


#: Pause before each timing: OpenBLAS's threads spin about 0.1 s after NumPy's last call
#: (on the cores the network's kernels need), OpenMP's a few milliseconds after ours.
SETTLE_S = 0.3


def seconds_per_call(fn, min_time: float = 0.2) -> float:
    fn()
    calls, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < min_time or calls < 5:
        fn()
        calls += 1
    return (time.perf_counter() - t0) / calls


def retime(db: str) -> dict:
    """Rebuild from ``db`` and time alternately with NumPy composed (runs in a fresh process)."""
    import tuning_db
    from autotune.graph import build_graph

    g = mlp()
    with tuning_db.Database(db, create=False) as opened:
        net = build_graph(g, db=opened)
    x = np.random.default_rng(1).uniform(-1, 1, (BATCH, LAYERS[0][0])).astype(np.float32)
    np.testing.assert_allclose(net(x=x)["y"], g.run_numpy(x=x)["y"], rtol=1e-3, atol=1e-4)
    anchor = numpy_composed(g)
    ours, theirs = [], []
    for round_ in range(5):
        pair = [(ours, lambda: net(x=x)), (theirs, lambda: anchor(x))]
        for times, fn in (pair if round_ % 2 == 0 else pair[::-1]):
            time.sleep(SETTLE_S)
            times.append(seconds_per_call(fn))
    return {"ours_ms": statistics.median(ours) * 1e3, "numpy_ms": statistics.median(theirs) * 1e3,
            "untuned": net.untuned()}


def tune(db: str, trials: int, scheduler: str, seed: int) -> tuple[object, list]:
    import tuning_db
    from autotune.graph import tune_graph

    curve: list[tuple[int, float]] = []
    with tuning_db.Database(db) as opened:
        t0 = time.perf_counter()
        result = tune_graph(mlp(), trials=trials, db=opened, scheduler=scheduler, seed=seed,
                            progress=lambda r, i: (curve.append((r.trials, r.latency)),
                                                   print(f"   {scheduler}: {r.trials:5d} trials, network "
                                                         f"{r.latency * 1e3:.3f} ms (task {i}), "
                                                         f"{time.perf_counter() - t0:.0f} s", flush=True)))
    return result, curve


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-round-robin", action="store_true", help="tune with the gradient scheduler only")
    parser.add_argument("--retime", metavar="DB", help=argparse.SUPPRESS)  # the fresh process's part
    args = parser.parse_args()
    if args.retime:
        print(json.dumps(retime(args.retime)))
        return
    reexec_without_blas_overrides()
    print(f"# 4-layer MLP, batch {BATCH}, {args.trials} trials, seed {args.seed}; NumPy: {blas_description()}")
    out = Path(tempfile.mkdtemp(prefix="model-bench-"))
    gradient, curve = tune(str(out / "gradient.db"), args.trials, "gradient", args.seed)
    print(f"gradient: {gradient.trials} trials in {gradient.seconds:.0f} s; network estimate "
          f"{gradient.latency * 1e3:.3f} ms; trials per task "
          f"{[(t.weight, s.trials) for t, s in zip(gradient.tasks, gradient.states)]}")
    if not args.no_round_robin:
        robin, _ = tune(str(out / "round_robin.db"), args.trials, "round_robin", args.seed)
        reached = next((t for t, latency in curve if latency <= robin.latency), None)
        print(f"round-robin: network estimate {robin.latency * 1e3:.3f} ms after {robin.trials} trials; the "
              f"gradient run reached it after {reached if reached is not None else 'never'} trials"
              + (f" ({reached / robin.trials:.0%})" if reached else ""))
    proc = subprocess.run([sys.executable, __file__, "--retime", str(out / "gradient.db")], capture_output=True,
                          text=True, check=True)
    figures = json.loads(proc.stdout.strip().splitlines()[-1])
    print(f"re-timed in a fresh process: tuned network {figures['ours_ms']:.3f} ms, NumPy composed "
          f"{figures['numpy_ms']:.3f} ms: {figures['numpy_ms'] / figures['ours_ms']:.2f}x"
          + (f"; untuned tasks: {figures['untuned']}" if figures["untuned"] else ""))
    print(f"databases: {out}")


if __name__ == "__main__":
    main()
