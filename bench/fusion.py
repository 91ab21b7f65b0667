"""Fused multi-stage workloads against NumPy composed of the same steps, in the same run.

    python bench/fusion.py                          # every workload, 300 trials, seed 0
    python bench/fusion.py --only softmax layernorm --trials 100

Each workload is tuned with ``autotune <op> ... --trials N --seed S`` into a database of its
own; the stored best is then rebuilt through ``apply_best`` in a fresh process and timed
alternately with NumPy (``bench/final_figures.py``'s re-timing: five rounds, each timing
both with at least 15 cache-flushed repeats, arrays placed anew each round). NumPy's
version runs the workload's steps one after another, each a pass over its arrays, on
preallocated buffers (``autotune.anchor``): its matmuls use OpenBLAS's threads, its
element-wise steps one core. The table prints the command line's ratio, the re-timed one,
the goal, and the stored best's peak intermediate memory (the buffers it allocates live at
once, intermediate stages and packed copies of inputs, a copy for each thread in a parallel
loop) against the unfused intermediates the DAG declares.
"""
from __future__ import annotations

import argparse
import math
import os
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "bench")]

from anchor import blas_description, reexec_without_blas_overrides  # noqa: E402
from final_figures import fresh_process_env, retime_in_fresh_process, tune  # noqa: E402

#: name -> (op, params as the command line takes them, goal: re-timed ratio against NumPy composed)
WORKLOADS = {
    "softmax": ("softmax", dict(shape=[4096, 4096]), 1.5),
    "layernorm": ("layernorm", dict(M=4096, N=4096), 1.5),
    "mlp": ("mlp", dict(M=256, D=1024, H=4096), 1.2),
    "attention": ("attention", dict(heads=8, seq=1024, dim=64), 1.5),
}


def intermediate_memory(op: str, params: dict, db: Path) -> tuple[int, int]:
    """(peak bytes of the buffers the stored best allocates (intermediate stages and packed
    copies of inputs) live at once with as many parallel iterations as the machine has
    threads; bytes of every intermediate stage of the DAG stored whole)."""
    import autotune
    import tuning_db
    from autotune.dispatch import best_config
    from schedule.explain import explain
    import te
    from te import dtypes
    from te.tensor import ComputeOp

    task = autotune.Task(op, params, target="cpu")
    with tuning_db.Database(db, create=False) as opened:
        config, _ = best_config(task, opened)
    func = task.lower(config)
    outputs = {t.op for t in task.workload.outputs}
    unfused = sum(math.prod(o.output(0).shape) * dtypes.nbytes(o.output(0).dtype)
                  for o in te.topological_order(task.workload.outputs)
                  if isinstance(o, ComputeOp) and o not in outputs)
    threads = len(os.sched_getaffinity(0))
    return explain(func.body, threads=threads).peak_bytes_threads, unfused


def _size(nbytes: int) -> str:
    return f"{nbytes / 2**20:.1f} MiB" if nbytes >= 2**20 else f"{nbytes / 2**10:.1f} KiB"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", nargs="+", choices=sorted(WORKLOADS), default=list(WORKLOADS))
    parser.add_argument("--trials", type=int, default=300)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    reexec_without_blas_overrides()
    print(f"# fused workloads, {args.trials} trials, seed {args.seed}; NumPy: {blas_description()}")
    env = fresh_process_env()
    print("| workload | CLI ratio | re-timed GFLOP/s (ours / NumPy) | re-timed ratio | goal | "
          "intermediate memory (peak / unfused) | tuning wall |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.only:
            op, params, goal = WORKLOADS[name]
            db = Path(tmp) / f"{name}.db"
            reported, _, _, wall, _ = tune(op, params, args.trials, args.seed, 5, db, env)
            ours, numpy_gflops, ratio, *_ = retime_in_fresh_process(op, params, db, env)
            peak, unfused = intermediate_memory(op, params, db)
            shape = " ".join(f"{k}={v}" for k, v in params.items())
            print(f"| {name} {shape} | {reported:.3f}x | {ours:.1f} / {numpy_gflops:.1f} | {ratio:.3f}x | "
                  f"{goal}x {'met' if ratio >= goal else 'not met'} | {_size(peak)} / {_size(unfused)} | "
                  f"{wall:.0f} s |", flush=True)


if __name__ == "__main__":
    main()
