"""Why a kernel did not build, as types (callers branch on the type, never on message text).

    BuildError          the compiler or the code generator rejected it (compile_error)
    BuildTimeout        the compiler took longer than allowed (timeout)
    ResourceLimitError  it breaks a limit of the device: threads, shared memory, registers (invalid)
    BuildLimitError     it breaks a limit of the build: too much source, too much unrolling (invalid)
"""
from __future__ import annotations


class BuildError(RuntimeError):
    """The C/CUDA compiler or the code generator rejected a kernel (the message carries why)."""


class BuildTimeout(BuildError):
    """The compiler did not finish within the allowed time."""


class ResourceLimitError(BuildError):
    """The kernel needs more of a device resource than the target has (a config to skip, not a bug)."""


class BuildLimitError(ResourceLimitError):
    """The candidate is too big to be worth compiling (source size, unrolled copies): it is
    pruned before the compiler starts, so a pathological compile never holds a core."""
