"""How far above NumPy can any kernel get on this machine? The ceiling of the ratio
against NumPy for each workload of the GEMM family's goals, from two floors measured here.

    python bench/ceilings.py
    python bench/ceilings.py --only gemv dense-1024

A kernel cannot finish before both of its floors:
- the compute floor: its flops at the CPU's measured fp32 peak (``autotune.peak``: chains of
  vector FMAs on every core, the loop no generated kernel can beat);
- the memory floor: the bytes it must move at least (every input read once, every output
  written once) at the streaming bandwidth measured here (every core summing a buffer four
  times the last-level cache; reading is the faster direction, so the floor is low).

NumPy (its OpenBLAS, the overrides unset, the kernel printed) is timed with the anchor's
protocol (``timing_protocol.time_round``: its arrays evicted from the caches before every
repeat, the median of a round, the fastest of ``--rounds`` rounds). The ceiling is NumPy's seconds over
the larger floor: a goal above it cannot be met on this machine by any kernel, ours or
another library's. The table prints each goal beside its ceiling.
"""
from __future__ import annotations

import argparse
import ctypes
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "bench")]

from anchor import blas_description, reexec_without_blas_overrides  # noqa: E402

#: name -> (op, workload parameters, the goal's ratio against NumPy). The goals are the
#: GEMM family's (matmul and its odd shapes against np.matmul, dense + bias + relu
#: against NumPy composed). The odd shapes also share a goal for their median.
WORKLOADS = {
    "matmul-1024": ("matmul", dict(M=1024, N=1024, K=1024), 1.0),
    "matmul-1000": ("matmul", dict(M=1000, N=1000, K=1000), 1.0),
    "matmul-127x1023x511": ("matmul", dict(M=127, N=1023, K=511), 1.0),
    "matmul-128x4096x4096": ("matmul", dict(M=128, N=4096, K=4096), 1.0),
    "matmul-4096x64x4096": ("matmul", dict(M=4096, N=64, K=4096), 1.0),
    "gemv": ("matmul", dict(M=1, N=4096, K=4096), 1.0),
    "dense-1024": ("dense", dict(M=1024, N=1024, K=1024), 1.3),
    "dense-128x4096x4096": ("dense", dict(M=128, N=4096, K=4096), 1.3),
}
#: The odd shapes, and the goal for the median of their ratios: each ratio is at most its
#: ceiling, so their median is at most the median of the ceilings.
ODD_SHAPES = ("matmul-1000", "matmul-127x1023x511", "matmul-128x4096x4096", "matmul-4096x64x4096", "gemv")
ODD_MEDIAN_GOAL = 1.2

_STREAM_SOURCE = """#include <stdint.h>
/* Every thread sums its share of the buffer: the streaming read bandwidth of all cores. */
float stream_read(const float* restrict buffer, int64_t n) {
    float total = 0.0f;
    #pragma omp parallel for reduction(+:total) schedule(static)
    for (int64_t i = 0; i < n; ++i) total += buffer[i];
    return total;
}
"""


def stream_bandwidth(facts, rounds: int) -> float:
    """Bytes per second all cores read from memory (the fastest of ``rounds`` medians),
    compiled with the target's own flags so it vectorizes as the kernels do."""
    import numpy as np

    from autotune.timing_protocol import evicting_flush
    from backends.cpu import cflags, compile_source
    from schedule.targets.cpu import read_caches

    lib = ctypes.CDLL(str(compile_source(_STREAM_SOURCE, cflags(facts.isa_flags))))
    lib.stream_read.argtypes = (ctypes.c_void_p, ctypes.c_int64)
    lib.stream_read.restype = ctypes.c_float
    buffer = np.ones(max(4 * max(read_caches().values()), 64 << 20) // 4, dtype=np.float32)
    flush = evicting_flush([buffer])
    medians = []
    for _ in range(rounds):
        seconds = []
        for _ in range(9):
            flush()
            t0 = time.perf_counter()
            lib.stream_read(buffer.ctypes.data, buffer.size)
            seconds.append(time.perf_counter() - t0)
        medians.append(statistics.median(seconds))
    return buffer.nbytes / min(medians)


def numpy_seconds(task, rounds: int) -> float:
    """NumPy's equivalent of ``task`` with the anchor's protocol: the fastest round's median."""
    from autotune.anchor import numpy_equivalent_on
    from autotune.runner import TimingOptions
    from autotune.timing_protocol import anchor_with_flush, fastest_round

    inputs = task.workload.random_inputs(seed=0)
    anchor, flush = anchor_with_flush(numpy_equivalent_on(task.workload, inputs), inputs)
    timing = TimingOptions(rounds=rounds, min_repeats=15, min_time=0.3, max_repeats=1000)
    return fastest_round(anchor, timing, flush=flush).fastest


def compulsory_bytes(task) -> int:
    """Every input read once and every output written once."""
    import numpy as np

    return sum(int(np.prod(t.shape)) * np.dtype(t.dtype).itemsize
               for t in (*task.workload.inputs, *task.workload.outputs))


def main() -> None:
    reexec_without_blas_overrides()
    import autotune
    from autotune.peak import measure_cpu_peak

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", nargs="+", choices=sorted(WORKLOADS), default=list(WORKLOADS))
    parser.add_argument("--rounds", type=int, default=3, help="rounds of NumPy's and the bandwidth's timing")
    args = parser.parse_args()

    facts = autotune.Task("matmul", dict(M=8, N=8, K=8), target="cpu").target.facts
    peak = max((measure_cpu_peak(facts) for _ in range(3)), key=lambda p: p.gflops)
    bandwidth = stream_bandwidth(facts, args.rounds)
    print(f"peak: {peak.describe()}")
    print(f"memory: {bandwidth / 1e9:.1f} GB/s streaming read, {peak.cores} threads")
    print(f"NumPy: {blas_description()}")
    print()
    print("| workload | NumPy GFLOP/s | NumPy's share of peak | compute / memory floor (ms) | NumPy (ms) "
          "| ceiling of the ratio | goal |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    ceilings = {}
    for name in args.only:
        op, params, goal = WORKLOADS[name]
        task = autotune.Task(op, params, target="cpu")
        seconds = numpy_seconds(task, args.rounds)
        compute_floor = task.flops / (peak.gflops * 1e9)
        memory_floor = compulsory_bytes(task) / bandwidth
        ceiling = ceilings[name] = seconds / max(compute_floor, memory_floor)
        gflops = task.flops / seconds / 1e9
        print(f"| {name} | {gflops:.1f} | {peak.share(gflops):.0%} | {compute_floor * 1e3:.2f} / "
              f"{memory_floor * 1e3:.2f} | {seconds * 1e3:.2f} | {ceiling:.2f}x | {goal:.1f}x"
              f"{'' if ceiling >= goal else ' (above the ceiling)'} |", flush=True)
    if all(name in ceilings for name in ODD_SHAPES):
        median = statistics.median(ceilings[name] for name in ODD_SHAPES)
        print(f"\nodd shapes: the median of their ceilings is {median:.2f}x; the goal for the median of "
              f"their ratios is {ODD_MEDIAN_GOAL:.1f}x{'' if median >= ODD_MEDIAN_GOAL else ', above it'}")


if __name__ == "__main__":
    main()
