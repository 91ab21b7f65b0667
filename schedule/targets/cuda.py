"""The ``cuda`` target kind: the limits and sizes of an NVIDIA GPU, from the device or a preset.

    parse_target("cuda")         # GPU 0 when CuPy sees one, else the sm_90 preset (DEFAULT_PRESET)
    parse_target("cuda:sm_80")   # an A100's facts (also "cuda:a100")
    parse_target("cuda:h200")    # an H200's facts (sm_90)

Plain ``cuda`` without a usable GPU stands for an H100-class device, so that kernels are
compiled (NVRTC) and checked against the limits of a current data-center GPU; name a
preset to target another one. ``max_shared_bytes`` of the schedule space is the static
shared memory one block may declare (48 KiB on every architecture here; more needs the
dynamic opt-in, which the generated kernels do not use), so it does not vary by preset.
"""
from __future__ import annotations

import ctypes
import functools
import sys
from dataclasses import dataclass, replace
from typing import ClassVar

from .base import Target, TargetKind, register_target_kind

KIB = 1024
MIB = 1024 * 1024
#: What ``cuda`` means where no GPU is visible.
DEFAULT_PRESET = "sm_90"


@dataclass(frozen=True)
class CudaFacts:
    """What the CUDA backend and space may know about a GPU."""

    name: str                          # e.g. "NVIDIA H100 80GB HBM3"
    compute_capability: tuple[int, int]
    sm_count: int
    l2_bytes: int
    shared_bytes_per_sm: int
    shared_bytes_per_block_optin: int  # dynamic shared memory a block may opt in to
    shared_bytes_per_block: int = 48 * KIB   # static shared memory per block
    registers_per_sm: int = 65536
    registers_per_block: int = 65536
    max_registers_per_thread: int = 255
    max_threads_per_block: int = 1024
    warp_size: int = 32

    is_gpu: ClassVar[bool] = True

    @property
    def arch(self) -> str:
        """The NVRTC architecture, e.g. "sm_90"."""
        major, minor = self.compute_capability
        return f"sm_{major}{minor}"


_A100 = CudaFacts("NVIDIA A100-SXM4-80GB", (8, 0), sm_count=108, l2_bytes=40 * MIB,
                  shared_bytes_per_sm=164 * KIB, shared_bytes_per_block_optin=163 * KIB)
_A10 = CudaFacts("NVIDIA A10", (8, 6), sm_count=72, l2_bytes=6 * MIB,
                 shared_bytes_per_sm=100 * KIB, shared_bytes_per_block_optin=99 * KIB)
_L4 = CudaFacts("NVIDIA L4", (8, 9), sm_count=58, l2_bytes=48 * MIB,
                shared_bytes_per_sm=100 * KIB, shared_bytes_per_block_optin=99 * KIB)
_H100 = CudaFacts("NVIDIA H100 80GB HBM3", (9, 0), sm_count=132, l2_bytes=50 * MIB,
                  shared_bytes_per_sm=228 * KIB, shared_bytes_per_block_optin=227 * KIB)
_T4 = CudaFacts("Tesla T4", (7, 5), sm_count=40, l2_bytes=4 * MIB,
                shared_bytes_per_sm=64 * KIB, shared_bytes_per_block_optin=64 * KIB,
                registers_per_block=65536, max_threads_per_block=1024)

#: Preset name -> facts. Architecture names stand for the data-center GPU of that architecture.
PRESETS = {
    "sm_75": _T4, "t4": _T4,
    "sm_80": _A100, "a100": _A100,
    "sm_86": _A10, "a10": _A10,
    "sm_89": _L4, "l4": _L4,
    "sm_90": _H100, "h100": _H100,
    "h200": replace(_H100, name="NVIDIA H200"),
}


def facts_from_properties(props: dict) -> CudaFacts:
    """CudaFacts from ``cupy.cuda.runtime.getDeviceProperties`` (a dict of cudaDeviceProp fields)."""
    name = props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])
    return CudaFacts(
        name=name, compute_capability=(int(props["major"]), int(props["minor"])),
        sm_count=int(props["multiProcessorCount"]), l2_bytes=int(props["l2CacheSize"]),
        shared_bytes_per_sm=int(props["sharedMemPerMultiprocessor"]),
        shared_bytes_per_block_optin=int(props.get("sharedMemPerBlockOptin", props["sharedMemPerBlock"])),
        shared_bytes_per_block=int(props["sharedMemPerBlock"]),
        registers_per_sm=int(props["regsPerMultiprocessor"]), registers_per_block=int(props["regsPerBlock"]),
        max_threads_per_block=int(props["maxThreadsPerBlock"]), warp_size=int(props["warpSize"]),
    )


#: The NVIDIA driver's CUDA library, which every use of a GPU through CuPy loads.
DRIVER_LIBRARY = "nvcuda.dll" if sys.platform == "win32" else "libcuda.so.1"


@functools.lru_cache(maxsize=1)
def driver_present() -> bool:
    """Whether the NVIDIA driver's CUDA library loads. Without it no GPU can be used, and
    finding that out costs a failed ``dlopen`` rather than importing CuPy (over a second,
    which every ``autotune`` command choosing its target automatically would pay)."""
    try:
        ctypes.CDLL(DRIVER_LIBRARY)
    except OSError:
        return False
    return True


@functools.lru_cache(maxsize=1)
def device_facts() -> CudaFacts | None:
    """The facts of GPU 0 when CuPy imports and sees one, else None (read once per process)."""
    if not driver_present():
        return None
    try:
        import cupy

        if cupy.cuda.runtime.getDeviceCount() < 1:
            return None
        return facts_from_properties(cupy.cuda.runtime.getDeviceProperties(0))
    except Exception:  # ImportError, CUDARuntimeError (no driver), ...
        return None


class CudaKind(TargetKind):
    """``cuda``: CUDA C compiled by NVRTC, launched through CuPy (``GPUConfigSpace``)."""

    name = "cuda"
    presets = PRESETS
    pipeline = "gpu"

    def detect(self) -> CudaFacts:
        return device_facts() or PRESETS[DEFAULT_PRESET]

    def preset_facts(self, name: str) -> CudaFacts:
        return PRESETS[name]

    def space_class(self) -> type:
        from ..space_gpu import GPUConfigSpace

        return GPUConfigSpace

    def space_options(self, target: Target) -> dict:
        return {"limits": gpu_limits(target.facts)}


def gpu_limits(facts: CudaFacts):
    """The ``schedule.passes.GPULimits`` a config must respect on a GPU with ``facts``
    (the limits no fact decides keep GPULimits' defaults)."""
    from ..passes import GPULimits

    return GPULimits(max_threads_per_block=facts.max_threads_per_block,
                     max_shared_bytes=facts.shared_bytes_per_block,
                     max_registers_per_block=facts.registers_per_block,
                     max_registers_per_thread=facts.max_registers_per_thread)


CUDA = register_target_kind(CudaKind())


class SimulatedCudaKind(CudaKind):
    """``cuda_sim``: the ``cuda`` code path with the emulator as a fake device (``backends.
    cuda_sim``): the same space, presets and NVRTC builds; kernels run on the CPU emulator
    and their times come from an analytic model. Its facts are a preset's, never the
    device's (``cuda_sim`` alone is ``DEFAULT_PRESET``), so a simulated run is the same on
    every machine."""

    name = "cuda_sim"

    def detect(self) -> CudaFacts:
        return PRESETS[DEFAULT_PRESET]


CUDA_SIM = register_target_kind(SimulatedCudaKind())
