"""What a lowered program does, in words a tuning user reads: the inverse view of a config.

    print(describe_lowered(task.lower(config)))     # matmul 16x16x16, two outer loops in parallel
    parallel: i_outer_j_outer_fused, 4 iterations (OpenMP parallel for)
    C.local [local 8x8 float32, 256 B, allocated in i_outer_j_outer_fused]: i_outer_j_outer_fused 4
        (parallel) > k_outer 4 > i_inner_outer 2 (unrolled x2) > ... > j_inner_inner 8 (vector x8 float32)
    A.local [local 8x4 float32, 128 B, allocated in k_outer]: i_outer_j_outer_fused 4 (parallel) > ...
    C: i_outer_j_outer_fused 4 (parallel) > i_inner_inner_1 8 > j_inner_inner_1 8 (vector x8 float32)

A config says what was *asked* ("2 outer loops fused in parallel"); the lowered IR says
what the generated code *does*: lowering drops loops of one iteration (a parallel loop
of extent 1 is no parallel loop) and bounds tail loops. So every claim here is read off
the IR with the rules code generation applies to it:

- CPU (``backends.cpu``'s dialect): a loop of kind ``parallel`` prints as
  ``#pragma omp parallel for``, ``vectorized`` as ``#pragma omp simd`` (``GCC ivdep`` in
  a register tile), ``unrolled`` with a known trip count as ``#pragma GCC unroll N``;
  every other loop is a plain loop.
  A parallel loop of one iteration, or one nested in another parallel loop, keeps its
  pragma but runs on one thread: it is described as serial, with a note saying why.
  Another CPU kind's dialect may print fewer pragmas: pass its ``loop_pragmas``, and a
  marked loop it prints no pragma for is described as a plain loop. Pass its
  ``prints_vector_variables`` too, and the loops over a register tile it prints as vector
  variables are described as it prints them: unrolled, the vector loop as vectors.
- CUDA (a function with thread-bound loops builds only for cuda): the GPU passes split
  it into kernels; ``blockIdx``/``threadIdx`` loops are the launch grid and block,
  ``unrolled`` loops print ``#pragma unroll``, vectorized loops stay plain loops.

A headline gives the peak intermediate memory (allocated buffers live at once, per thread
and with every parallel iteration at once). Each buffer written gets one line: its storage (for buffers the program allocates) and
the loops of its deepest store, outermost first, named as ``str(func)`` names them.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable

from te import dtypes

from . import ir
from .ir import Allocate, Buffer, BufferStore, For, LoweredFunc, Stmt
from .passes import GPUProgram, StmtVisitor, lower_gpu
from .printer import NameTable

#: A C dialect's ``loop_pragmas``: the pragma lines it prints before a loop.
Pragmas = Callable[[For], "list[str]"]
#: A C dialect's ``prints_vector_variables``: whether it prints the register tile allocated
#: by an ``Allocate`` as vector variables, its loops over the tile unrolled into statements.
VectorTiles = Callable[[Allocate], bool]

__all__ = ["BufferNest", "Explanation", "LoopNote", "Pragmas", "VectorTiles", "describe_lowered", "describe_program",
           "explain"]

#: The note on a plain loop over a register tile that the printer unrolls (vector variables).
UNROLLED_INTO_VECTORS = "unrolled by the printer: the tile is vector variables"


@dataclass(frozen=True)
class LoopNote:
    """One loop as the generated code runs it.

    ``how``: "serial", "parallel", "vector", "unrolled", or a thread tag ("blockIdx.x",
    "threadIdx.x", "vthread"). ``trips``: the most iterations (None: unknown); ``tail``: the
    extent is ``min(trips, rest)`` (fewer iterations at the edge). ``note``: why a marked
    loop is not what its mark suggests (empty when it is)."""

    name: str
    trips: int | None
    how: str
    tail: bool = False
    dtype: str = ""
    note: str = ""

    def __str__(self) -> str:
        count = "?" if self.trips is None else f"<={self.trips}" if self.tail else str(self.trips)
        parts = ["tail"] if self.tail else []
        if self.how == "vector":
            parts.append(f"vector x{count} {self.dtype}".rstrip())
        elif self.how == "unrolled":
            parts.append(f"unrolled x{count}" if self.trips is not None else "unrolled")
        elif self.how != "serial":
            parts.append(self.how)
        if self.note:
            parts.append(self.note)
        return f"{self.name} {count}" + (f" ({', '.join(parts)})" if parts else "")


@dataclass(frozen=True)
class BufferNest:
    """A buffer the program writes: the loops of its deepest store (outermost first) and,
    for a buffer the program allocates, the loop it is allocated in (None: at the top)."""

    buffer: Buffer
    loops: tuple[LoopNote, ...]
    allocated: bool
    allocated_in: str | None

    def __str__(self) -> str:
        b = self.buffer
        order = " > ".join(str(loop) for loop in self.loops) or "no loop (one element)"
        if not self.allocated:
            return f"{b.name}: {order}"
        shape = "x".join(map(str, b.shape))
        where = f"allocated in {self.allocated_in}" if self.allocated_in else "allocated at the top"
        return f"{b.name} [{b.scope} {shape} {b.dtype}, {_bytes(b.size * dtypes.nbytes(b.dtype))}, {where}]: {order}"


def _bytes(n: int) -> str:
    """``n`` bytes in binary units: ``768 B``, ``16 KiB``, ``1.5 MiB``."""
    for unit in ("B", "KiB", "MiB"):
        if n < 1024 or unit == "MiB":
            return f"{n} {unit}" if unit == "B" else f"{n:.3g} {unit}"
        n /= 1024
    raise AssertionError("unreachable")


@dataclass(frozen=True)
class Explanation:
    """What ``explain`` reads off a statement: every loop in the order code generation
    prints them (pre-order), those that run in parallel, and each written buffer's nest.

    ``peak_bytes``: the most bytes of buffers the program allocates that are live at once
    in one thread (an allocation lives for its scope: a buffer allocated in a loop body is
    freed at the end of each iteration, so siblings reuse the memory); ``peak_bytes_all``:
    the same with every iteration of the parallel loops around an allocation running at
    once (each holds its own copy); ``peak_bytes_threads``: the same with ``threads``
    iterations at once, as OpenMP runs them on that many threads."""

    loops: tuple[LoopNote, ...]
    parallel: tuple[LoopNote, ...]
    buffers: tuple[BufferNest, ...]
    peak_bytes: int = 0
    peak_bytes_all: int = 0
    peak_bytes_threads: int = 0
    threads: int = 1


class _Collect(StmtVisitor):
    """One pre-order walk: loop names (as the IR printer gives them), the loop notes on the
    way down, each written buffer's deepest store, and where each buffer is allocated."""

    def __init__(self, gpu: bool, pragmas: Pragmas | None, threads: int = 1, vector_tiles: VectorTiles | None = None):
        super().__init__()
        self.gpu = gpu
        self.threads = threads
        self.pragmas = pragmas
        self.vector_tiles = vector_tiles
        self.held: list[Buffer] = []  # the register tiles around, printed as vector variables
        self.names = NameTable()
        self.notes: list[LoopNote] = []  # the enclosing loops' notes, outermost first
        self.all: list[LoopNote] = []
        self.nests: dict[Buffer, tuple[LoopNote, ...]] = {}
        self.allocations: dict[Buffer, str | None] = {}
        self.live = self.live_all = self.peak = self.peak_all = 0  # bytes allocated, see Explanation
        self.live_threads = self.peak_threads = 0

    def visit_For(self, s: For) -> None:
        note = self._note(s)
        self.notes.append(note)
        self.all.append(note)
        try:
            super().visit_For(s)
        finally:
            self.notes.pop()

    def _note(self, s: For) -> LoopNote:
        name = self.names(s.var)
        trips = ir.max_trip_count(s.extent)
        tail = trips is not None and ir.const_int(s.extent) is None
        how, note = _how(s, trips, self.gpu, self.notes, self.pragmas)
        if any(ir.indexes_register_tile(s, tile) for tile in self.held):
            how, note = ("vector", "") if s.kind == ir.VECTORIZED else (
                "unrolled", "" if s.kind == ir.UNROLLED else UNROLLED_INTO_VECTORS)
        return LoopNote(name, trips, how, tail, note=note)

    def visit_Allocate(self, s: Allocate) -> None:
        self.allocations[s.buffer] = self.notes[-1].name if self.notes else None
        size = s.buffer.size * dtypes.nbytes(s.buffer.dtype)
        copies = _prod(n.trips or 1 for n in self.notes if n.how == "parallel")
        at_once = min(copies, self.threads)
        self.live += size
        self.live_all += size * copies
        self.live_threads += size * at_once
        self.peak, self.peak_all = max(self.peak, self.live), max(self.peak_all, self.live_all)
        self.peak_threads = max(self.peak_threads, self.live_threads)
        held = (not self.gpu and s.buffer.in_registers and self.vector_tiles is not None
                and self.vector_tiles(s))
        if held:
            self.held.append(s.buffer)
        try:
            super().visit_Allocate(s)
        finally:
            if held:
                self.held.pop()
            self.live -= size
            self.live_all -= size * copies
            self.live_threads -= size * at_once

    def visit_BufferStore(self, s: BufferStore) -> None:
        loops = tuple(_with_dtype(n, s.buffer.dtype) for n in self.notes)
        if s.buffer not in self.nests or len(loops) > len(self.nests[s.buffer]):
            self.nests[s.buffer] = loops  # the first of the deepest stores: the main computation
        super().visit_BufferStore(s)

    def result(self) -> Explanation:
        buffers = tuple(BufferNest(b, loops, b in self.allocations, self.allocations.get(b))
                        for b, loops in self.nests.items())
        return Explanation(tuple(self.all), tuple(n for n in self.all if n.how == "parallel"), buffers,
                           self.peak, self.peak_all, self.peak_threads, self.threads)


def _with_dtype(note: LoopNote, dtype: str) -> LoopNote:
    """A vector loop's note names the element type of the store it is described for."""
    return replace(note, dtype=dtype) if note.how == "vector" else note


#: The words of the pragmas a CPU dialect prints for each loop kind it treats specially
#: (a register tile's vector loops: ``GCC ivdep``).
_PRAGMA_WORDS = {ir.PARALLEL: ("omp parallel",), ir.VECTORIZED: ("simd", "ivdep"), ir.UNROLLED: ("unroll",)}


def _how(s: For, trips: int | None, gpu: bool, outer: list[LoopNote],
         pragmas: Pragmas | None = None) -> tuple[str, str]:
    """(how the generated code runs loop ``s``, a note when that differs from its mark);
    the rules of the CPU dialect (``gpu`` False) or the CUDA dialect. ``pragmas``: a CPU
    dialect's ``loop_pragmas``; a marked loop it prints no pragma for is a plain loop."""
    words = _PRAGMA_WORDS.get(s.kind)
    if not gpu and pragmas is not None and words is not None and not any(w in " ".join(pragmas(s)) for w in words):
        return "serial", f"{s.kind} without a pragma on this target"
    if s.kind == ir.THREAD_BINDING:
        return s.thread_tag or "thread", ""
    if s.kind == ir.UNROLLED and (gpu or trips is not None):
        return "unrolled", ""
    if s.kind == ir.UNROLLED:
        return "serial", "unroll asked, trip count unknown: not unrolled"
    if not gpu and ir.folded_reduction(s) is not None:
        return "vector", "reduction into a scalar"
    if s.kind == ir.VECTORIZED:
        return ("serial", "vectorize has no pragma on cuda") if gpu else ("vector", "")
    if s.kind != ir.PARALLEL:
        return "serial", ""
    if gpu:
        return "serial", "marked parallel: cuda cannot build it"
    if trips == 1:
        return "serial", "parallel of 1 iteration: one thread"
    host = next((n for n in outer if n.how == "parallel"), None)
    if host is not None:
        return "serial", f"parallel nested in {host.name}: OpenMP runs it on {host.name}'s thread"
    return "parallel", ""


def explain(body: Stmt, gpu: bool = False, pragmas: Pragmas | None = None, threads: int = 1,
            vector_tiles: VectorTiles | None = None) -> Explanation:
    """How the generated code runs each loop of ``body`` and which loops write each buffer,
    by the CPU dialect's rules (``gpu``: the CUDA dialect's); ``pragmas``: the loop pragmas of
    the CPU dialect that prints it, when it may differ from ``backends.cpu``'s; ``threads``:
    the threads ``peak_bytes_threads`` counts; ``vector_tiles``: the dialect's
    ``prints_vector_variables`` (None: every register tile described as an array)."""
    walk = _Collect(gpu, pragmas, threads, vector_tiles)
    walk.visit(body)
    return walk.result()


def _parallel_line(parallel: tuple[LoopNote, ...]) -> str:
    """The CPU headline: which loops OpenMP runs in parallel, with their trip counts."""
    if not parallel:
        return ("parallel: none, one thread runs every loop (lowering removes loops of one "
                "iteration, parallel ones too)")
    loops = "; ".join(f"{n.name}, {'up to ' if n.tail else ''}{n.trips if n.trips is not None else '?'} iterations"
                      for n in parallel)
    return f"parallel: {loops} (OpenMP parallel for)"


def describe_program(program: GPUProgram) -> str:
    """The kernels of ``program``: launch shape, shared memory, and each written buffer."""
    lines = []
    for k in program.kernels:
        blocks, threads = _prod(k.grid), k.threads
        lines.append(f"kernel {k.name}: grid {_dims(k.grid)} ({blocks} blocks) x block {_dims(k.block)} "
                     f"({threads} threads), {_bytes(k.shared_bytes)} shared; blocks and threads run in "
                     f"parallel (no OpenMP)")
        lines += ["  " + str(n) for n in explain(k.body, gpu=True).buffers]
    return "\n".join(lines)


def describe_lowered(func: LoweredFunc | GPUProgram, pragmas: Pragmas | None = None,
                     vector_tiles: VectorTiles | None = None) -> str:
    """What the generated code of ``func`` does, a few lines per written buffer.

    A function with thread-bound loops builds only as CUDA: it goes through the GPU
    passes (``GPUError`` when it cannot) and is described as kernels. Any other function
    is described as the CPU backend prints it (OpenMP for parallel loops); ``pragmas``: the
    ``loop_pragmas`` of another CPU dialect (a target kind that prints loops otherwise);
    ``vector_tiles``: the dialect's ``prints_vector_variables``."""
    if isinstance(func, GPUProgram):
        return describe_program(func)
    if any(isinstance(s, For) and s.kind == ir.THREAD_BINDING for s in ir.walk(func.body)):
        return describe_program(lower_gpu(func))
    what = explain(func.body, pragmas=pragmas, vector_tiles=vector_tiles)
    packed = [f"packed once, before any call: {p.source.name} into {func.params[p.param].name} "
              f"({_dims(func.params[p.param].shape)}), which the kernel takes in its place" for p in func.prepacks]
    return "\n".join([_parallel_line(what.parallel), _memory_line(what), *packed] + [str(n) for n in what.buffers])


def _memory_line(what: Explanation) -> str:
    """The intermediate memory headline: the peak of allocated buffers live at once."""
    if not what.peak_bytes:
        return "intermediate memory: none (every stage writes an argument or is inlined)"
    line = f"intermediate memory: peak {_bytes(what.peak_bytes)} live at once in one thread"
    if what.peak_bytes_all != what.peak_bytes:
        line += f", {_bytes(what.peak_bytes_all)} with every parallel iteration at once"
    return line


def _dims(xyz) -> str:
    return "x".join(map(str, xyz))


def _prod(xs) -> int:
    n = 1
    for x in xs:
        n *= x
    return n

