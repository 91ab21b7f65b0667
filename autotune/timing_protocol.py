"""The timing protocol shared by candidates and anchors, so their figures compare.

One round: a warm-up call, then repeats until both ``min_repeats`` and ``min_time``
are reached (at most ``max_repeats``); each repeat starts with the arrays the kernel
reads and writes evicted from the caches (``evicting_flush``) and is long enough (several
calls) to sit well above the clock's resolution. A round's cost
is the median of its repeats; of several rounds, seconds apart, the fastest is kept:
noise on a shared machine only ever slows a kernel down (see ``autotune.runner``).

The measuring process (``runner_worker``) times candidates with ``time_round`` and the
runner spreads their rounds over the batch; an anchor (``autotune.anchor``) runs all
its rounds in one go with ``fastest_round``, pausing between them.
"""
from __future__ import annotations

import functools
import statistics
import time
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

#: Shortest stretch of time one repeat measures.
MIN_REPEAT_S = 2e-3
#: Seconds between an anchor's rounds: a neighbour's burst of load lasts about that long.
ROUND_PAUSE_S = 0.5
#: Environment of a process that times kernels and an anchor in turn. After each call
#: OpenBLAS's threads spin for 2^28 cycles (about 0.1 s) before they sleep, holding a
#: core that the next kernel timed needs (``bench/RESULTS.md`` has the slowdown). With the
#: shortest timeout they sleep at once; OpenBLAS's own speed is unchanged (its threads
#: wake per call). Set where the user has not set it.
QUIET_THREADS_ENV = {"OPENBLAS_THREAD_TIMEOUT": "4"}
#: Seconds to wait when the anchor and the candidates take turns: the OpenMP threads of
#: a kernel spin a few milliseconds after it returns, and slowed NumPy's next call.
SETTLE_S = 0.05


def quiet_threads_env(env: dict) -> dict:
    """``env`` with ``QUIET_THREADS_ENV`` added where it does not set those variables."""
    return {**QUIET_THREADS_ENV, **env}


def time_round(fn: Callable, args: tuple, *, min_repeats: int, max_repeats: int, min_time: float,
               flush: Callable[[], object], best_cost: float | None = None, slow_factor: float = 3.0,
               clock: Callable[[], float] = time.perf_counter, warmed_up: float | None = None) -> list[float]:
    """Seconds per call of ``fn(*args)``, one entry per repeat of one round.

    The round starts with a warm-up call. A caller that has just made a call (the
    measuring process's verifying call) passes its seconds as ``warmed_up``: a call of at
    least ``MIN_REPEAT_S`` then stands in for the warm-up (a shorter kernel's first call
    is mostly cold start, and a warm-up costs it nothing). A first call ``slow_factor``
    times slower than ``best_cost`` ends the round (``[first]``): it cannot win, and that
    one timing ranks it.
    """
    if warmed_up is None or warmed_up < MIN_REPEAT_S:
        t0 = clock()
        fn(*args)  # warm-up
        first = clock() - t0
    else:
        first = warmed_up
    if best_cost is not None and first > slow_factor * best_cost:
        return [first]
    number = max(1, int(MIN_REPEAT_S / max(first, 1e-9)))
    costs: list[float] = []
    start = clock()
    while len(costs) < max_repeats and (len(costs) < min_repeats or clock() - start < min_time):
        flush()
        t0 = clock()
        for _ in range(number):
            fn(*args)
        costs.append((clock() - t0) / number)
    return costs


def evicting_flush(arrays: Sequence[np.ndarray]) -> Callable[[], None]:
    """The flush before each repeat of a kernel that reads and writes ``arrays``: those arrays
    evicted from every cache level (``backends.cache_eviction``), so the repeat reads them
    from memory; where eviction is unavailable, a buffer larger than the last-level cache
    written (``CacheFlusher``, one per process)."""
    arrays = list(arrays)
    return _evicting(lambda: arrays)


def anchor_with_flush(fn: Callable[[], object], inputs: Sequence[np.ndarray]
                      ) -> tuple[Callable[[], None], Callable[[], None]]:
    """An anchor (``fn()``: a library's version of the workload on ``inputs``) made ready for
    ``time_round``: ``fn`` wrapped to keep what its last call returned (its output array, or
    a list of them), and the flush that evicts ``inputs`` and that output before each repeat,
    as a candidate's inputs and outputs are (``evicting_flush``). Buffers the anchor keeps
    for its intermediate steps stay cached, like a candidate's scratch buffers."""
    inputs = list(inputs)
    last: list[np.ndarray] = []

    def call() -> None:
        result = fn()
        last[:] = [a for a in (result if isinstance(result, (list, tuple)) else [result])
                   if isinstance(a, np.ndarray)]

    return call, _evicting(lambda: [*inputs, *last])


def _evicting(arrays_now: Callable[[], list[np.ndarray]]) -> Callable[[], None]:
    """A flush evicting what ``arrays_now()`` returns when it runs, or the shared buffer flush."""
    from backends.cache_eviction import evict, eviction_available

    if not eviction_available():
        return _shared_cache_flusher()
    return lambda: evict(arrays_now())


@functools.lru_cache(maxsize=1)
def _shared_cache_flusher() -> "CacheFlusher":
    return CacheFlusher()


class CacheFlusher:
    """Writes a buffer larger than the last-level cache, so a repeat starts with cold caches:
    the flush where the arrays cannot be evicted one by one (``evicting_flush``)."""

    def __init__(self, cache_bytes: int | None = None):
        if cache_bytes is None:
            from schedule.targets.cpu import read_caches

            cache_bytes = max(read_caches().values())
        self.buffer = np.zeros(min(cache_bytes * 3 // 2, 256 << 20) // 8, dtype=np.float64)

    def __call__(self) -> None:
        self.buffer += 1.0


@dataclass(frozen=True)
class Rounds:
    """The median seconds of each round, in the order measured."""

    medians: tuple[float, ...]

    @property
    def fastest(self) -> float:
        return min(self.medians)


def fastest_round(fn: Callable[[], object], timing, *, flush: Callable[[], object],
                  clock: Callable[[], float] = time.perf_counter, sleep: Callable[[float], object] = time.sleep,
                  pause: float = ROUND_PAUSE_S) -> Rounds:
    """``timing.rounds`` rounds of ``fn()`` (a ``runner.TimingOptions``), ``pause`` seconds apart."""
    medians = []
    for n in range(timing.rounds):
        if n:
            sleep(pause)
        costs = time_round(fn, (), min_repeats=timing.min_repeats, max_repeats=timing.max_repeats,
                           min_time=timing.min_time, flush=flush, clock=clock)
        medians.append(statistics.median(costs))
    return Rounds(tuple(medians))
