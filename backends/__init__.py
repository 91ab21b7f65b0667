"""Code generation from the loop IR, and running the result.

    f = backends.build(s, [A, B, C], target="cpu")   # or "cuda", "cpu:avx2", a Target
    f(a, b, c)          # NumPy arrays (CuPy arrays on cuda)
    print(f.source)     # the generated C / CUDA C
    backends.backend_for("cuda:sm_80").describe()

Each target kind has one backend (``registry.Backend``: generate_source, compile_source,
load, build, describe); ``build`` dispatches through it. The built-in kinds register
here, each backend module imported only when a target of its kind is first used.
"""
from __future__ import annotations

from schedule import lower
from schedule.stage import Schedule
from schedule.targets import Target

from .cpu import CPUModule
from .errors import BuildError, BuildTimeout, ResourceLimitError
from .registry import Backend, BackendInfo, backend_for, backend_kinds, register_backend

__all__ = ["build", "backend_for", "register_backend", "backend_kinds", "Backend", "BackendInfo", "BuildError",
           "BuildTimeout", "ResourceLimitError", "CPUModule"]


def _cpu_backend(target: Target) -> Backend:
    from .cpu import CpuBackend

    return CpuBackend(target)


def _cuda_backend(target: Target) -> Backend:
    from .cuda import CudaBackend

    return CudaBackend(target)


def _cuda_sim_backend(target: Target) -> Backend:
    from .cuda_sim import SimulatedCudaBackend

    return SimulatedCudaBackend(target)


register_backend("cpu", _cpu_backend)
register_backend("cuda", _cuda_backend)
register_backend("cuda_sim", _cuda_sim_backend)


def build(s: Schedule, args, target: "str | Target" = "cpu", name: str = "kernel"):
    """Lower schedule ``s`` for ``args`` and compile it for ``target`` (a spec or a Target)."""
    backend = backend_for(target)  # an unknown target fails before lowering
    return backend.build(lower(s, args, name=name))
