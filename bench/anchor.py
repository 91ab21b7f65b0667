"""Benchmark helpers: the NumPy anchor and robust timing, from ``autotune.anchor``.

OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE slow NumPy's OpenBLAS on some machines; benchmarks
that compare against NumPy call ``reexec_without_blas_overrides()`` first, which restarts
the script once without them, and print ``blas_description()`` so the kernel is on record.
"""
from __future__ import annotations

from autotune.anchor import describe_blas as blas_description  # noqa: F401
from autotune.anchor import median_seconds, reexec_without_blas_overrides  # noqa: F401


def numpy_matmul_gflops(M: int, N: int, K: int, dtype: str = "float32", min_time: float = 1.0) -> float:
    """NumPy's GFLOP/s on an M x K by K x N matmul (median of repeated warm calls)."""
    import numpy as np

    rng = np.random.default_rng(0)
    a = rng.standard_normal((M, K)).astype(dtype)
    b = rng.standard_normal((K, N)).astype(dtype)
    c = np.empty((M, N), dtype=dtype)
    t = median_seconds(lambda: np.matmul(a, b, out=c), min_time=min_time)
    return 2.0 * M * N * K / t / 1e9


def seconds_per_call(fn, min_time: float = 0.2) -> float:
    """Mean seconds per call of ``fn`` over at least ``min_time`` and 5 calls, after one
    untimed call (a whole network or a module of several kernels: no per-call flush)."""
    import time

    fn()
    calls, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < min_time or calls < 5:
        fn()
        calls += 1
    return (time.perf_counter() - t0) / calls


def alternating_medians(calls, rounds: int, flush) -> list[list[float]]:
    """Per call of ``calls``, its seconds in each of ``rounds`` rounds that take the calls in
    turn: each the median of repeats after ``flush()`` (``timing_protocol.evicting_flush``),
    after a pause in which another library's idle threads stop spinning."""
    import statistics
    import time

    from autotune.timing_protocol import time_round

    out: list[list[float]] = [[] for _ in calls]
    for _ in range(rounds):
        for times, call in zip(out, calls):
            time.sleep(0.05)
            times.append(statistics.median(time_round(call, (), min_repeats=10, max_repeats=200,
                                                      min_time=0.2, flush=flush)))
    return out
