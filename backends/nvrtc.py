"""NVRTC: CUDA C to PTX and CUBIN in-process, with ptxas's resource report. No GPU needed.

    result = compile_ptx(source, arch="sm_80")   # raises NVRTCError with the compiler log
    result.ptx, result.cubin, result.log
    result.kernels["kernel"].registers, .shared_bytes, .spill_stores, .stack_bytes

NVRTC is a library, not a driver feature: it compiles on machines without a GPU. Compiling
for a real architecture (``sm_XX``) makes it run ptxas too, and ``-Xptxas=-v`` makes ptxas
write each kernel's registers, shared memory and spills into the program log, which is
parsed here. Two ways to reach the library, tried in order:

1. CuPy's own binding, ``cupy.cuda.nvrtc`` (``pip install -e '.[cuda]'`` installs CuPy and
   the ``nvidia-cuda-nvrtc`` wheel it loads); importing it needs no GPU or driver;
2. ctypes on ``libnvrtc.so`` from the ``nvidia-cuda-nvrtc`` wheel (``nvidia/cu13/lib``),
   or the system's, so NVRTC works even where CuPy is not installed.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import functools
import glob
import importlib.util
import os
import re
from dataclasses import dataclass, field

#: Architecture compiled for when no GPU tells us better (A100; NVRTC 13 supports sm_75..sm_121).
DEFAULT_ARCH = "sm_80"


class NVRTCError(RuntimeError):
    """NVRTC rejected the source (``log`` holds the compiler's messages) or is not installed."""

    def __init__(self, message: str, log: str = ""):
        super().__init__(message)
        self.log = log


@dataclass(frozen=True)
class KernelResources:
    """What ptxas reports for one ``__global__`` function."""

    name: str
    registers: int = 0
    shared_bytes: int = 0
    stack_bytes: int = 0
    spill_stores: int = 0
    spill_loads: int = 0


@dataclass
class NVRTCResult:
    ptx: str
    cubin: bytes | None
    log: str
    arch: str
    kernels: dict[str, KernelResources] = field(default_factory=dict)


# ---------------------------------------------------------------- the library


class _CupyNVRTC:
    """NVRTC through CuPy's binding."""

    name = "cupy"

    def __init__(self):
        from cupy.cuda import nvrtc  # noqa: F401  (import error -> not available)

        self.nvrtc = nvrtc

    def version(self) -> tuple[int, int]:
        return tuple(self.nvrtc.getVersion())  # type: ignore[return-value]

    def compile(self, source: str, name: str, options: list[str]) -> tuple[bool, str, str, bytes | None]:
        nv = self.nvrtc
        prog = nv.createProgram(source, name, [], [])
        try:
            try:
                nv.compileProgram(prog, options)
            except nv.NVRTCError:
                return False, nv.getProgramLog(prog), "", None
            log = nv.getProgramLog(prog)
            ptx = nv.getPTX(prog)
            ptx = ptx.decode(errors="replace") if isinstance(ptx, bytes) else ptx
            try:
                cubin = bytes(nv.getCUBIN(prog))
            except (nv.NVRTCError, RuntimeError):  # a virtual arch (compute_XX) has no CUBIN
                cubin = None
            return True, log, ptx.rstrip("\0"), cubin
        finally:
            nv.destroyProgram(prog)


class _CtypesNVRTC:
    """NVRTC through ctypes on ``libnvrtc.so``."""

    name = "ctypes"

    def __init__(self, path: str):
        self.path = path
        lib = ctypes.CDLL(path)
        self.lib = lib
        p = ctypes.c_void_p
        for fn, args in {
            "nvrtcCreateProgram": [ctypes.POINTER(p), ctypes.c_char_p, ctypes.c_char_p, ctypes.c_int, p, p],
            "nvrtcCompileProgram": [p, ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)],
            "nvrtcDestroyProgram": [ctypes.POINTER(p)],
            "nvrtcGetProgramLogSize": [p, ctypes.POINTER(ctypes.c_size_t)],
            "nvrtcGetProgramLog": [p, ctypes.c_char_p],
            "nvrtcGetPTXSize": [p, ctypes.POINTER(ctypes.c_size_t)],
            "nvrtcGetPTX": [p, ctypes.c_char_p],
            "nvrtcGetCUBINSize": [p, ctypes.POINTER(ctypes.c_size_t)],
            "nvrtcGetCUBIN": [p, ctypes.c_char_p],
            "nvrtcVersion": [ctypes.POINTER(ctypes.c_int), ctypes.POINTER(ctypes.c_int)],
        }.items():
            getattr(lib, fn).argtypes = args
            getattr(lib, fn).restype = ctypes.c_int

    def version(self) -> tuple[int, int]:
        major, minor = ctypes.c_int(), ctypes.c_int()
        self.lib.nvrtcVersion(ctypes.byref(major), ctypes.byref(minor))
        return major.value, minor.value

    def _text(self, prog, size_fn, get_fn) -> bytes:
        size = ctypes.c_size_t()
        if size_fn(prog, ctypes.byref(size)) != 0:
            return b""
        buf = ctypes.create_string_buffer(size.value)
        if get_fn(prog, buf) != 0:
            return b""
        return buf.raw[: size.value]

    def compile(self, source: str, name: str, options: list[str]) -> tuple[bool, str, str, bytes | None]:
        lib = self.lib
        prog = ctypes.c_void_p()
        rc = lib.nvrtcCreateProgram(ctypes.byref(prog), source.encode(), name.encode(), 0, None, None)
        if rc != 0:
            raise NVRTCError(f"nvrtcCreateProgram failed with code {rc}")
        try:
            opts = (ctypes.c_char_p * len(options))(*[o.encode() for o in options])
            rc = lib.nvrtcCompileProgram(prog, len(options), opts)
            log = self._text(prog, lib.nvrtcGetProgramLogSize, lib.nvrtcGetProgramLog).decode(errors="replace")
            log = log.rstrip("\0")
            if rc != 0:
                return False, log, "", None
            ptx = self._text(prog, lib.nvrtcGetPTXSize, lib.nvrtcGetPTX).decode(errors="replace").rstrip("\0")
            cubin = self._text(prog, lib.nvrtcGetCUBINSize, lib.nvrtcGetCUBIN) or None
            return True, log, ptx, cubin
        finally:
            lib.nvrtcDestroyProgram(ctypes.byref(prog))


def _nvidia_roots() -> list[str]:
    """The folders of the ``nvidia`` namespace package (where NVIDIA's wheels install)."""
    try:
        spec = importlib.util.find_spec("nvidia")
    except (ImportError, ValueError):
        spec = None
    return list(spec.submodule_search_locations or []) if spec is not None else []


@functools.lru_cache(maxsize=None)
def header_dirs() -> tuple[str, ...]:
    """Folders holding the CUDA headers generated kernels include (``cuda_fp16.h``): the
    nvidia-cuda-runtime wheel's (``nvidia/cu13/include``), else ``$CUDA_PATH/include`` or
    ``/usr/local/cuda/include``; empty when none has them (then a float16 kernel fails to
    compile and says which header is missing)."""
    candidates = [d for root in _nvidia_roots() for d in sorted(glob.glob(os.path.join(root, "cu*", "include")))]
    candidates += [os.path.join(root, "cuda_runtime", "include") for root in _nvidia_roots()]
    candidates += [os.path.join(os.environ.get("CUDA_PATH", "/usr/local/cuda"), "include")]
    for d in candidates:
        if os.path.isfile(os.path.join(d, "cuda_fp16.h")):
            return (d,)
    return ()


def _wheel_library() -> str | None:
    """``libnvrtc.so*`` from the nvidia-cuda-nvrtc wheel (``nvidia/cu13/lib`` or ``nvidia/cuda_nvrtc/lib``)."""
    for root in _nvidia_roots():
        for pattern in ("cu*/lib/libnvrtc.so*", "cuda_nvrtc/lib/libnvrtc.so*"):
            hits = sorted(h for h in glob.glob(os.path.join(root, pattern)) if "builtins" not in h)
            if hits:
                return hits[-1]
    return ctypes.util.find_library("nvrtc")


@functools.lru_cache(maxsize=None)
def _library(prefer: str = "cupy"):
    """The first NVRTC binding that loads, or None."""
    order = ("cupy", "ctypes") if prefer == "cupy" else ("ctypes", "cupy")
    for kind in order:
        try:
            if kind == "cupy":
                return _CupyNVRTC()
            path = _wheel_library()
            if path:
                return _CtypesNVRTC(path)
        except (ImportError, OSError, AttributeError, ValueError):
            continue
    return None


def available() -> bool:
    """Whether NVRTC can be loaded here (no GPU needed)."""
    return _library() is not None


def version() -> tuple[int, int] | None:
    lib = _library()
    return None if lib is None else lib.version()


# ---------------------------------------------------------------- compile


def compile_ptx(source: str, arch: str = DEFAULT_ARCH, options=(), name: str = "kernel.cu",
                binding: str = "cupy") -> NVRTCResult:
    """Compile CUDA C ``source`` for ``arch`` (``sm_XX``); raises NVRTCError on any error.

    ``binding`` picks which NVRTC binding to try first ("cupy" or "ctypes").
    """
    lib = _library(binding)
    if lib is None:
        raise NVRTCError("NVRTC is not installed: pip install -e '.[cuda]' (cupy-cuda13x, nvidia-cuda-nvrtc)")
    if not re.fullmatch(r"sm_\d+[a-z]?", arch):
        raise NVRTCError(f"arch must look like 'sm_80', got {arch!r}")
    opts = [f"--gpu-architecture={arch}", "-Xptxas=-v", *options, *(f"--include-path={d}" for d in header_dirs())]
    ok, log, ptx, cubin = lib.compile(source, name, opts)
    if not ok:
        raise NVRTCError(f"NVRTC failed:\n{log.strip()[:4000]}", log)
    return NVRTCResult(ptx, cubin, log, arch, parse_ptxas_log(log))


_ENTRY = re.compile(r"Compiling entry function '([^']+)'")
_PROPS = re.compile(r"Function properties for (\S+)")
_STACK = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_USED = re.compile(r"Used (\d+) registers")
_SMEM = re.compile(r"(\d+) bytes smem")


def parse_ptxas_log(log: str) -> dict[str, KernelResources]:
    """Kernel name -> resources, from ptxas's ``-v`` lines in an NVRTC log."""
    found: dict[str, dict] = {}
    current = None
    for line in log.splitlines():
        m = _ENTRY.search(line) or _PROPS.search(line)
        if m:
            current = m.group(1)
            found.setdefault(current, {"name": current})
            continue
        if current is None:
            continue
        m = _STACK.search(line)
        if m:
            found[current].update(stack_bytes=int(m.group(1)), spill_stores=int(m.group(2)),
                                  spill_loads=int(m.group(3)))
        m = _USED.search(line)
        if m:
            found[current]["registers"] = int(m.group(1))
            s = _SMEM.search(line)
            if s:
                found[current]["shared_bytes"] = int(s.group(1))
    return {name: KernelResources(**fields) for name, fields in found.items()}
