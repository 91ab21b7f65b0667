"""The ``cuda_sim`` kind's backend: the GPU code path with the emulator as a fake device.

    target = parse_target("cuda_sim")          # or: autotune ... --target cuda --simulate
    backend = backend_for(target)              # SimulatedCudaBackend
    text = backend.generate_source(func)       # CUDA C, then the emulator's C (one bundle)
    path = backend.compile_source(text)        # NVRTC CUBIN + manifest + emulator + model

What it is for. The tuning loop on CUDA (proposals, NVRTC builds, measuring, the cost
model, the database, the command line, resuming, ``apply_best``) must run where there is
no GPU: in CI, on a laptop. This kind runs all of it. Every candidate is really
compiled by NVRTC for the preset's architecture (and rejected like on a GPU when ptxas
reports it over a limit), and really executed by ``backends.emulator`` against the
reference. Only its *time* is made up: ``simulated_seconds``, a deterministic analytic
model of the kernel (below), so that the loop has costs to rank and the cost model
something to learn.

Simulated times are not performance. Records of this kind are stored under the kind
``cuda_sim`` and the device ``simulated <GPU name>``, never next to real ones; the command
line prints them as simulated and never as GFLOP/s (``autotune.targets``:
``AutotuneParts.simulated``).

The model, per kernel (a roofline with occupancy): from the IR, per thread, the
arithmetic statements executed, the global and shared accesses, and the per-thread
(register) array elements; from ptxas, the registers per thread. Blocks per SM follow
from threads, registers and shared memory; waves from the blocks and the SMs. Time is
launch overhead plus the slowest of compute (statements at the preset's rate, slowed by
low occupancy, partial warps and few independent accumulators per thread), global traffic and
shared traffic, times the partial last wave. It ranks what real GPUs reward (more work
per thread, enough warps, shared-memory reuse) and nothing more.
"""
from __future__ import annotations

import ctypes
import json
import math
import os
import threading
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from schedule import ir
from schedule.passes import StmtVisitor

from . import emulator
from .cpu import compile_source as compile_c
from .cuda import CudaBackend, check_resources, generate_source, lower_program
from .cuda_launch import LaunchManifest
from .errors import BuildError, ResourceLimitError
from .registry import BackendInfo

#: Separates the CUDA C of a bundle from the emulator's C (a line of its own).
EMULATOR_SEPARATOR = "//@@ autotune-emulator: the emulation of the kernels above (C) @@"
#: The line that carries the model's inputs from the IR, right before the separator.
WORK_HEADER = "// autotune-simulated-work: "
SIM_SUFFIX = ".sim.json"

#: Model constants: statements per SM per second at full occupancy, global and shared
#: bytes per second, and the fixed cost of a launch.
STATEMENTS_PER_SM_S = 64 * 1.5e9
GLOBAL_BYTES_S = 3.0e12
SHARED_BYTES_PER_SM_S = 128 * 1.5e9
LAUNCH_S = 4e-6
#: Independent accumulators a thread needs to hide the arithmetic pipeline's latency.
ILP_NEEDED = 8
MAX_WARPS_PER_SM = 64
MAX_BLOCKS_PER_SM = 32


@dataclass(frozen=True)
class KernelWork:
    """What one thread of a kernel does, counted on the IR (loop trip counts multiplied)."""

    statements: int
    global_bytes: int
    shared_bytes: int
    local_elements: int


class _WorkCounter(StmtVisitor):
    def __init__(self):
        super().__init__()
        self.statements = self.global_bytes = self.shared_bytes = self.local_elements = 0

    def _trips(self) -> int:
        n = 1
        for loop in self.loops:
            if loop.thread_tag is None:
                n *= ir.max_trip_count(loop.extent) or 1
        return n

    def visit_Allocate(self, s: ir.Allocate) -> None:
        if s.buffer.scope == "local":
            self.local_elements += math.prod(s.buffer.shape)
        super().visit_Allocate(s)

    def visit_BufferStore(self, s: ir.BufferStore) -> None:
        trips = self._trips()
        self.statements += trips
        accesses = [s.buffer] + [e.buffer for e in _loads(s.value)]
        for buf in accesses:
            size = np.dtype(_np_dtype(buf.dtype)).itemsize
            if buf.scope == "shared":
                self.shared_bytes += trips * size
            elif buf.scope == "global":
                self.global_bytes += trips * size
        super().visit_BufferStore(s)


def _np_dtype(dtype: str):
    from te import dtypes

    return dtypes.numpy_dtype(dtype)


def _loads(e):
    """Every ``BufferLoad`` in expression ``e``."""
    stack = [e]
    while stack:
        node = stack.pop()
        if isinstance(node, ir.BufferLoad):
            yield node
        stack.extend(node.children())


def kernel_work(kernel) -> KernelWork:
    counter = _WorkCounter()
    counter.visit(kernel.body)
    return KernelWork(counter.statements, counter.global_bytes, counter.shared_bytes, counter.local_elements)


def simulated_seconds(manifest: LaunchManifest, works: list[KernelWork], registers: dict[str, int],
                      shared_per_block: list[int], facts) -> float:
    """The model's seconds for one launch of every kernel (the module docstring)."""
    total = 0.0
    for launch, work, shared in zip(manifest.kernels, works, shared_per_block):
        threads = launch.threads
        blocks = math.prod(launch.grid)
        warps = math.ceil(threads / facts.warp_size)
        regs = max(registers.get(launch.name, 32), 16)
        per_sm = min(MAX_BLOCKS_PER_SM, MAX_WARPS_PER_SM // max(warps, 1) or 1,
                     facts.registers_per_sm // max(regs * warps * facts.warp_size, 1) or 1,
                     facts.shared_bytes_per_sm // shared if shared else MAX_BLOCKS_PER_SM)
        per_sm = max(per_sm, 1)
        concurrent = per_sm * facts.sm_count
        waves = blocks / concurrent
        tail = math.ceil(waves) / waves if waves > 0 else 1.0
        occupancy = min(1.0, per_sm * warps / (MAX_WARPS_PER_SM / 2))
        lanes = threads / (warps * facts.warp_size)  # a partial warp idles its other lanes
        ilp = min(1.0, max(work.local_elements, 1) / ILP_NEEDED)
        active_sms = min(facts.sm_count, blocks)
        compute = work.statements * threads * blocks / (STATEMENTS_PER_SM_S * active_sms * occupancy * ilp * lanes)
        memory = work.global_bytes * threads * blocks / GLOBAL_BYTES_S
        shared_traffic = work.shared_bytes * threads * blocks / (SHARED_BYTES_PER_SM_S * active_sms)
        total += LAUNCH_S + max(compute, memory, shared_traffic) * tail
    return total


@dataclass(frozen=True)
class SimulatedKernels:
    """What the simulated device's measuring process needs beside the CUBIN: the
    emulator's shared object, its function, and the model's seconds per launch."""

    emulator: str
    function: str
    seconds: float

    @classmethod
    def read_beside(cls, artifact: "str | Path") -> "SimulatedKernels":
        artifact = Path(artifact)
        return cls(**json.loads(artifact.with_name(artifact.name + SIM_SUFFIX).read_text()))


class SimulatedCudaBackend(CudaBackend):
    """CUDA C compiled by NVRTC as on a GPU, run by the emulator, timed by the model."""

    def generate_source(self, func) -> str:
        program = lower_program(func)
        reason = check_resources(program, self.limits)
        if reason is not None:
            raise ResourceLimitError(reason)
        work = {"function": program.name,
                "kernels": [asdict(kernel_work(k)) for k in program.kernels],
                "shared": [k.shared_bytes for k in program.kernels]}
        return (generate_source(program) + WORK_HEADER + json.dumps(work, separators=(",", ":")) + "\n"
                + EMULATOR_SEPARATOR + "\n" + emulator.generate_source(program))

    def compile_source(self, source: str, timeout: float | None = 60.0) -> Path:
        cuda_part, sep, emulated = source.partition(EMULATOR_SEPARATOR + "\n")
        if not sep:
            raise BuildError("a cuda_sim source is a bundle of CUDA C and emulator C "
                             "(SimulatedCudaBackend.generate_source makes one)")
        cubin = self.cubin_path(source)  # the bundle's: its emulator and model live beside it
        sim_path = cubin.with_name(cubin.name + SIM_SUFFIX)
        if cubin.exists() and sim_path.exists():
            return cubin
        result = self.run_nvrtc(cuda_part)  # for real: the limits as on a GPU
        shared_object = compile_c(emulated, emulator.EMU_FLAGS, timeout)
        work_line = cuda_part.rstrip("\n").rsplit("\n", 1)[-1]
        work = json.loads(work_line[len(WORK_HEADER):])
        seconds = simulated_seconds(LaunchManifest.from_source(cuda_part),
                                    [KernelWork(**w) for w in work["kernels"]],
                                    {name: k.registers for name, k in result.kernels.items()},
                                    work["shared"], self.target.facts)
        partial = sim_path.with_name(f"{sim_path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
        partial.write_text(json.dumps({"emulator": str(shared_object), "function": work["function"],
                                       "seconds": seconds}))
        partial.replace(sim_path)
        return self.store_cubin(cubin, LaunchManifest.from_source(cuda_part), result)

    def load(self, artifact, func, source: str | None = None):
        return emulator.build_program(lower_program(func))

    def build(self, func):
        return emulator.build_program(lower_program(func))

    def describe(self) -> BackendInfo:
        info = super().describe()
        return BackendInfo(f"simulated {self.target.facts.name}", f"{info.compiler}; emulator (gcc)",
                           info.flags + " (times from an analytic model)")


class EmulatedLauncher:
    """The emulator's shared object of one artifact, called with host arrays (the user's
    arguments; workspace buffers are added, filled with NaN like the emulator's own)."""

    def __init__(self, artifact: "str | Path"):
        from te import dtypes

        self.manifest = LaunchManifest.read_beside(artifact)
        self.sim = SimulatedKernels.read_beside(artifact)
        self._lib = ctypes.CDLL(self.sim.emulator)
        n = len(self.manifest.params) + len(self.manifest.workspace)
        self._fn = getattr(self._lib, self.sim.function)
        self._fn.argtypes = [ctypes.c_void_p] * n
        self._fn.restype = None
        self._fault = self._lib.at_emu_fault
        self._fault.restype = ctypes.c_char_p
        self._lib.at_emu_reset.restype = None
        self._workspace = [(a.shape, dtypes.numpy_dtype(a.dtype), emulator.poison_value(a.dtype))
                           for a in self.manifest.workspace]

    def __call__(self, arrays: list[np.ndarray]) -> None:
        """Run every kernel on ``arrays``; ``emulator.EmulationFault`` on an out-of-bounds access."""
        workspace = [np.full(shape, poison, dtype=dt) for shape, dt, poison in self._workspace]
        everything = list(arrays) + workspace
        self._lib.at_emu_reset()
        self._fn(*[a.ctypes.data for a in everything])
        fault = self._fault()
        if fault:
            raise emulator.EmulationFault(fault.decode())
