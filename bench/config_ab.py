"""Configs of one matmul (or dense + bias + relu) timed against NumPy call by call, for A/B
comparisons on a noisy host.

    python bench/config_ab.py --shape 128 4096 4096 a.json b.json
    python bench/config_ab.py --shape 1024 1024 1024 --calls 40 --threads 1 a.json a.json=edited.c
    python bench/config_ab.py --op dense --shape 128 4096 4096 --pause 0 a.json b.json

Each argument is a config as JSON (``autotune log show --json`` prints one; the format of
``Config.to_json``), built through the space; ``CONFIG=SOURCE`` builds that config's lowered
function from a C source edited by hand instead (to try a change before the generator
makes it). Every kernel is checked against NumPy first. Weights a config packs at build
time (dense's ``prepacked:W``) are packed once, before the timing.

Why another protocol. On a shared host, stretches of a second or more run at half speed
(a whole round of one kernel at 83-92 GFLOP/s, the next at 130-176); a median over rounds
then moves by 10 % between runs of the same two kernels. Here NumPy and the kernels take
turns one call at a time, ``--calls`` times each, after a pause (``--pause``: the other
library's idle threads stop spinning, as in the final timing), and the table gives each one's
fastest call and 10th and 50th percentiles, and the ratio to NumPy's at the same
percentile. The fastest call and the 10th percentile are what the kernel does when the host
lets it: between two runs of the same kernels they agree within a few percent where the
medians do not. The order of the calls changes every round (a seeded shuffle), so that no
kernel always follows the same one. The last column pairs each kernel with the first one
named: the median over rounds of the first one's time over its own in the same round, so
a slow stretch, which lasts longer than a round, slows both sides of each ratio alike.
They are for choosing between variants; the figures a run reports come from the final
timing (``bench/final_figures.py``).

The pause has a cost of its own on a virtual machine whose idle CPUs halt: the first
parallel region after it waits until the other CPU is running again (an OpenMP region
after 20 ms of sleep took milliseconds to start on the host ``bench/RESULTS.md``
describes), and a kernel that splits its loop between the threads in fixed halves waits
with it. ``--pause 0`` times them back to back instead (OpenBLAS's threads then slow the
next kernel less, since they sleep at once: ``QUIET_THREADS_ENV``).
"""
from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parents[1]), str(Path(__file__).resolve().parent)]
import anchor  # noqa: E402

#: Percentiles of each one's calls that the table prints.
PERCENTILES = (0.0, 0.1, 0.5)


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[int(p * (len(ordered) - 1))]


def build(task, spec: str):
    """The kernel of ``spec``: a config JSON file, or ``CONFIG=SOURCE`` (that config's
    function compiled from the C source ``SOURCE``)."""
    import backends
    from backends import cpu
    from schedule.config import Config

    config_path, _, source_path = spec.partition("=")
    config = Config.from_json(Path(config_path).read_text())
    if not source_path:
        s, args = task.space.apply(config)
        return backends.build(s, args, target="cpu")
    source = Path(source_path).read_text()
    return cpu.CPUModule(task.lower(config), source, cpu.compile_source(source))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("kernels", nargs="+", metavar="CONFIG[=SOURCE]")
    parser.add_argument("--op", choices=("matmul", "dense"), default="matmul",
                        help="matmul, or dense with bias and relu (NumPy composed as its anchor)")
    parser.add_argument("--shape", type=int, nargs=3, default=(1024, 1024, 1024), metavar=("M", "N", "K"))
    parser.add_argument("--calls", type=int, default=40, help="calls of each, in turn")
    parser.add_argument("--pause", type=float, default=0.02, help="seconds before each call")
    parser.add_argument("--threads", type=int, help="OMP_NUM_THREADS and OPENBLAS_NUM_THREADS (default: all cores)")
    args = parser.parse_args()
    if args.threads is not None and os.environ.get("OMP_NUM_THREADS") != str(args.threads):
        os.environ.update(OMP_NUM_THREADS=str(args.threads), OPENBLAS_NUM_THREADS=str(args.threads))
        os.execv(sys.executable, [sys.executable, *sys.argv])
    anchor.reexec_without_blas_overrides(quiet_threads=True)  # OpenBLAS idles its threads after a call

    import numpy as np

    import te
    from autotune.anchor import numpy_equivalent_on
    from autotune.task import Task
    from autotune.verify import mismatch
    from schedule.config import ConfigError

    m, n, k = args.shape
    params = dict(M=m, N=n, K=k) if args.op == "matmul" else dict(M=m, N=n, K=k, bias=True, relu=True)
    task = Task.from_workload(te.create_workload(args.op, **params), "cpu")
    rng = np.random.default_rng(0)
    inputs = [rng.standard_normal(t.shape, dtype=np.float32) for t in task.workload.inputs]
    (out,) = [np.empty(t.shape, np.float32) for t in task.workload.outputs]
    numpy_call = numpy_equivalent_on(task.workload, inputs)
    reference = numpy_call().copy()
    calls = [numpy_call]
    packed = []  # each kernel's arrays (weights packed at build time: packed now, once), alive while it runs
    for spec in args.kernels:
        try:
            kernel = build(task, spec)
        except ConfigError as e:
            raise SystemExit(f"{spec}: {e}")
        arrays = kernel.prepare(inputs + [out])
        kernel.check_args(arrays)
        packed.append(arrays)
        pointers = [a.ctypes.data for a in arrays]
        kernel.call_unchecked(pointers)
        problem = mismatch(out, reference, k)
        if problem is not None:
            raise SystemExit(f"{spec} computes a wrong result: {problem}")
        calls.append(lambda kernel=kernel, pointers=pointers: kernel.call_unchecked(pointers))
    seconds: list[list[float]] = [[] for _ in calls]
    order = random.Random(0)
    for _ in range(args.calls):
        # A new order every round: the call after NumPy's, or after a given kernel, would
        # otherwise always be the same one, and so would whatever that position costs.
        for i in order.sample(range(len(calls)), len(calls)):
            time.sleep(args.pause)
            start = time.perf_counter()
            calls[i]()
            seconds[i].append(time.perf_counter() - start)

    print(f"# {args.op} {m}x{n}x{k}, {args.calls} calls each, threads {os.environ.get('OMP_NUM_THREADS', 'all')}; "
          f"NumPy: {anchor.blas_description()}")
    print("| kernel | " + " | ".join(f"{'fastest' if p == 0 else f'p{int(p * 100)}'} GFLOP/s (ratio)"
                                      for p in PERCENTILES) + f" | paired, over {args.kernels[0]} |")
    print("| --- |" + " --- |" * (len(PERCENTILES) + 1))
    for name, times in zip(["NumPy"] + args.kernels, seconds):
        cells = [f"{task.flops / percentile(times, p) / 1e9:.1f} ({percentile(seconds[0], p) / percentile(times, p):.3f}x)"
                 for p in PERCENTILES]
        paired = statistics.median(first / mine for first, mine in zip(seconds[1], times))
        print(f"| {name} | " + " | ".join(cells) + f" | {paired:.3f}x |")


if __name__ == "__main__":
    main()
