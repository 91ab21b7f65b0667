"""What the GPU passes produce: kernels with their launch shapes, and the program of them.

    program = lower_gpu(schedule.lower(s, [A, B, C]))
    for k in program.kernels:
        k.name, k.grid, k.block, k.body          # one __global__ function each

What a thread-bound loop means inside a kernel: ``for t in range(n) (threadIdx.x)`` is "t is this
thread's ``threadIdx.x``; the body runs if t < n". A loop nested in it and bound to the same tag
is the same hardware index (the cooperative fetch inside the owner's thread loop). Code outside
every thread loop runs in every thread, redundantly. Stages computed inside a kernel with
``global`` or ``local`` scope live in per-thread arrays; ``shared`` ones in block-wide memory.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Callable

from te import dtypes
from te.errors import TEError

from .. import ir
from ..ir import Allocate, Buffer, LoweredFunc, Stmt

BLOCK_TAGS = ("blockIdx.x", "blockIdx.y", "blockIdx.z")
THREAD_TAGS = ("threadIdx.x", "threadIdx.y", "threadIdx.z")
VTHREAD = "vthread"


class GPUError(TEError):
    """A schedule that cannot run as CUDA kernels (the message says what to change)."""


@dataclass(frozen=True)
class GPULimits:
    """Resource limits a GPU config must respect (defaults: any CUDA GPU since Volta).

    ``max_shared_bytes`` is the static shared memory one block may declare; the local
    limit counts accumulator elements per thread (beyond it registers spill).
    """

    max_threads_per_block: int = 1024
    max_shared_bytes: int = 48 * 1024
    max_registers_per_block: int = 65536
    max_registers_per_thread: int = 255
    max_local_elements: int = 256
    max_vthreads: int = 8


@dataclass(frozen=True)
class GPUKernel:
    """One ``__global__`` function: its body and its launch shape per tag."""

    name: str
    body: Stmt
    launch: dict  # tag -> extent, for the blockIdx.* and threadIdx.* tags used

    @property
    def grid(self) -> tuple[int, int, int]:
        return tuple(self.launch.get(t, 1) for t in BLOCK_TAGS)  # type: ignore[return-value]

    @property
    def block(self) -> tuple[int, int, int]:
        return tuple(self.launch.get(t, 1) for t in THREAD_TAGS)  # type: ignore[return-value]

    @property
    def threads(self) -> int:
        x, y, z = self.block
        return x * y * z

    @property
    def shared_bytes(self) -> int:
        """Static shared memory the kernel declares (every allocation, as CUDA reserves them)."""
        return sum(nbytes(s.buffer) for s in ir.walk(self.body)
                   if isinstance(s, Allocate) and s.buffer.scope == "shared")


@dataclass(frozen=True)
class GPUProgram:
    """Kernels launched in order; each takes ``params`` then ``workspace`` as arguments."""

    name: str
    params: tuple[Buffer, ...]
    workspace: tuple[Buffer, ...]
    kernels: tuple[GPUKernel, ...]

    @property
    def kernel_params(self) -> tuple[Buffer, ...]:
        return self.params + self.workspace

    def kernel_func(self, kernel: GPUKernel) -> LoweredFunc:
        """``kernel`` as a LoweredFunc over every kernel parameter (what the printer takes)."""
        return LoweredFunc(kernel.name, self.kernel_params, kernel.body)

    def map_kernels(self, fn: Callable[[GPUKernel], GPUKernel]) -> "GPUProgram":
        """The program with every kernel replaced by ``fn(kernel)``."""
        return dataclasses.replace(self, kernels=tuple(fn(k) for k in self.kernels))

    def map_bodies(self, fn: Callable[[Stmt], Stmt]) -> "GPUProgram":
        """The program with every kernel body replaced by ``fn(body)``."""
        return self.map_kernels(lambda k: dataclasses.replace(k, body=fn(k.body)))

    def __str__(self):
        parts = []
        for k in self.kernels:
            launch = f"grid={k.grid} block={k.block}"
            parts.append(f"# {launch}\n{self.kernel_func(k)}")
        return "\n".join(parts)


def nbytes(buf: Buffer) -> int:
    """Bytes ``buf`` occupies."""
    return buf.size * dtypes.nbytes(buf.dtype)
