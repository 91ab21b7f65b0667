"""CPU emulation of the generated CUDA kernels: GPU schedules checked where there is no GPU.

    emu = emulator.build(s, [A, B, C])    # the same kernels the CUDA backend prints
    emu(a, b, c)                          # NumPy arrays; outputs written in place
    outs = emulator.run(s, [A, B, C], [a, b])   # fresh outputs, as a list

The emulated program is built from the kernels' IR (``schedule.passes``), so what runs
here is what NVRTC compiles, index for index. One IR-to-IR transformation per kernel, in
the manner of MCUDA, then the CPU backend's printer and gcc:

- the grid becomes outer loops over block indices ``bx, by, bz``;
- the kernel body splits at its barriers into barrier-free *regions*; each region is
  wrapped in loops over the thread indices ``tz, ty, tx``, so a block's threads run one
  after another between barriers (a loop that contains a barrier stays outside, and each
  region of its body gets its own thread loops; its bounds must not depend on the thread,
  which is checked);
- a loop bound to ``threadIdx.x`` becomes ``if (tx < extent)`` with its variable replaced
  by ``tx``; one bound to ``blockIdx.x`` the same with ``bx``;
- shared buffers are allocated once per block, and a per-thread (local) buffer that lives
  across a barrier gets a leading thread dimension;
- every shared and local buffer starts filled with NaN (integers: their largest value), and
  so does every workspace buffer, so a read before the write -- a missing barrier, a
  wrong region -- poisons the result and fails verification;
- every index of every access is checked against its dimension's extent; the first
  out-of-bounds access is recorded (the access itself is redirected to element 0) and
  raised as ``EmulationFault`` after the call.

Threads run serially, so a missing barrier *before* a shared-memory fetch in a loop
(write after read) is not visible here; ``schedule.passes.insert_barriers`` places it,
and ``schedule.passes.missing_barriers`` re-checks any kernel for it statically.
"""
from __future__ import annotations

import ctypes
import math

import numpy as np

from te import dtypes
from te.errors import TEError
from te.expr import Const, Expr, Var
from schedule import ir
from schedule.passes import BLOCK_TAGS, THREAD_TAGS, GPUKernel, GPUProgram, lower_gpu
from schedule.passes.ir_tools import expand, retarget, subst_stmt
from schedule.ir import Allocate, Barrier, Buffer, BufferStore, For, IfThenElse, LoweredFunc, Stmt

from .c_family import CSourcePrinter, Dialect
from .cpu import compile_source

#: gcc flags for emulation: quick to compile, IEEE semantics (NaN must propagate).
EMU_FLAGS = ("-O1", "-fwrapv", "-std=gnu11", "-shared", "-fPIC", "-w")

PREAMBLE = """#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
static int at_fault = 0;
static char at_fault_msg[256];
static int32_t at_check(int32_t i, int32_t n, const char* buffer, int32_t dim) {
  if (i >= 0 && i < n) return i;
  if (!at_fault) {
    at_fault = 1;
    snprintf(at_fault_msg, sizeof at_fault_msg, "index %d out of range [0, %d) in dimension %d of %s",
             (int)i, (int)n, (int)dim, buffer);
  }
  return 0;
}
/* The race detector: per element of a shared buffer, the barrier interval (epoch) of its
   last access, its writer and its reader (thread + 1; -1: several readers) in that interval. */
static int32_t at_race(int32_t* shadow, const int32_t* state, int32_t i, int32_t write, const char* buffer) {
  if (state[1] < 0) return i;  /* the emulator's own fill, no thread's access */
  int32_t* e = shadow + 3 * i;
  int32_t t = state[1] + 1;
  if (e[0] != state[0]) { e[0] = state[0]; e[1] = 0; e[2] = 0; }
  int32_t other = (e[1] && e[1] != t) ? e[1] : ((write && e[2] && e[2] != t) ? e[2] : 0);
  if (other && !at_fault) {
    char who[32];
    if (other > 0) snprintf(who, sizeof who, "thread %d", (int)(other - 1));
    else snprintf(who, sizeof who, "several threads");
    at_fault = 1;
    snprintf(at_fault_msg, sizeof at_fault_msg,
             "data race on %s[%d]: %s %s it, then thread %d %s it, with no barrier between",
             buffer, (int)i, who, other == e[1] ? "wrote" : "read", (int)(t - 1), write ? "writes" : "reads");
  }
  if (write) e[1] = t; else e[2] = (e[2] == 0 || e[2] == t) ? t : -1;
  return i;
}
const char* at_emu_fault(void) { return at_fault ? at_fault_msg : 0; }
void at_emu_reset(void) { at_fault = 0; at_fault_msg[0] = 0; }
"""


class EmulationError(TEError):
    """The kernel cannot be emulated as written (a barrier in thread-dependent control flow)."""


class EmulationFault(RuntimeError):
    """The emulated kernel accessed a buffer out of bounds."""


# ---------------------------------------------------------------- the transformation


def poison_value(dtype: str):
    """The value a buffer of ``dtype`` starts filled with (NaN; integers: their largest)."""
    return _poison(dtype).value


def _poison(dtype: str) -> Const:
    if dtypes.is_float(dtype):
        return Const(math.nan, dtype)
    if dtype == "bool":
        return Const(True, dtype)
    return Const(int(np.iinfo(dtypes.numpy_dtype(dtype)).max), dtype)


def _fill(buf: Buffer) -> Stmt:
    """Store the poison value into every element of ``buf``."""
    loops = [Var(f"fill{d}") for d in range(len(buf.shape))]
    stmt: Stmt = BufferStore(buf, tuple(loops), _poison(buf.dtype))
    for v, n in reversed(list(zip(loops, buf.shape))):
        stmt = For(v, Const(n), ir.SERIAL, stmt)
    return stmt


def _block_level_needed(s: Stmt) -> bool:
    return any(isinstance(n, Barrier) or (isinstance(n, Allocate) and n.buffer.scope == "shared")
               for n in ir.walk(s))


def _uses_any(e: Expr, names: set) -> bool:
    from te.expr import post_order

    return any(isinstance(n, Var) and n in names for n in post_order(e))


#: The race detector's state: [0] the barrier interval (epoch) now running, [1] the thread
#: now running (-1: none, the emulator's own fill). Each block and each barrier starts a
#: new epoch; each thread of a region sets the thread; the detector (``at_race`` in the
#: preamble) reads both at every shared-memory access.
RACE_STATE = Buffer("emu_race_state", (2,), "int32", scope="global")


class _KernelEmulation:
    """One kernel as CPU loops (see the module docstring)."""

    def __init__(self, kernel: GPUKernel):
        self.kernel = kernel
        self.grid = dict(zip(BLOCK_TAGS, kernel.grid))
        self.block = dict(zip(THREAD_TAGS, kernel.block))
        short = {"x": "x", "y": "y", "z": "z"}
        self.bvars = {t: Var(f"emu_b{short[t[-1]]}") for t in BLOCK_TAGS}
        self.tvars = {t: Var(f"emu_t{short[t[-1]]}") for t in THREAD_TAGS}
        tid: Expr = Const(0)
        for tag in reversed(THREAD_TAGS):  # z, y, x: the flat thread id, dims of 1 left out
            if self.block[tag] > 1:
                tid = self.tvars[tag] if isinstance(tid, Const) else tid * self.block[tag] + self.tvars[tag]
        self.tid = tid
        self.detects_races = any(isinstance(n, Allocate) and n.buffer.scope == "shared"
                                 for n in ir.walk(kernel.body))

    def run(self) -> Stmt:
        body = ir.seq(self.new_epoch(), self.block_level(self.kernel.body))  # each block: a new interval
        for tag in BLOCK_TAGS:
            body = For(self.bvars[tag], Const(self.grid[tag]), ir.SERIAL, body)
        return body

    # ------------------------------------------------------------ block level

    def block_level(self, s: Stmt) -> Stmt:
        """``s`` as executed by a whole block: barrier-free parts become thread-loop regions."""
        if not _block_level_needed(s):
            return self.region(s)
        if isinstance(s, Barrier):  # the one place a barrier interval ends
            return self.new_epoch() or ir.seq()
        if isinstance(s, ir.Seq):
            out: list[Stmt] = []
            run: list[Stmt] = []
            for x in s.stmts:
                if _block_level_needed(x):
                    if run:
                        out.append(self.region(ir.seq(*run)))
                        run = []
                    out.append(self.block_level(x))
                else:
                    run.append(x)
            if run:
                out.append(self.region(ir.seq(*run)))
            return ir.seq(*out)
        if isinstance(s, Allocate):
            if s.buffer.scope == "shared":  # the poison is the emulator's, not a thread's access
                return Allocate(s.buffer, ir.seq(self.no_thread(), _fill(s.buffer), self.block_level(s.body)))
            per_thread = expand(s.buffer, self.kernel.threads)  # lives across a barrier
            body = retarget(s.body, s.buffer, per_thread, (self.tid,))
            return Allocate(per_thread, ir.seq(_fill(per_thread), self.block_level(body)))
        if isinstance(s, For):
            return self.block_level_loop(s)
        if isinstance(s, IfThenElse):
            if _uses_any(s.condition, set(self.tvars.values())):
                raise EmulationError(
                    f"kernel {self.kernel.name!r}: a condition that depends on the thread index encloses a "
                    f"barrier or a shared buffer; not every thread of the block would reach it"
                )
            return IfThenElse(s.condition, self.block_level(s.then_case),
                              None if s.else_case is None else self.block_level(s.else_case))
        raise EmulationError(f"cannot emulate {type(s).__name__} at block level")

    def block_level_loop(self, s: For) -> Stmt:
        tag = s.thread_tag if s.kind == ir.THREAD_BINDING else None
        n = ir.const_int(s.extent)
        if tag in THREAD_TAGS:
            if n != self.block[tag]:
                raise EmulationError(
                    f"kernel {self.kernel.name!r}: loop {s.var.name!r} binds {n} of {self.block[tag]} "
                    f"{tag} values around a barrier or shared buffer; the other threads would skip it"
                )
            return self.block_level(subst_stmt(s.body, {s.var: self.tvars[tag]}))
        if tag in BLOCK_TAGS:
            body = self.block_level(subst_stmt(s.body, {s.var: self.bvars[tag]}))
            return body if n == self.grid[tag] else IfThenElse(self.bvars[tag] < n, body)
        if _uses_any(s.extent, set(self.tvars.values())):
            raise EmulationError(
                f"kernel {self.kernel.name!r}: loop {s.var.name!r} contains a barrier but its extent "
                f"depends on the thread index"
            )
        return For(s.var, s.extent, ir.SERIAL, self.block_level(s.body))

    # ------------------------------------------------------------ thread level

    def region(self, s: Stmt) -> Stmt:
        """Every thread of the block runs barrier-free ``s``, one after another (each thread
        announcing itself to the race detector, when the kernel has shared memory)."""
        body = self.thread_level(s)
        if self.detects_races:
            body = ir.seq(BufferStore(RACE_STATE, (Const(1),), self.tid), body)
        for tag in THREAD_TAGS:
            if self.block[tag] > 1 or _any_use(body, self.tvars[tag]):
                body = For(self.tvars[tag], Const(self.block[tag]), ir.SERIAL, body)
        return body

    def no_thread(self) -> Stmt | None:
        """The store telling the race detector that no thread runs (the emulator's own
        fills of shared buffers are not checked); None without a detector."""
        return BufferStore(RACE_STATE, (Const(1),), Const(-1)) if self.detects_races else None

    def new_epoch(self) -> Stmt | None:
        """The store that starts a new barrier interval for the race detector (None without one)."""
        if not self.detects_races:
            return None
        return BufferStore(RACE_STATE, (Const(0),), ir.BufferLoad(RACE_STATE, (Const(0),), "int32") + 1)

    def thread_level(self, s: Stmt) -> Stmt:
        def fstmt(node: Stmt):
            if isinstance(node, For):
                tag = node.thread_tag if node.kind == ir.THREAD_BINDING else None
                if tag in THREAD_TAGS or tag in BLOCK_TAGS:
                    index = self.tvars[tag] if tag in THREAD_TAGS else self.bvars[tag]
                    limit = self.block[tag] if tag in THREAD_TAGS else self.grid[tag]
                    body = subst_stmt(node.body, {node.var: index})
                    n = ir.const_int(node.extent)
                    return body if n == limit else IfThenElse(index < n, body)
                return For(node.var, node.extent, ir.SERIAL, node.body)
            if isinstance(node, Allocate):
                return Allocate(node.buffer, ir.seq(_fill(node.buffer), node.body))
            return None

        return ir.map_stmt(s, fstmt)


def _any_use(s: Stmt, v: Var) -> bool:
    from schedule.passes.ir_tools import uses

    return uses(s, {v})


def emulate_program(program: GPUProgram) -> LoweredFunc:
    """One CPU function running every kernel of ``program`` in order (same parameters)."""
    bodies = [_KernelEmulation(k).run() for k in program.kernels]
    return LoweredFunc(program.name, program.kernel_params, ir.seq(*bodies))


# ---------------------------------------------------------------- compiling and running


class _EmulatorDialect(Dialect):
    """Plain C with every index bounds-checked (``at_check``) and every access to a shared
    buffer passed through the race detector (``at_race``, with a shadow array per buffer)."""

    def wrap_access(self, printer: CSourcePrinter, buf: Buffer, flat: str, write: bool) -> str:
        if buf.scope != "shared":
            return flat
        name = printer.buffer_name(buf)
        state = printer.buffer_name(RACE_STATE)
        printer.helper(state, f"static int32_t {state}[2];")
        shadow = printer.helper(f"{name}_shadow", f"static int32_t {name}_shadow[{3 * buf.size}];")
        return f'at_race({shadow}, {state}, {flat}, {int(write)}, "{name}")'


def generate_source(program: GPUProgram) -> str:
    """The C translation unit of the emulation: plain C, every index bounds-checked, every
    shared-memory access checked for races."""
    func = emulate_program(program)
    helpers, body = CSourcePrinter(_EmulatorDialect(index_check="at_check")).function(func)
    return "\n".join(part for part in (PREAMBLE, helpers, body) if part) + "\n"


class EmulatorModule:
    """The emulated kernels, called with NumPy arrays like ``backends.cpu.CPUModule``."""

    def __init__(self, program: GPUProgram, source: str, path):
        from .cpu import CPUModule

        self.program = program
        self.source = source
        self.path = path
        self._cpu = CPUModule(emulate_program(program), source, path)
        self._fault = self._cpu._lib.at_emu_fault
        self._fault.restype = ctypes.c_char_p
        self._cpu._lib.at_emu_reset.restype = None

    @property
    def params(self):
        return self.program.params

    def __call__(self, *arrays: np.ndarray) -> None:
        workspace = [np.full(b.shape, _poison(b.dtype).value, dtype=dtypes.numpy_dtype(b.dtype))
                     for b in self.program.workspace]
        all_arrays = list(arrays) + workspace
        self._cpu.check_args(all_arrays)
        self._cpu._lib.at_emu_reset()
        self._cpu.call_unchecked([a.ctypes.data for a in all_arrays])
        fault = self._fault()
        if fault:
            raise EmulationFault(f"{self.program.name}: {fault.decode()}")

    def __repr__(self):
        return f"EmulatorModule({self.program.name}, {len(self.program.kernels)} kernel(s))"


def build_program(program: GPUProgram, timeout: float | None = 60.0) -> EmulatorModule:
    source = generate_source(program)
    return EmulatorModule(program, source, compile_source(source, EMU_FLAGS, timeout))


def build(s, args=None, name: str = "kernel") -> EmulatorModule:
    """Emulate a Schedule (with ``args``), a LoweredFunc or a GPUProgram."""
    from schedule import lower

    if isinstance(s, GPUProgram):
        return build_program(s)
    func = s if isinstance(s, LoweredFunc) else lower(s, args, name=name)
    return build_program(lower_gpu(func))


def run(s, args, inputs) -> list[np.ndarray]:
    """Outputs of the emulated kernels for NumPy ``inputs`` (the leading parameters).

    The remaining parameters (outputs) start filled with NaN (integers: their largest value).
    """
    module = build(s, args)
    params = module.program.params
    outs = [np.full(b.shape, _poison(b.dtype).value, dtype=dtypes.numpy_dtype(b.dtype)) for b in params[len(inputs):]]
    module(*inputs, *outs)
    return outs
