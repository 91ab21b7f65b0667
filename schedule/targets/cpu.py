"""The ``cpu`` target kind: facts of the host CPU (ISA, vector width, cores, caches, flags).

    parse_target("cpu")          # detected here: /proc/cpuinfo flags, affinity, sysfs caches
    parse_target("cpu:avx2")     # the avx2 preset: 256-bit vectors, -mavx2 -mfma
    parse_target("cpu:avx512")   # the avx512 preset: 512-bit vectors, -mavx512f ...

Plain ``cpu`` compiles with ``-march=native`` (the code runs on this CPU model only; the
tuning records say which model) and, on x86, ``-mprefer-vector-width`` of the detected
width: gcc's tuning for several AVX-512 CPUs (Ice Lake and Sapphire Rapids servers, and
any model it maps to one, such as a virtual machine's) vectorizes ``omp simd`` loops at
256 bits, so a register tile sized for 16 lanes would run at half the FMA width.

A preset replaces the detected ISA, vector width and ISA flags, and keeps the detected
cores, caches and model name: it says what code to generate, not which machine runs it
(``missing_instructions`` says when this machine cannot run it). ``detect_cpu_facts``
takes the texts it parses as arguments, so it can be checked against any machine's
``/proc/cpuinfo``.
"""
from __future__ import annotations

import functools
import os
import platform
from dataclasses import dataclass, replace
from typing import ClassVar

from .base import TargetKind, register_target_kind

CPUINFO = "/proc/cpuinfo"
CACHE_DIR = "/sys/devices/system/cpu/cpu0/cache"
#: Cache sizes assumed where sysfs does not say (typical of a recent x86 server core).
FALLBACK_CACHES = {"l1d": 32 * 1024, "l2": 1024 * 1024, "l3": 32 * 1024 * 1024}
#: The L1 data cache's associativity where sysfs does not say (8: Zen 2-4, Skylake).
FALLBACK_L1D_WAYS = 8

#: ISA name -> (vector bits, compiler flags of its preset), most capable first. ``detect``
#: picks the first whose cpuinfo flags are all present.
ISAS = {
    "avx512": (512, ("avx512f", "avx512bw", "avx512dq", "avx512vl"),
               ("-mavx512f", "-mavx512bw", "-mavx512dq", "-mavx512vl", "-mavx2", "-mfma", "-mprefer-vector-width=512")),
    "avx2": (256, ("avx2", "fma"), ("-mavx2", "-mfma")),
    "avx": (256, ("avx",), ("-mavx",)),
    "sse": (128, ("sse2",), ("-msse2",)),
}
GENERIC_ISA = ("generic", 128)
#: Flags of a CPU target built for the machine it runs on (``native_flags`` adds the width).
NATIVE_FLAGS = ("-march=native",)


#: cpuinfo flag -> what ``-march=native`` must not enable where the CPU has it. AVX512-FP16
#: (Sapphire Rapids and later): gcc 12 compiles a float16 max of a tail loop to a
#: zero-masked store (``vmovsh ... {z}`` to memory) that the assembler rejects, so every
#: float16 kernel with a relu failed to build; without it float16 computes through F16C
#: conversions, as on every other x86 CPU.
NATIVE_EXCLUSIONS = {"avx512_fp16": ("-mno-avx512fp16",)}


def native_flags(isa: str, vector_bits: int, cpu_flags: frozenset[str] = frozenset()) -> tuple[str, ...]:
    """``-march=native``, on x86 the vector width the schedule space assumes
    (``-mprefer-vector-width``: see the module docstring), and the exclusions of
    ``NATIVE_EXCLUSIONS`` that ``cpu_flags`` (cpuinfo's) call for."""
    if isa not in ISAS:
        return NATIVE_FLAGS
    excluded = tuple(f for flag, flags in NATIVE_EXCLUSIONS.items() if flag in cpu_flags for f in flags)
    return NATIVE_FLAGS + (f"-mprefer-vector-width={vector_bits}",) + excluded


@dataclass(frozen=True)
class CpuFacts:
    """What the CPU backend and space may know about a CPU."""

    isa: str                   # "avx512", "avx2", "avx", "sse" or "generic"
    vector_bits: int           # widest SIMD register
    cores: int                 # cores this process may use
    l1d_bytes: int
    l2_bytes: int
    l3_bytes: int
    isa_flags: tuple[str, ...]  # compiler flags selecting the ISA, e.g. ("-march=native",)
    model: str = ""            # the CPU's model name
    l1d_ways: int = FALLBACK_L1D_WAYS  # the L1 data cache's associativity

    @property
    def l1d_set_span(self) -> int:
        """Bytes after which addresses map to the same L1 set again (size / ways: 4 KiB on
        x86 cores of 32 KiB 8-way or 48 KiB 12-way): rows of a matrix this many bytes apart
        compete for the same ``l1d_ways`` lines."""
        return max(64, self.l1d_bytes // max(1, self.l1d_ways))

    is_gpu: ClassVar[bool] = False

    @property
    def vector_bytes(self) -> int:
        return self.vector_bits // 8

    @property
    def vector_registers(self) -> int:
        """SIMD registers the compiler can allocate: 32 with AVX-512 (zmm0-31), else 16."""
        return 32 if self.isa == "avx512" else 16


def _cpuinfo_field(text: str, names: tuple[str, ...]) -> str:
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip() in names:
            return value.strip()
    return ""


def _isa_of(flags: set[str]) -> tuple[str, int]:
    for name, (bits, required, _) in ISAS.items():
        if all(f in flags for f in required):
            return name, bits
    return GENERIC_ISA


def _size_bytes(text: str) -> int:
    text = text.strip().upper()
    mult = {"K": 1024, "M": 1024 ** 2, "G": 1024 ** 3}.get(text[-1:], 1)
    return int(text.rstrip("KMG") or 0) * mult


def _sysfs_caches(cache_dir: str):
    """(level, type, directory) of each cache sysfs lists under ``cache_dir`` (none where it
    cannot be read)."""
    try:
        entries = sorted(os.listdir(cache_dir))
    except OSError:
        return
    for entry in entries:
        path = os.path.join(cache_dir, entry)
        try:
            level = open(os.path.join(path, "level")).read().strip()
            kind = open(os.path.join(path, "type")).read().strip()
        except OSError:
            continue
        yield level, kind, path


def read_caches(cache_dir: str = CACHE_DIR) -> dict[str, int]:
    """{"l1d", "l2", "l3"} -> bytes from sysfs ``index*/{level,type,size}``; fallbacks where absent."""
    found: dict[str, int] = {}
    for level, kind, path in _sysfs_caches(cache_dir):
        if kind == "Instruction":
            continue
        try:
            size = _size_bytes(open(os.path.join(path, "size")).read())
        except (OSError, ValueError):
            continue
        name = "l1d" if level == "1" else f"l{level}"
        if name in FALLBACK_CACHES and size:
            found[name] = max(found.get(name, 0), size)
    return {name: found.get(name, default) for name, default in FALLBACK_CACHES.items()}


def read_l1d_ways(cache_dir: str = CACHE_DIR) -> int:
    """The L1 data cache's associativity from sysfs ``index*/ways_of_associativity``;
    ``FALLBACK_L1D_WAYS`` where absent."""
    for level, kind, path in _sysfs_caches(cache_dir):
        if level != "1" or kind == "Instruction":
            continue
        try:
            ways = int(open(os.path.join(path, "ways_of_associativity")).read().strip())
        except (OSError, ValueError):
            continue
        if ways > 0:
            return ways
    return FALLBACK_L1D_WAYS


def usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


#: Where ``CpuFacts.model`` continues after the model name with the family and model numbers.
FAMILY_MARK = " (family "


def bare_model_name(model: str) -> str:
    """``CpuFacts.model`` without the family and model numbers: the model name alone, which
    is all that earlier versions stored as the device."""
    return model.split(FAMILY_MARK, 1)[0]


def detect_cpu_facts(cpuinfo: str | None = None, caches: dict[str, int] | None = None,
                     cores: int | None = None, l1d_ways: int | None = None) -> CpuFacts:
    """The facts of the CPU described by ``cpuinfo`` (text of /proc/cpuinfo; None: read it).

    ``caches`` ({"l1d", "l2", "l3"} -> bytes; None: read sysfs), ``cores`` (None: this
    process's CPU affinity) and ``l1d_ways`` (None: sysfs's where ``caches`` is read there,
    else ``FALLBACK_L1D_WAYS``) are taken as given, so a test can describe any machine.
    """
    if l1d_ways is None:
        l1d_ways = read_l1d_ways() if caches is None else FALLBACK_L1D_WAYS
    if cpuinfo is None:
        try:
            with open(CPUINFO) as f:
                cpuinfo = f.read()
        except OSError:
            cpuinfo = ""
    flags = set(_cpuinfo_field(cpuinfo, ("flags", "Features")).split())
    isa, bits = _isa_of(flags)
    caches = {**FALLBACK_CACHES, **(read_caches() if caches is None else caches)}
    model = _cpuinfo_field(cpuinfo, ("model name", "Model name")) or platform.processor() or platform.machine()
    family, number = _cpuinfo_field(cpuinfo, ("cpu family",)), _cpuinfo_field(cpuinfo, ("model",))
    if family and number:  # a virtual machine may say only "AMD EPYC" for Zen 3 and Zen 4 alike
        model = f"{model}{FAMILY_MARK}{family}, model {number})"
    return CpuFacts(isa=isa, vector_bits=bits, cores=cores or usable_cores(), l1d_bytes=caches["l1d"],
                    l2_bytes=caches["l2"], l3_bytes=caches["l3"], isa_flags=native_flags(isa, bits, frozenset(flags)),
                    model=model, l1d_ways=l1d_ways)


@functools.lru_cache(maxsize=1)
def host_cpu_facts() -> CpuFacts:
    """``detect_cpu_facts()`` of this machine, read once per process."""
    return detect_cpu_facts()


def preset(facts: CpuFacts, isa: str) -> CpuFacts:
    """``facts`` with the ISA, vector width and flags of preset ``isa``."""
    bits, _, flags = ISAS[isa]
    return replace(facts, isa=isa, vector_bits=bits, isa_flags=flags)


def compiled_isa(facts: CpuFacts) -> str | None:
    """The ISA whose preset flags ``facts`` compile with, or None where they are another
    set (``-march=native``: whatever the machine that compiles has)."""
    return next((name for name, (_, _, flags) in ISAS.items() if tuple(facts.isa_flags) == flags), None)


def missing_instructions(facts: CpuFacts, host: CpuFacts) -> str | None:
    """Why kernels compiled for ``facts`` cannot run on ``host``, or None: a preset's ISA
    wider than the host's (``cpu:avx512`` on an AVX2-only CPU) would stop every kernel with
    an illegal instruction. Flags of no preset (``-march=native``) run on the CPU that
    compiles them."""
    isa = compiled_isa(facts)
    ranks = list(ISAS)  # widest first
    runs_here = ranks[ranks.index(host.isa):] if host.isa in ranks else []  # the host's ISA and narrower
    if isa is None or isa in runs_here:
        return None
    runnable = [f"cpu:{name}" for name in CpuKind.presets if name in runs_here]
    return (f"this CPU ({host.model or 'unnamed'}) lacks {isa} (it has {host.isa}): every kernel built for "
            f"it would stop with an illegal instruction; use the target cpu (this CPU's own instructions)"
            + (f" or {' or '.join(runnable)}" if runnable else ""))


class CpuKind(TargetKind):
    """``cpu``: C compiled by gcc with OpenMP, run in a measuring process (``ConfigSpace``)."""

    name = "cpu"
    presets = {"avx2": "avx2", "avx512": "avx512"}

    def detect(self) -> CpuFacts:
        return host_cpu_facts()

    def preset_facts(self, name: str) -> CpuFacts:
        return preset(host_cpu_facts(), self.presets[name])

    def space_class(self) -> type:
        from ..space import ConfigSpace

        return ConfigSpace

    def space_options(self, target) -> dict:
        from ..space import RegisterFile

        return {"registers": RegisterFile(target.facts.vector_bytes, target.facts.vector_registers)}


CPU = register_target_kind(CpuKind())
