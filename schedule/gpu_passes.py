"""The GPU side of lowering, re-exported: the passes live in ``schedule.passes``.

Kept for code that imports the GPU program types from here (``GPULimits`` in the GPU space).
"""
from .passes import (  # noqa: F401
    BLOCK_TAGS, THREAD_TAGS, VTHREAD, GPUError, GPUKernel, GPULimits, GPUProgram, lower_gpu,
)
