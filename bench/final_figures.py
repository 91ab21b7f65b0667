"""Does the figure the command line reports hold up? Tune, then re-time the stored best in a
fresh process, as a user would, and compare the two ratios against NumPy (matmul; dense
with bias and relu against NumPy composed).

    python bench/final_figures.py                         # matmul 1024^3, 200 trials, seeds 0 1 2
    python bench/final_figures.py --shape 512 512 512 --trials 64 --seeds 0
    python bench/final_figures.py --final 0               # the search's best reading instead
    python bench/final_figures.py --op dense --shape 128 4096 4096 --trials 500 --seeds 0
    python bench/final_figures.py --trials 1000 --tuner ga --rounds 3   # the command line's options
    python bench/final_figures.py --keep runs/        # runs/seed0.db ... kept for bench/model_quality.py

Each seed runs ``autotune <op> ... --trials N --seed S`` into a database of its own and
reads the ratio it prints. Then a new process opens that database, builds the task through
``apply_best`` (``autotune.build``) and times the kernel and NumPy alternately: five rounds,
and more up to fifteen until the ratio is as precise as the final timing's confirmation
(``FinalTimingOptions.precision``), each timing both with at least 15 cache-flushed
repeats, the ratio the median of the rounds' ratios, as the final timing's is; the
first round takes the arrays where NumPy allocated them, later rounds copies placed anew
(as the final timing does: a kernel's speed depends on where its arrays start). The table
prints both ratios and how far apart they are; the goal is within 5 %. Beside each ratio it
prints its 90 % interval from the rounds' ratios (``autotune.final_timing.median_interval``)
and, at the end, how many re-timed ratios fell inside the command line's interval: on a host
whose speed moves between minutes, the intervals say so where the gap alone does not.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "bench")]

from anchor import blas_description, reexec_without_blas_overrides  # noqa: E402

RATIO = re.compile(r"ratio ([0-9.]+)x")
BEST = re.compile(r"^best: +([0-9.e+]+) GFLOP/s", re.M)
ANCHOR = re.compile(r"^anchor: +.*? ([0-9][0-9.e+]*) GFLOP/s", re.M)  # NumPy, or PyTorch for conv2d
INTERVAL = re.compile(r"^ +\d+% interval of the ratio: ([0-9.e+]+)-([0-9.e+]+)x", re.M)


#: The ops this bench tunes: the command line's own defaults (dense: with bias and relu, its
#: NumPy anchor composed of np.matmul, the bias add and the relu).
OPS = ("matmul", "dense")


def cli_options(params: dict) -> list[str]:
    """The command line's options for workload ``params`` (``M=1024`` -> ``-M 1024``,
    ``shape=[8, 16]`` -> ``--shape 8,16``, ``causal=True`` -> ``--causal``, ``relu=False`` ->
    ``--no-relu``: a flag's default may be on)."""
    out = []
    for name, value in params.items():
        flag = f"-{name}" if len(name) == 1 else f"--{name.replace('_', '-')}"
        if value is True:
            out.append(flag)
        elif value is False:
            out.append(f"--no-{name.replace('_', '-')}")
        else:
            out += [flag, ",".join(map(str, value)) if isinstance(value, (list, tuple)) else str(value)]
    return out


def tune(op: str, params: dict, trials: int, seed: int, final: int, db: Path, env: dict,
         rounds: int | None = None, tuner: str | None = None) -> tuple[float, float, float, float, tuple | None]:
    """Run the command line (``rounds``, ``tuner``: its ``--rounds`` and ``--tuner``, None for
    its defaults); (the ratio it printed, its GFLOP/s for the best and for NumPy, its wall
    time in seconds, the ratio's interval it printed or None)."""
    cmd = [sys.executable, "-m", "autotune.cli", op, *cli_options(params),
           "--trials", str(trials), "--seed", str(seed), "--final", str(final), "--db", str(db), "--no-progress",
           *(["--rounds", str(rounds)] if rounds is not None else []),
           *(["--tuner", tuner] if tuner is not None else [])]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=REPO)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{proc.stdout}\n{proc.stderr}")
    found = [float(x) for x in RATIO.findall(proc.stdout)]
    best, numpy_gflops = BEST.search(proc.stdout), ANCHOR.search(proc.stdout)
    if not found or best is None or numpy_gflops is None:
        raise SystemExit(f"no ratio in the output of {' '.join(cmd)}:\n{proc.stdout}")
    spent = re.search(r"^time: +(.*)$", proc.stdout, re.M)
    chosen = re.search(r"^ +decisions \(what the config asks for\):\n +(.*)$", proc.stdout, re.M)
    print(f"<!-- seed {seed}: {spent.group(1) if spent else '?'}; best: {chosen.group(1) if chosen else '?'} -->",
          flush=True)
    interval = INTERVAL.search(proc.stdout)
    return (found[-1], float(best.group(1)), float(numpy_gflops.group(1)), wall,
            (float(interval.group(1)), float(interval.group(2))) if interval else None)


def retime(op: str, params: dict, db: Path, rounds: int = 5, min_repeats: int = 15,
           min_time: float = 0.3) -> tuple[float, float, float, float, float, float, float]:
    """In this (fresh) process: (kernel GFLOP/s, NumPy GFLOP/s, ratio, slowest and fastest
    round of the kernel, the ratio's 90 % interval: low, high (nan without one)) of the stored
    best, built through ``apply_best`` (``time_alternately``).
    As in the final timing, the ratio is the median of the rounds' ratios (``paired_ratio``)
    and NumPy's figure the one it implies beside the kernel's median."""
    import autotune
    import tuning_db
    from autotune.final_timing import median_interval, paired_ratio, round_ratios

    task = autotune.Task(op, params, target="cpu")
    with tuning_db.Database(db, create=False) as opened:
        kernel = autotune.build(task, db=opened)
    (ours,), theirs = time_alternately(task, [kernel], rounds, min_repeats, min_time)
    mine, ratio = statistics.median(ours), paired_ratio(ours, theirs)
    interval = median_interval(round_ratios(ours, theirs)) or (float("nan"), float("nan"))
    return (task.flops / mine / 1e9, task.flops / (mine * ratio) / 1e9, ratio,
            task.flops / max(ours) / 1e9, task.flops / min(ours) / 1e9, *interval)


def time_alternately(task, kernels: list, rounds: int = 5, min_repeats: int = 15,
                     min_time: float = 0.3) -> tuple[list[list[float]], list[float]]:
    """Each of ``kernels`` (built for ``task``, checked here against its reference) and
    NumPy's equivalent timed alternately: (per kernel, its seconds in each round; NumPy's).
    Each round's figure is the median of its repeats, each after the arrays it reads and
    writes were evicted from the caches, and the arrays are
    placed anew for every round (the first round uses them where NumPy allocated them):
    the final timing's protocol (``interleaved_rounds``, extended as the confirmation is:
    ``until_precise``), with no pause between rounds."""
    import numpy as np

    from autotune.anchor import numpy_equivalent_on
    from autotune.final_timing import FinalTimingOptions, interleaved_rounds, placed_copies, until_precise
    from autotune.timing_protocol import SETTLE_S, anchor_with_flush, evicting_flush, time_round
    from autotune.verify import mismatch, reduction_length

    inputs = task.workload.random_inputs(seed=0)
    (reference,) = task.workload.reference(*inputs)
    c = np.empty(reference.shape, reference.dtype)
    for kernel in kernels:
        kernel(*inputs, c)
        problem = mismatch(c, reference, reduction_length(task.workload.outputs))
        assert problem is None, f"{kernel.config} computes a wrong result: {problem}"
    rng = random.Random(1)
    now: dict = {}

    def start_round(round_: int) -> None:
        arrays = [*inputs, c] if round_ == 0 else placed_copies([*inputs, c], rng)
        # Inputs the schedule packs at build time (dense's weights) are packed here, once per
        # round and untimed, as a user packs them once with the module's pack().
        prepared = [kernel.prepare(arrays) for kernel in kernels]
        now.update(arrays=arrays, prepared=prepared,  # alive while the kernels have their raw pointers
                   pointers=[[x.ctypes.data for x in p] for p in prepared],  # kernel()'s checks cost microseconds
                   flushes=[evicting_flush(p) for p in prepared],
                   anchor=anchor_with_flush(numpy_equivalent_on(task.workload, arrays[:-1]), arrays[:-1]))

    def one_round(fn, flush) -> float:
        return statistics.median(time_round(fn, (), min_repeats=min_repeats, max_repeats=1000, min_time=min_time,
                                            flush=flush))

    def time_kernel(i: int) -> float:
        return one_round(lambda: kernels[i].call_unchecked(now["pointers"][i]), now["flushes"][i])

    times = interleaved_rounds(len(kernels), time_kernel, lambda: one_round(*now["anchor"]), rounds,
                               settle=SETTLE_S, start_round=start_round,
                               **until_precise(vars(FinalTimingOptions(rounds=rounds))))
    if times.errors:
        raise SystemExit(f"re-timing failed: {times.errors[0]}")
    return times.candidates, times.anchor


def fresh_process_env() -> dict:
    """The environment of the command lines and re-timing processes a bench starts: this
    checkout importable, OpenBLAS's threads idled after a call as the measuring process
    idles them."""
    from autotune.timing_protocol import quiet_threads_env

    return quiet_threads_env(dict(os.environ, PYTHONPATH=os.pathsep.join(
        p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)))


def retime_in_fresh_process(op: str, params: dict, db: Path, env: dict) -> tuple[float, ...]:
    """``retime`` in a new process, as a user who opens the database later would."""
    proc = subprocess.run([sys.executable, __file__, "--op", op, "--params", json.dumps(params), "--retime", str(db)],
                          capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        raise SystemExit(f"re-timing {op} {params} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return tuple(map(float, proc.stdout.split()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--op", default="matmul", help=f"{' or '.join(OPS)} (the re-timing process: any op)")
    parser.add_argument("--shape", type=int, nargs=3, default=(1024, 1024, 1024), metavar=("M", "N", "K"))
    parser.add_argument("--trials", type=int, default=200)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--final", type=int, default=5, help="--final of the command line (0: none)")
    parser.add_argument("--rounds", type=int, default=None, help="--rounds of the command line (default: its own)")
    parser.add_argument("--tuner", default=None, help="--tuner of the command line (default: its own)")
    parser.add_argument("--keep", type=Path, metavar="DIR",
                        help="keep each seed's database in DIR (seedS.db) rather than a temporary directory")
    parser.add_argument("--retime", type=Path, help=argparse.SUPPRESS)  # the fresh process's part
    parser.add_argument("--params", help=argparse.SUPPRESS)  # its workload's params, as JSON
    args = parser.parse_args()
    shape = tuple(args.shape)
    if args.retime is None and args.op not in OPS:
        parser.error(f"--op must be one of {', '.join(OPS)}")
    m, n, k = shape
    params = dict(M=m, N=n, K=k, **(dict(bias=True, relu=True) if args.op == "dense" else {}))  # the CLI's defaults
    if args.retime is not None:
        print(*retime(args.op, json.loads(args.params) if args.params else params, args.retime))
        return
    reexec_without_blas_overrides()
    print(f"# {args.op} {'x'.join(map(str, shape))}, {args.trials} trials, --final {args.final}"
          f"{'' if args.rounds is None else f', --rounds {args.rounds}'}"
          f"{'' if args.tuner is None else f', --tuner {args.tuner}'}; "
          f"NumPy: {blas_description()}")
    env = fresh_process_env()
    print("| seed | CLI GFLOP/s (ours / NumPy) | CLI ratio (90% interval) | re-timed GFLOP/s (ours / NumPy) "
          "| ours, slowest-fastest round | re-timed ratio (90% interval) | CLI vs re-timed | tuning wall |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    gaps, inside = [], 0
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) if args.keep is None else args.keep
        folder.mkdir(parents=True, exist_ok=True)
        taken = [str(folder / f"seed{seed}.db") for seed in args.seeds if (folder / f"seed{seed}.db").exists()]
        if taken:  # the command line would resume those runs, not start new ones
            parser.error(f"--keep: {', '.join(taken)} exist already")
        for seed in args.seeds:
            db = folder / f"seed{seed}.db"
            reported, cli_ours, cli_numpy, wall, cli_interval = tune(args.op, params, args.trials, seed, args.final,
                                                                   db, env, args.rounds, args.tuner)
            ours, numpy_gflops, ratio, slowest, fastest, low, high = retime_in_fresh_process(args.op, params, db, env)
            gap = reported / ratio - 1.0
            gaps.append(abs(gap))
            inside += cli_interval is not None and cli_interval[0] <= ratio <= cli_interval[1]
            print(f"| {seed} | {cli_ours:.1f} / {cli_numpy:.1f} | {reported:.3f}x ({_span(cli_interval)}) | "
                  f"{ours:.1f} / {numpy_gflops:.1f} | {slowest:.0f}-{fastest:.0f} | "
                  f"{ratio:.3f}x ({_span((low, high))}) | {gap:+.1%} | {wall:.0f} s |", flush=True)
    print(f"largest gap: {max(gaps):.1%} (goal: within 5%); re-timed ratio inside the command line's "
          f"90% interval: {inside} of {len(gaps)}")


def _span(interval) -> str:
    """An interval as "low-high", or "none"."""
    if interval is None or any(x != x for x in interval):  # nan: too few rounds
        return "none"
    return f"{interval[0]:.3f}-{interval[1]:.3f}"


if __name__ == "__main__":
    main()
