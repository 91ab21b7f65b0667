"""Shared helpers for benchmarks: a clean NumPy anchor and robust timing.

OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE slow NumPy's OpenBLAS on some machines; benchmarks
that compare against NumPy call ``reexec_without_blas_overrides()`` first, which restarts
the script once without them, and print ``blas_description()`` so the kernel is on record.
"""
from __future__ import annotations

import os
import statistics
import sys
import time

BLAS_OVERRIDES = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")


def reexec_without_blas_overrides() -> None:
    """Restart this process without the OpenBLAS overrides (once)."""
    if any(v in os.environ for v in BLAS_OVERRIDES):
        env = {k: v for k, v in os.environ.items() if k not in BLAS_OVERRIDES}
        os.execve(sys.executable, [sys.executable, *sys.argv], env)


def blas_description() -> str:
    """Which BLAS library, kernel (core type) and thread count NumPy uses."""
    import numpy  # noqa: F401  (loads the BLAS so threadpoolctl can see it)
    from threadpoolctl import threadpool_info

    for info in threadpool_info():
        if info.get("user_api") == "blas":
            return (f"{info.get('internal_api')} {info.get('version')} "
                    f"kernel={info.get('architecture')} threads={info.get('num_threads')}")
    return "no BLAS found by threadpoolctl"


def median_seconds(fn, min_time: float = 1.0, min_repeats: int = 5, warmup: int = 2) -> tuple[float, list[float]]:
    """Median wall time of ``fn()`` over repeats lasting at least ``min_time`` in total."""
    for _ in range(warmup):
        fn()
    times: list[float] = []
    start = time.perf_counter()
    while len(times) < min_repeats or time.perf_counter() - start < min_time:
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), times


def numpy_matmul_gflops(M: int, N: int, K: int, dtype="float32", min_time: float = 1.0) -> float:
    import numpy as np

    rng = np.random.default_rng(0)
    a = rng.standard_normal((M, K)).astype(dtype)
    b = rng.standard_normal((K, N)).astype(dtype)
    c = np.empty((M, N), dtype=dtype)
    t, _ = median_seconds(lambda: np.matmul(a, b, out=c), min_time=min_time)
    return 2.0 * M * N * K / t / 1e9
