"""GPU-mapping features: the block and thread extents a kernel launches with.

    per store   block_prod, thread_prod   extents of the blockIdx / threadIdx loops around it
    global      gpu_blocks, gpu_threads   the largest such products in the kernel

Shared-memory bytes and barriers are counted by the walk with the other allocations
and statements (``g.shared_bytes``, ``g.barriers``); CPU kernels have none of these,
so every value here is 0 for them.
"""
from __future__ import annotations

from .layout import log_scale, prod0
from .loops import Loop


def mapping_values(loops: list[Loop]) -> list[float]:
    """``block_prod``, ``thread_prod`` of one store's enclosing loops."""
    return [log_scale(prod0(lp.extent for lp in loops if lp.is_block)),
            log_scale(prod0(lp.extent for lp in loops if lp.is_thread))]


class LaunchExtents:
    """The largest block and thread products seen at any thread-bound loop of a kernel."""

    def __init__(self):
        self.blocks = 0
        self.threads = 0

    def see(self, stack: list[Loop]) -> None:
        """Called at each thread-bound loop, with the loops enclosing (and including) it."""
        blocks = prod0(lp.extent for lp in stack if lp.is_block)
        threads = prod0(lp.extent for lp in stack if lp.is_thread)
        self.blocks, self.threads = max(self.blocks, blocks), max(self.threads, threads)

    def values(self) -> list[float]:
        """``gpu_blocks``, ``gpu_threads``."""
        return [log_scale(self.blocks), log_scale(self.threads)]
