"""GPU timing in the manner of Triton's ``do_bench``: CUDA events, time budgets, L2 flushed.

    times = do_bench(fn)                 # seconds per call of fn, one per repeat
    statistics.median(times)

1. one call (compiles/loads lazily), then five calls timed together to estimate the cost;
2. warm-up calls for ``warmup_ms`` and repeats for ``rep_ms`` (at least ``min_repeats``);
3. before each repeat a buffer twice the size of the device's L2 cache
   (``getDeviceProperties(dev)["l2CacheSize"]``) is zeroed, so every repeat starts with a
   cold L2, and the memset sits *outside* the pair of events around the call;
4. all events are read after one synchronisation: no host round trip inside the loop.

The caller keeps the median (``autotune.measure`` stores the spread too). Needs CuPy and
a GPU; importing this module needs neither.
"""
from __future__ import annotations

import functools


@functools.lru_cache(maxsize=None)
def l2_cache_bytes(device: int = 0) -> int:
    import cupy

    return int(cupy.cuda.runtime.getDeviceProperties(device)["l2CacheSize"])


_FLUSH: dict = {}


def _flush_buffer(device: int):
    """A device buffer of twice the L2 size (kept for the process: allocating it costs more)."""
    import cupy

    buf = _FLUSH.get(device)
    if buf is None:
        buf = cupy.empty(max(2 * l2_cache_bytes(device), 1 << 20), dtype=cupy.uint8)
        _FLUSH[device] = buf
    return buf


def do_bench(fn, warmup_ms: float = 25.0, rep_ms: float = 100.0, min_repeats: int = 5,
             max_repeats: int = 1000, flush_l2: bool = True, give_up_above: float | None = None) -> list[float]:
    """Seconds per call of ``fn`` (which launches work on the current stream), per repeat.

    ``give_up_above`` (seconds): when the estimate of step 1 is already slower, stop there
    and return it as the one repeat (a candidate too slow to win, ranked by that reading).
    """
    import cupy

    device = cupy.cuda.Device().id
    cache = _flush_buffer(device) if flush_l2 else None
    fn()
    cupy.cuda.Device().synchronize()
    start, end = cupy.cuda.Event(), cupy.cuda.Event()
    start.record()
    for _ in range(5):
        if cache is not None:
            cache.fill(0)
        fn()
    end.record()
    end.synchronize()
    estimate_ms = max(cupy.cuda.get_elapsed_time(start, end) / 5, 1e-4)
    if give_up_above is not None and estimate_ms / 1e3 > give_up_above:
        return [estimate_ms / 1e3]
    n_warmup = max(1, int(warmup_ms / estimate_ms))
    n_repeat = max(min_repeats, min(max_repeats, int(rep_ms / estimate_ms)))
    for _ in range(n_warmup):
        fn()
    starts = [cupy.cuda.Event() for _ in range(n_repeat)]
    ends = [cupy.cuda.Event() for _ in range(n_repeat)]
    for s, e in zip(starts, ends):
        if cache is not None:
            cache.fill(0)  # outside the timed region
        s.record()
        fn()
        e.record()
    ends[-1].synchronize()
    return [cupy.cuda.get_elapsed_time(s, e) / 1e3 for s, e in zip(starts, ends)]
