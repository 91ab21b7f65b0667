"""Evict arrays from every level of the CPU's caches, line by line.

    evict([a, b, c])         # the next access to any of them goes to memory
    eviction_available()     # False where no cache-line flush instruction is known
    prepare()                # build the routine now (a measuring process, at setup)

Why: every timed repeat should start with the kernel's data in memory, not left in the
caches by the repeat before. Writing a buffer larger than the last-level cache does that
too (``autotune.timing_protocol.CacheFlusher``), but it takes as long as the last-level
cache is large, and a virtual machine may report the whole socket's: on such a host the
flush took longer than the kernel it preceded, for every repeat of every trial, and left
the other CPU idle long enough to halt (``bench/RESULTS.md``, "Evicting the kernel's
arrays"). Evicting what the kernel touches costs as long as its arrays are large, the
same on every host. The caches keep everything else, as they would for a real caller:
the kernel's code, its own scratch buffers, the library's workspace.

How: x86-64's ``clflushopt`` (``clflush`` where the compiler does not target it) on every
64-byte line of each array's memory span, then a fence, in a tiny C routine compiled once
with the kernels' compiler and flags and cached like them (``backends.cpu.compile_source``).
"""
from __future__ import annotations

import ctypes
import functools
import platform
from typing import Iterable

import numpy as np

#: The routine: every cache line of [p, p + n) written back (if dirty) and invalidated in
#: every cache level of every core, then a fence so that the flushes finish before the caller
#: goes on (``clflushopt`` is weakly ordered).
EVICT_SOURCE = r"""
#include <stddef.h>
#include <stdint.h>
#include <immintrin.h>

void autotune_evict(const char *p, size_t n) {
    uintptr_t line = (uintptr_t)p & ~(uintptr_t)63, end = (uintptr_t)p + n;
    for (; line < end; line += 64) {
#ifdef __CLFLUSHOPT__
        _mm_clflushopt((void *)line);
#else
        _mm_clflush((void *)line);
#endif
    }
    _mm_mfence();
}
"""

#: Machines whose cache-line flush the routine above uses.
X86_64 = ("x86_64", "amd64")


def eviction_available() -> bool:
    """Whether ``evict`` works on this machine (an x86-64 CPU; the compiler is the kernels')."""
    return platform.machine().lower() in X86_64


@functools.lru_cache(maxsize=1)
def _routine():
    """The compiled routine (built on first use, then read from the kernel cache)."""
    from .cpu import compile_source

    fn = ctypes.CDLL(str(compile_source(EVICT_SOURCE))).autotune_evict
    fn.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    fn.restype = None
    return fn


def prepare() -> None:
    """Build (or load) the routine now, where it is available, so that the first eviction
    costs no compile: a measuring process calls it while it sets up, before any candidate's
    timeout runs."""
    if eviction_available():
        _routine()


def evict(arrays: Iterable[np.ndarray]) -> None:
    """Evict the memory of each array (its whole span: views, transposes and strided arrays
    included) from every cache level. Raises ``RuntimeError`` where ``eviction_available``
    is False."""
    if not eviction_available():
        raise RuntimeError(f"no cache-line eviction on {platform.machine()!r} (x86-64 only)")
    routine = _routine()
    for a in arrays:
        if a.size:
            low, high = memory_span(a)
            routine(low, high - low)


def memory_span(a: np.ndarray) -> tuple[int, int]:
    """The first and one past the last byte address ``a`` touches (negative strides too)."""
    low = high = a.ctypes.data
    for extent, stride in zip(a.shape, a.strides):
        reach = (extent - 1) * stride
        low, high = (low + reach, high) if reach < 0 else (low, high + reach)
    return low, high + a.itemsize
