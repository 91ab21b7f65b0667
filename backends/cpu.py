"""The CPU backend: C source from the loop IR, gcc, ctypes.

    source = generate_source(func)           # C text (OpenMP pragmas for parallel/simd)
    path = compile_source(source)            # gcc -O3 -march=native ..., cached on disk
    module = CPUModule(func, source, path)   # callable with NumPy arrays
    CpuBackend(parse_target("cpu:avx2"))     # the same behind backends.registry.Backend,
                                             # with the flags of the target's facts

The compile cache is content-addressed: the shared object's name is a hash of the
compiler, its flags and the source, so identical kernels compile once per machine,
even across processes (files are written under a temporary name, then renamed).
"""
from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from te import dtypes
from te.expr import Const, Var, free_vars, post_order
from schedule import ir
from schedule.ir import Buffer, For, LoweredFunc
from schedule.simplify import linearize
from schedule.targets.cpu import bare_model_name, host_cpu_facts

from .c_family import STACK_BYTES, CSourcePrinter, Dialect
from .errors import BuildError, BuildTimeout
from .process import process_alive, run_group
from .registry import Backend, BackendInfo
from .vector_tile import NotVectorizable, vector_tile

CC = os.environ.get("CC", "gcc")


def cflags(isa_flags: tuple[str, ...] = ("-march=native",), openmp: bool = True) -> tuple[str, ...]:
    """gcc's flags around the ISA flags of a target's facts (``-march=native`` by default).
    A call to an undeclared function is an error (a math function used without ``math.h``,
    which ``generate_source`` includes only where one is called, would otherwise compile
    to a scalar call and no vector variant)."""
    return ("-O3", *isa_flags, "-ffast-math", "-fno-finite-math-only", *(("-fopenmp",) if openmp else ()),
            "-fwrapv", "-std=gnu11", "-Werror=implicit-function-declaration", "-shared", "-fPIC")


#: Linked into every kernel: libm, whose linker script brings glibc's libmvec when a vector variant is called.
LIBRARIES = ("-lm",)
#: The flags of plain ``cpu`` (this machine's ISA and vector width).
CFLAGS = cflags(host_cpu_facts().isa_flags)
#: glibc declares the vector variants of its math functions (libmvec: ``expf`` on 16
#: lanes and the like) only under ``__FAST_MATH__``, which ``-fno-finite-math-only``
#: leaves undefined; without them every vectorized loop calling ``expf`` calls it one
#: lane at a time. The macro is defined around ``math.h`` alone, where it changes nothing else.
#: Included only in a source that uses ``math.h`` (``CSourcePrinter.uses_math``): parsing it
#: is about a tenth of gcc's time on a matmul kernel, paid by every candidate.
MATH_PREAMBLE = """#if defined(__x86_64__) && !defined(__FAST_MATH__)
#define __FAST_MATH__ 1
#define AT_VECTOR_MATH_DECLARED 1
#endif
#include <math.h>
#ifdef AT_VECTOR_MATH_DECLARED
#undef __FAST_MATH__
#endif
"""
PREAMBLE = """#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
"""

__all__ = ["BuildError", "BuildTimeout", "CPUDialect", "CPUModule", "CpuBackend", "build", "compile_source",
           "generate_source"]


#: Printed instead of an unroll pragma on a register tile's rows that gcc unrolls itself
#: (``CPUDialect._one_vector_of_tile``); descriptions of the loops read it as unrolled.
ROWS_LEFT_TO_GCC = "// unrolled by gcc itself, once it has vectorized the one-vector loop inside"


@dataclass
class CPUDialect(Dialect):
    """C for gcc: OpenMP for parallel and SIMD loops, GCC's unroll pragma, 64-bit indices.

    ``vector_bits``: the width gcc vectorizes at (the target's; None: this machine's, the
    width of plain ``cpu``), which the register-tile rules of ``loop_pragmas`` and the
    vector variables of ``register_tile`` depend on. ``vector_variables``: print a register
    tile shaped for it as vector variables (False: as an array, for comparisons)."""

    wide_index: bool = True
    vector_bits: int | None = None
    vector_variables: bool = True

    def allocate(self, printer, buf: Buffer, name: str, ctype: str) -> tuple[list[str], list[str]]:
        """A buffer too large for the stack is kept from one call to the next in a slot of
        the shared object (one per allocation site), taken at the start of its scope and
        put back at the end; a call that finds the slot empty (the first, or one running
        beside another) allocates, and what a slot holds when the object is unloaded is
        freed. Without it every call maps, faults in and unmaps megabytes of fresh pages
        whenever the C library serves the size with mmap, which depends on what the process
        allocated before (glibc's dynamic mmap threshold), so the same kernel ran at two
        speeds in two processes (``bench/RESULTS.md``)."""
        nbytes = buf.size * dtypes.nbytes(buf.dtype)
        if nbytes <= STACK_BYTES:
            if not _reached_through_pointer(buf):
                return super().allocate(printer, buf, name, ctype)
            lines, _ = super().allocate(printer, buf, f"{name}_storage", ctype)
            return lines + [f"{ctype}* {self.restrict} {name} = {name}_storage;"], []
        padded = -(-nbytes // 64) * 64
        slot = printer.helper(f"at_kept_{printer.function_name}_{name}",
                              f"static void* at_kept_{printer.function_name}_{name} = NULL;\n"
                              f"__attribute__((destructor)) static void at_release_{printer.function_name}_{name}(void) "
                              f"{{ free(at_kept_{printer.function_name}_{name}); }}")
        return ([f"{ctype}* {self.restrict} {name} = ({ctype}*)__atomic_exchange_n(&{slot}, NULL, __ATOMIC_ACQUIRE);",
                 f"if (!{name}) {name} = ({ctype}*)aligned_alloc(64, {padded});"],
                [f"free(__atomic_exchange_n(&{slot}, (void*){name}, __ATOMIC_ACQ_REL));"])

    def register_tile(self, alloc: ir.Allocate) -> ir.Stmt | None:
        """The tile as vector variables (``backends.vector_tile``: gcc keeps those in
        registers, where it sometimes left the array in memory), or None where the tile is
        not shaped for them or ``vector_variables`` is off."""
        if not self.vector_variables:
            return None
        try:
            return vector_tile(alloc, self.vector_bits or host_cpu_facts().vector_bits)
        except NotVectorizable:
            return None

    def prints_vector_variables(self, alloc: ir.Allocate) -> bool:
        """Whether the tile ``alloc`` allocates prints as vector variables (``schedule.explain``
        describes its loops as unrolled)."""
        return self.register_tile(alloc) is not None

    def reduction_pragma(self, op: str, accumulator: str) -> str | None:
        clause = {"add": "+", "mul": "*", "min": "min", "max": "max"}[op]
        return f"#pragma omp simd reduction({clause}:{accumulator})"

    def loop_pragmas(self, loop: For) -> list[str]:
        if loop.kind == ir.PARALLEL:
            return [f"#pragma omp parallel for schedule({_parallel_schedule(loop)})"]
        if loop.kind == ir.VECTORIZED:
            if isinstance(loop.extent, Const) and _touches_register_tile(loop):
                return ["#pragma GCC ivdep"] + (["#pragma GCC unroll 1"] if self._one_vector_of_tile(loop) else [])
            return ["#pragma omp simd"]
        if loop.kind == ir.UNROLLED:
            if ir.indexes_register_tile(loop) and any(
                    self._one_vector_of_tile(inner) for inner in ir.walk(loop.body) if isinstance(inner, For)):
                return [ROWS_LEFT_TO_GCC]  # see _one_vector_of_tile
            n = ir.max_trip_count(loop.extent)
            return [f"#pragma GCC unroll {min(n, 65534)}"] if n else []
        if loop.kind == ir.THREAD_BINDING:
            raise BuildError(
                f"loop {loop.var.name!r} is bound to {loop.thread_tag}; "
                f"schedules that bind GPU threads build with target='cuda'"
            )
        return []

    def _one_vector_of_tile(self, loop: For) -> bool:
        """Whether ``loop`` is a vector loop exactly one vector long that accumulates into a
        register tile (the micro-kernel's update; the tile's copies in and out are not).

        gcc 12 unrolls such a loop completely before it vectorizes (8 floats on AVX2 are
        few enough), then vectorizes the loop over the tile's rows around it, gathering the
        rows' inputs with permutes; unrolling the rows by pragma first ends alike. So the
        loop gets ``#pragma GCC unroll 1`` (it stays a loop, which the vectorizer turns into
        one vector instruction), and the unrolled loops over the tile's rows around it get
        ``ROWS_LEFT_TO_GCC`` instead of their pragma: gcc unrolls them itself once the
        update is vectorized (an unrolled reduction loop around them keeps its pragma).
        Left alone: the tile's copies in and out (under ``unroll 1`` gcc makes them
        ``memcpy`` calls), a loop of two or more vectors (it stays a loop either way, and
        ``unroll 1`` would keep its vectors from being unrolled), and a loop that reads an
        input at a stride (a layernorm's tile of rows, vectorized across rows: there gcc's
        own choice, the contiguous loop around it, is the faster one). What each costs is
        in ``bench/RESULTS.md``; ``bench/register_tiles.py --rule one-vector`` times it."""
        if loop.kind != ir.VECTORIZED or not isinstance(loop.extent, Const):
            return False
        updates = [store for store in ir.register_tile_accesses(loop.body) if isinstance(store, ir.BufferStore)
                   and any(isinstance(e, ir.BufferLoad) and e.buffer is store.buffer
                           for e in post_order(store.value))]
        bits = self.vector_bits or host_cpu_facts().vector_bits
        return any(loop.extent.value * dtypes.nbytes(store.buffer.dtype) * 8 == bits
                   and all(_contiguous_in(loop.var, load) for load in post_order(store.value)
                           if isinstance(load, ir.BufferLoad))
                   for store in updates)


def _contiguous_in(var, load) -> bool:
    """Whether ``load`` reads consecutive elements as ``var`` steps (or the same element):
    ``var`` appears in its last index alone, with coefficient 1 or 0."""
    last = len(load.indices) - 1
    for n, index in enumerate(load.indices):
        for term, coefficient in linearize(index).terms.values():
            if isinstance(term, Var) and term is var:
                if n != last or coefficient != 1:
                    return False
            elif var in free_vars(term):
                return False  # inside a term the index is not linear in
    return True


def _reached_through_pointer(buf) -> bool:
    """Whether a stack buffer is declared as storage and read and written through a
    ``restrict`` pointer to it, as the heap buffers are: every one but a promoted register
    tile, which must stay an array of its own for gcc to hold it in registers. With a
    block of panels or a local copy of an input declared as a plain array beside the tile,
    gcc 12 kept the tile in memory (a load and a store of each accumulator per FMA);
    through the pointer it kept it in registers (``bench/RESULTS.md``)."""
    return not buf.in_registers


#: A parallel loop of known extent is handed out in chunks of consecutive iterations, this
#: many to twice as many in all (one iteration each in a shorter loop): few enough that
#: taking one (an atomic increment) costs nothing beside its work, enough that a thread that
#: starts late leaves the others only a small share to wait for.
PARALLEL_CHUNKS = 64


def _parallel_schedule(loop: For) -> str:
    """The OpenMP schedule of parallel ``loop``. Of a known extent: ``dynamic`` in chunks
    of ``extent // PARALLEL_CHUNKS`` iterations (at least one), each thread taking the next
    chunk when it is done with its last. A thread can start late: on a virtual machine whose
    idle CPUs halt, the first parallel region after a few milliseconds of idleness waits for
    the other CPU to run again (up to milliseconds), and the tuner's repeats each follow a
    cache flush that long. In fixed shares (``static``) the thread that runs waits for that
    one's share at the end; in chunks it takes them over (``bench/RESULTS.md`` has 1024³
    timed both ways with the final timing's rounds). Chunks also even out iterations of
    unequal work (a tile's last block). Of an unknown extent: fixed shares, handed out one
    iteration at a time where they are unequal (``_uneven_iterations``)."""
    extent = ir.const_int(loop.extent)
    if extent is not None:
        return f"dynamic, {max(1, extent // PARALLEL_CHUNKS)}"
    return "static, 1" if _uneven_iterations(loop) else "static"


def _uneven_iterations(loop: For) -> bool:
    """Whether the iterations of parallel ``loop`` do unequal work: a condition or a loop
    bound in its body depends on its variable (the last block of a tile that does not divide
    its extent, as 128 rows in blocks of 96). In contiguous halves (``schedule(static)``)
    one thread would get the short blocks: fused over 2 row blocks of 96 and 32 rows, one
    thread computed 96 rows while the other computed 32. Handed out one at a time
    (``static, 1``) every block is shared alike; loops of equal iterations keep contiguous
    halves, whose threads never write beside each other."""
    for s in ir.walk(loop.body):
        if isinstance(s, ir.IfThenElse) and loop.var in free_vars(s.condition):
            return True
        if isinstance(s, For) and loop.var in free_vars(s.extent):
            return True
    return False


def _touches_register_tile(loop: For) -> bool:
    """Whether ``loop`` reads or writes a tile that ``promote_accumulators`` made to live in
    registers. gcc 12 keeps such a tile in registers across the reduction loop around it
    only when its vector loops are plain loops: under ``omp simd`` it keeps the tile in
    memory and every step of a micro-kernel loads and stores its accumulators (AVX2 matmul
    register tiles ran 2-3x slower). ``GCC ivdep`` keeps what ``omp simd`` was there for,
    the promise that iterations do not depend on each other; other vector loops keep
    ``omp simd``, which vectorizes where gcc's cost model would not (guarded padding)."""
    return bool(ir.register_tile_accesses(loop.body))


def generate_source(func: LoweredFunc, dialect: Dialect | None = None) -> str:
    """The C translation unit of ``func``: includes, helpers, the kernel (``dialect``: CPUDialect).

    A function with inputs packed at build time (``func.prepacks``) also gets their packing
    functions and a table naming them (``prepack_table``), so that whoever loads the shared
    object, this module or the measuring process, can pack those inputs before calling it."""
    dialect = dialect or CPUDialect()
    helpers: dict[str, str] = {}
    bodies = []
    uses_math = False
    for f in [p.func for p in func.prepacks] + [func]:
        printer = CSourcePrinter(dialect)
        bodies.append(printer.function(f)[1])
        helpers.update(printer.helpers)
        uses_math |= printer.uses_math
    helper_text = "\n".join(helpers[k] for k in sorted(helpers))
    table = [prepack_table(func)] if func.prepacks else []
    preamble = (MATH_PREAMBLE if uses_math else "") + PREAMBLE
    return "\n".join(part for part in (preamble, helper_text, *bodies, *table) if part) + "\n"


# ---------------------------------------------------------------- inputs packed at build time


#: Suffix of the C string that lists a kernel's packing functions: ``<kernel>_prepacks``.
PREPACK_TABLE_SUFFIX = "_prepacks"


@dataclass(frozen=True)
class PrepackEntry:
    """One row of a kernel's prepack table: parameter ``param`` takes the output of C function
    ``function(source, packed)``, an array of ``shape`` and ``dtype``."""

    param: int
    function: str
    shape: tuple[int, ...]
    dtype: str


def prepack_table(func: LoweredFunc) -> str:
    """The C definition of ``func``'s prepack table: one ``param function dtype d0xd1x...``
    row per packed input, rows separated by ``;`` (no quotes, nothing to escape)."""
    rows = ";".join(f"{p.param} {p.func.name} {func.params[p.param].dtype} "
                    f"{'x'.join(map(str, func.params[p.param].shape))}" for p in func.prepacks)
    return f'const char {func.name}{PREPACK_TABLE_SUFFIX}[] = "{rows}";'


def read_prepacks(lib: ctypes.CDLL, function: str) -> list[PrepackEntry]:
    """The prepack table of kernel ``function`` in a loaded shared object ([] if it has none)."""
    try:
        first = ctypes.c_char.in_dll(lib, function + PREPACK_TABLE_SUFFIX)  # a char array's first byte
    except ValueError:  # no such symbol: nothing is packed at build time
        return []
    text = ctypes.string_at(ctypes.addressof(first))
    entries = []
    for row in filter(None, text.decode().split(";")):
        param, name, dtype, shape = row.split(" ")
        entries.append(PrepackEntry(int(param), name, tuple(int(d) for d in shape.split("x")), dtype))
    return entries


def packed_arrays(lib: ctypes.CDLL, function: str, arrays: list[np.ndarray]) -> list[np.ndarray]:
    """``arrays`` (in the user's layout) with each input that kernel ``function`` takes packed
    replaced by its packed copy, made once here by the packing function in ``lib``. The
    measuring process calls this before timing: packing is build-time work, not the kernel's."""
    out = list(arrays)
    for entry in read_prepacks(lib, function):
        packed = np.empty(entry.shape, dtype=dtypes.numpy_dtype(entry.dtype))
        pack = getattr(lib, entry.function)
        pack.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
        pack.restype = None
        source = np.ascontiguousarray(out[entry.param])
        pack(source.ctypes.data, packed.ctypes.data)
        out[entry.param] = packed
    return out


@dataclass(frozen=True)
class PackedInput:
    """Input ``name`` already packed into the layout a kernel chose (``CPUModule.pack``): pass
    it where the kernel takes ``name`` and the call skips the packing."""

    name: str
    array: np.ndarray


def cache_dir() -> Path:
    root = os.environ.get("AUTOTUNE_CACHE_DIR")
    if root:
        path = Path(root)
    else:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        path = Path(base) / "autotune"
    path = path / "kernels"
    path.mkdir(parents=True, exist_ok=True)
    return path


def cpu_model() -> str:
    """The CPU's model name (kernels built with -march=native run only on such CPUs)."""
    return host_cpu_facts().model


@functools.lru_cache(maxsize=None)
def compiler_version() -> str:
    try:
        out = subprocess.run([CC, "--version"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError) as exc:
        raise BuildError(f"C compiler {CC!r} not found or not working: {exc}") from None
    return out.splitlines()[0].strip()


#: Scratch directories of compiles: ``autotune-cc-<pid of the compiling process>-<random>``.
COMPILE_DIR_PREFIX = "autotune-cc-"


def compile_dir() -> tempfile.TemporaryDirectory:
    """A scratch directory for one compile, named after this process, so that one left by a
    process killed with SIGKILL mid-compile (nothing of it runs to remove it) is recognized
    and removed by the next process that compiles (``sweep_compile_dirs``)."""
    sweep_compile_dirs()
    return tempfile.TemporaryDirectory(prefix=f"{COMPILE_DIR_PREFIX}{os.getpid()}-")


@functools.lru_cache(maxsize=1)
def sweep_compile_dirs() -> int:
    """Remove the compile scratch directories of processes that no longer exist, once per
    process; returns how many. A directory of a live process, or one not named after a
    process, is left alone."""
    removed = 0
    for path in Path(tempfile.gettempdir()).glob(COMPILE_DIR_PREFIX + "*"):
        pid = path.name[len(COMPILE_DIR_PREFIX):].split("-", 1)[0]
        if pid.isdigit() and int(pid) != os.getpid() and not process_alive(int(pid)) and path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
            removed += 1
    return removed


def compile_source(source: str, flags: tuple[str, ...] = CFLAGS, timeout: float | None = 60.0) -> Path:
    """Compile ``source`` to a shared object (or reuse the cached one) and return its path.

    gcc runs with ``process.run_group``: on a timeout (``BuildTimeout``), an interrupt, or
    the death of the calling thread, gcc and every process it started are killed."""
    # -march=native makes the binary CPU-specific: the CPU model is part of the key.
    parts = (compiler_version(), cpu_model(), *flags, *LIBRARIES, source)
    key = hashlib.sha256("\0".join(parts).encode()).hexdigest()[:32]
    target = cache_dir() / f"k_{key}.so"
    if target.exists():
        return target
    with compile_dir() as tmp:
        src = Path(tmp) / "kernel.c"
        src.write_text(source)
        out = Path(tmp) / "kernel.so"
        env = dict(os.environ, TMPDIR=tmp)  # gcc's own temporaries (the assembly) in there too
        try:  # in a process group of its own: a timeout stops cc1, as and ld too, not only the driver
            proc = run_group([CC, *flags, str(src), "-o", str(out), *LIBRARIES], timeout=timeout, env=env)
        except subprocess.TimeoutExpired:
            raise BuildTimeout(f"gcc timed out after {timeout} s (it and the processes it started were killed)") \
                from None
        if proc.returncode != 0:
            raise BuildError(f"gcc failed:\n{proc.stderr.strip()[:4000]}")
        partial = target.with_suffix(f".{os.getpid()}.tmp")  # the temp dir may be on another filesystem
        shutil.copyfile(out, partial)
        os.replace(partial, target)
    return target


class CPUModule:
    """A compiled kernel, called with NumPy arrays in the order of its arguments.

    Arrays are checked (count, shape, dtype, C-contiguity, outputs writable, no
    aliasing) before the call: a mismatch raises ValueError naming the argument.

    A kernel whose schedule rewrote an input's layout (``func.prepacks``, constant weights
    of ``dense``) is still called with that input as the user lays it out, and packs it on
    every call; ``pack(name, array)`` packs it once, and the ``PackedInput`` it returns can
    be passed in its place from then on (what TVM's layout rewrite does with weights).
    """

    def __init__(self, func: LoweredFunc, source: str, path: Path):
        self.func = func
        self.source = source
        self.path = path
        self._written = {s.buffer for s in ir.walk(func.body) if isinstance(s, ir.BufferStore)}
        lib = ctypes.CDLL(str(path))
        self._fn = getattr(lib, func.name)
        self._fn.argtypes = [ctypes.c_void_p] * len(func.params)
        self._fn.restype = None
        self._packers = {}
        for p in func.prepacks:
            pack = getattr(lib, p.func.name)
            pack.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
            pack.restype = None
            self._packers[p.param] = (p, pack)
        self._lib = lib

    @property
    def params(self):
        """The parameters as the caller passes them (a packed input as its source)."""
        return self.func.user_params

    def pack(self, name: str, array: np.ndarray) -> PackedInput | np.ndarray:
        """Input ``name`` packed into this kernel's layout, once: pass the result in its place.
        An input this kernel takes as laid out comes back as it is, so code that packs its
        weights works whichever schedule was tuned."""
        for n, (p, pack) in self._packers.items():
            if p.source.name == name:
                _check_array(array, p.source, f"argument {n} ({name})", written=False)
                packed = np.empty(self.func.params[n].shape, dtype=dtypes.numpy_dtype(p.source.dtype))
                pack(array.ctypes.data, packed.ctypes.data)
                return PackedInput(name, packed)
        for n, buf in enumerate(self.func.params):
            if buf.name == name and buf not in self._written:
                _check_array(array, buf, f"argument {n} ({name})", written=False)
                return array
        inputs = ", ".join(b.name for b in self.params if b not in self._written)
        raise ValueError(f"kernel {self.func.name!r} has no input named {name!r} (inputs: {inputs})")

    def prepare(self, arrays) -> list[np.ndarray]:
        """The arrays the compiled function takes for ``arrays`` in the caller's order: each
        packed input packed (or taken from its ``PackedInput``), the rest as they are."""
        arrays = list(arrays)
        for n, given in enumerate(arrays):
            if isinstance(given, PackedInput) and n not in self._packers and n < len(self.func.params):
                raise ValueError(f"argument {n} ({self.func.params[n].name}): packed for another schedule's "
                                 f"layout; this kernel takes it as laid out")
        for n, (p, _) in self._packers.items():
            if n >= len(arrays):
                break  # the count check reports it
            given = arrays[n]
            where = f"argument {n} ({p.source.name})"
            if isinstance(given, PackedInput):
                want = self.func.params[n]
                if given.name != p.source.name or given.array.shape != want.shape:
                    raise ValueError(f"{where}: packed for another layout ({given.name}, {given.array.shape}); "
                                     f"this kernel takes {want.shape} (pack it with this module's pack())")
                arrays[n] = given.array
            else:
                arrays[n] = self.pack(p.source.name, given).array  # checks the array first
        return arrays

    def check_args(self, arrays) -> None:
        params = self.func.params
        if len(arrays) != len(params):
            names = ", ".join(b.name for b in self.params)
            raise ValueError(f"kernel {self.func.name!r} takes {len(params)} arrays ({names}), got {len(arrays)}")
        seen: list[tuple[int, int, str]] = []  # (first byte, end byte, argument) of each array
        for n, (arr, buf) in enumerate(zip(arrays, params)):
            where = f"argument {n} ({buf.name})"
            _check_array(arr, buf, where, written=buf in self._written)
            start = arr.ctypes.data
            end = start + arr.nbytes
            for other_start, other_end, other in seen:  # overlapping memory breaks `restrict`
                if start < other_end and other_start < end:
                    raise ValueError(f"{where}: same memory as {other}; pass distinct arrays")
            seen.append((start, end, where))

    def __call__(self, *arrays: np.ndarray) -> None:
        if len(arrays) == len(self.func.params):  # else the check below names the parameters
            arrays = tuple(self.prepare(arrays))
        self.check_args(arrays)
        self._fn(*[a.ctypes.data for a in arrays])

    def call_unchecked(self, pointers) -> None:
        """Call with raw data pointers (the timing loop uses this to skip the checks); a packed
        input's pointer must be its packed array's (``prepare``)."""
        self._fn(*pointers)

    def __repr__(self):
        return f"CPUModule({self.func.name}, {self.path.name})"


def _check_array(arr, buf, where: str, written: bool) -> None:
    """ValueError naming ``where`` unless ``arr`` is an array ``buf`` can take."""
    if not isinstance(arr, np.ndarray):
        raise ValueError(f"{where}: expected a numpy.ndarray, got {type(arr).__name__}")
    if arr.shape != buf.shape:
        raise ValueError(f"{where}: expected shape {buf.shape}, got {arr.shape}")
    if arr.dtype != dtypes.numpy_dtype(buf.dtype):
        raise ValueError(f"{where}: expected dtype {buf.dtype}, got {arr.dtype}")
    if not arr.flags.c_contiguous:
        raise ValueError(f"{where}: array must be C-contiguous (use numpy.ascontiguousarray)")
    if written and not arr.flags.writeable:
        raise ValueError(f"{where}: the kernel writes this array, but it is read-only")


def build(func: LoweredFunc) -> CPUModule:
    source = generate_source(func)
    return CPUModule(func, source, compile_source(source))


class CpuBackend(Backend):
    """The ``cpu`` kind's backend: C with OpenMP, gcc with the flags of the target's facts.

    Subclasses change ``dialect`` (how loops print) and ``openmp`` (whether gcc links the
    OpenMP runtime) for CPU flavours; the facts' ``isa_flags`` choose the instruction set.
    """

    dialect: Dialect = CPUDialect()
    openmp: bool = True

    @property
    def flags(self) -> tuple[str, ...]:
        return cflags(self.target.facts.isa_flags, self.openmp)

    @property
    def target_dialect(self) -> Dialect:
        """``dialect`` at the vector width of this backend's target (its rules depend on it)."""
        if isinstance(self.dialect, CPUDialect) and self.dialect.vector_bits is None:
            return replace(self.dialect, vector_bits=self.target.facts.vector_bits)
        return self.dialect

    def generate_source(self, func: LoweredFunc) -> str:
        return generate_source(func, self.target_dialect)

    def compile_source(self, source: str, timeout: float | None = 60.0) -> Path:
        return compile_source(source, self.flags, timeout)

    def load(self, artifact, func: LoweredFunc, source: str | None = None) -> CPUModule:
        return CPUModule(func, source if source is not None else self.generate_source(func), Path(artifact))

    def describe(self) -> BackendInfo:
        facts = self.target.facts
        model = facts.model or cpu_model()
        # The device as timings depend on it: two machines differing in any of these do not
        # share records (tuning_db matches records by kind and device). Earlier versions
        # stored the model name alone.
        device = f"{model}, {facts.isa}, {facts.cores} cores"
        former = (bare_model_name(model),) if bare_model_name(model) != device else ()
        return BackendInfo(device, compiler_version(), " ".join(self.flags), former)
