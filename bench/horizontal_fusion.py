"""Horizontal fusion: the q, k and v projections of one activation in one kernel, against
three separately tuned kernels, in the same run.

    python bench/horizontal_fusion.py                         # M=128 D=768 and M=32 D=512, 300 trials
    python bench/horizontal_fusion.py --shapes 128x768 --trials 100

For each shape, ``autotune qkv -M M -D D`` tunes the three projections as one workload,
whose space may run k_proj and v_proj inside q_proj's outer loops (its ``siblings``
knob), and ``autotune dense -M M -N D -K D --bias`` tunes one projection alone: the
separate kernel, called three times. Both get the same trials and seed. A fresh process
then rebuilds both stored bests through ``apply_best``, checks them against the reference,
and times them alternately with NumPy composed (three ``X @ W.T + b``): five rounds, each
timing all three with at least 15 repeats from evicted arrays, arrays placed anew every round,
weights packed once per round and untimed (as a user packs them once). The table prints
the medians and the fused kernel's ratio over the three separate calls; the goal is 1.1x.
"""
from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "bench")]

from anchor import blas_description, reexec_without_blas_overrides  # noqa: E402
from final_figures import fresh_process_env, tune  # noqa: E402

GOAL = 1.1
DEFAULT_SHAPES = ("128x768", "32x512")


def workloads(m: int, d: int) -> tuple[tuple[str, dict], tuple[str, dict]]:
    """(the fused workload, one separate projection) as the command line takes them."""
    return ("qkv", dict(M=m, D=d)), ("dense", dict(M=m, N=d, K=d, bias=True, relu=False))


def retime(m: int, d: int, fused_db: Path, separate_db: Path, rounds: int = 5) -> dict:
    """In this (fresh) process: the fused kernel, the separate one called three times and
    NumPy composed, timed alternately (``interleaved_rounds``); medians in seconds."""
    import numpy as np

    import autotune
    import tuning_db
    from autotune.anchor import numpy_equivalent_on
    from autotune.final_timing import interleaved_rounds, placed_copies
    from autotune.timing_protocol import SETTLE_S, anchor_with_flush, evicting_flush, time_round
    from autotune.verify import mismatch, reduction_length

    (fused_op, fused_params), (separate_op, separate_params) = workloads(m, d)
    fused_task = autotune.Task(fused_op, fused_params, target="cpu")
    separate_task = autotune.Task(separate_op, separate_params, target="cpu")
    with tuning_db.Database(fused_db, create=False) as opened:
        fused = autotune.build(fused_task, db=opened)
    with tuning_db.Database(separate_db, create=False) as opened:
        separate = autotune.build(separate_task, db=opened)
    inputs = fused_task.workload.random_inputs(seed=0)  # X, Wq, Wk, Wv, bq, bk, bv
    references = fused_task.workload.reference(*inputs)
    outs = [np.empty(r.shape, r.dtype) for r in references]
    alone = [np.empty(r.shape, r.dtype) for r in references]
    x, weights, biases = inputs[0], inputs[1:4], inputs[4:7]
    fused(*inputs, *outs)
    for w, b, out in zip(weights, biases, alone):
        separate(x, w, b, out)
    length = reduction_length(fused_task.workload.outputs)
    for name, got in (("fused", outs), ("separate", alone)):
        for out, ref in zip(got, references):
            problem = mismatch(out, ref, length)
            assert problem is None, f"the stored best ({name}) computes a wrong result: {problem}"
    rng = random.Random(1)
    now: dict = {}

    def start_round(round_: int) -> None:
        arrays = [*inputs, *outs, *alone]
        if round_:
            arrays = placed_copies(arrays, rng)
        x, ws, bs, fo, so = arrays[0], arrays[1:4], arrays[4:7], arrays[7:10], arrays[10:13]
        prepared = [fused.prepare([x, *ws, *bs, *fo])] + [separate.prepare([x, w, b, o]) for w, b, o in zip(ws, bs, so)]
        # Each repeat starts with what it reads and writes evicted from the caches.
        now.update(arrays=arrays, prepared=prepared,  # alive while the kernels hold their raw pointers
                   pointers=[[a.ctypes.data for a in p] for p in prepared],
                   fused_flush=evicting_flush(prepared[0]),
                   separate_flush=evicting_flush([a for p in prepared[1:] for a in p]),
                   numpy=anchor_with_flush(numpy_equivalent_on(fused_task.workload, [x, *ws, *bs]), [x, *ws, *bs]))

    def one_round(fn, flush) -> float:
        return statistics.median(time_round(fn, (), min_repeats=15, max_repeats=1000, min_time=0.3, flush=flush))

    def three_calls() -> None:
        for pointers in now["pointers"][1:]:
            separate.call_unchecked(pointers)

    def time_candidate(i: int) -> float:
        if i == 0:
            return one_round(lambda: fused.call_unchecked(now["pointers"][0]), now["fused_flush"])
        return one_round(*now["numpy"])

    times = interleaved_rounds(2, time_candidate, lambda: one_round(three_calls, now["separate_flush"]), rounds,
                               settle=SETTLE_S, start_round=start_round)
    if times.errors:
        raise SystemExit(f"re-timing failed: {times.errors}")
    fused_s, numpy_s = (statistics.median(t) for t in times.candidates)
    return dict(fused=fused_s, separate=statistics.median(times.anchor), numpy=numpy_s, flops=fused_task.flops)


def sibling_decision(m: int, d: int, db: Path) -> str:
    """What the stored best of the fused workload does with its siblings, in words."""
    import autotune
    import tuning_db
    from autotune.dispatch import best_config

    (op, params), _ = workloads(m, d)
    task = autotune.Task(op, params, target="cpu")
    with tuning_db.Database(db, create=False) as opened:
        config, _ = best_config(task, opened)
    share = task.space.decisions(config)["q_proj"]
    if not share.shares_loops:
        return "separate loop nests"
    return f"shares q_proj's loops down to axis {share.siblings} (parallel fuses {share.parallel})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shapes", nargs="+", default=list(DEFAULT_SHAPES), metavar="MxD")
    parser.add_argument("--trials", type=int, default=300)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--retime", nargs=2, type=Path, help=argparse.SUPPRESS)  # the fresh process's part
    args = parser.parse_args()
    shapes = [tuple(int(n) for n in s.split("x")) for s in args.shapes]
    if args.retime is not None:
        (m, d), = shapes
        print(json.dumps(retime(m, d, *args.retime)))
        return
    reexec_without_blas_overrides()
    print(f"# q, k, v projections fused vs three separate tuned kernels, {args.trials} trials each, seed {args.seed}; "
          f"NumPy: {blas_description()}")
    env = fresh_process_env()
    print("| M x D | fused / separate x3 / NumPy (GFLOP/s, re-timed) | fused over separate | goal | "
          "the fused best | tuning wall (fused, separate) |")
    print("| --- | --- | --- | --- | --- | --- |")
    with tempfile.TemporaryDirectory() as tmp:
        for m, d in shapes:
            (fused_op, fused_params), (separate_op, separate_params) = workloads(m, d)
            fused_db, separate_db = Path(tmp) / f"qkv{m}x{d}.db", Path(tmp) / f"dense{m}x{d}.db"
            *_, fused_wall = tune(fused_op, fused_params, args.trials, args.seed, 5, fused_db, env)
            *_, separate_wall = tune(separate_op, separate_params, args.trials, args.seed, 5, separate_db, env)
            proc = subprocess.run([sys.executable, __file__, "--shapes", f"{m}x{d}", "--retime", str(fused_db),
                                   str(separate_db)], capture_output=True, text=True, env=env)
            if proc.returncode != 0:
                raise SystemExit(f"re-timing {m}x{d} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
            t = json.loads(proc.stdout)
            gflops = [t["flops"] / t[k] / 1e9 for k in ("fused", "separate", "numpy")]
            ratio = t["separate"] / t["fused"]
            print(f"| {m} x {d} | {gflops[0]:.1f} / {gflops[1]:.1f} / {gflops[2]:.1f} | {ratio:.3f}x | "
                  f"{GOAL}x {'met' if ratio >= GOAL else 'not met'} | {sibling_decision(m, d, fused_db)} | "
                  f"{fused_wall:.0f} s, {separate_wall:.0f} s |", flush=True)


if __name__ == "__main__":
    main()
