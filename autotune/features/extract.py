"""The walk over the loop IR that assembles a feature vector from the per-concern modules.

    func -> Walk (one pass, a stack of enclosing loops) -> one row per BufferStore
         -> the MAX_STORES rows with most flops + global features -> float32[FEATURE_DIM]

A row is ``present, rmw`` + arithmetic counts + loop structure + GPU mapping +
``guards, tail_loops, n_loads`` + total bytes + intensity + access slots, in the
order ``layout.ROW_NAMES`` names them.
"""
from __future__ import annotations

import math

import numpy as np

from . import access, arithmetic, gpu, loops
from ._deps import (Allocate, Barrier, BufferStore, For, IfThenElse, LoweredFunc, Seq, dtypes, interval, ir,
                    vectorizable)
from .layout import FEATURE_DIM, FEATURE_NAMES, MAX_STORES, ROW_DIM, log_scale, prod0
from .loops import Loop

#: The vector width ``g.vector_tile_frac`` checks tiles at: the widest a CPU target has, so
#: that the feature does not depend on the machine that extracts it (a tile prints with
#: vectors of up to this width, narrower ones where its rows are narrower). Why the feature
#: exists: the loop IR looks alike whether gcc keeps a tile in registers or leaves the array
#: in memory, and the two run several times apart.
VECTOR_TILE_BITS = 512


class Row:
    """The features of one store, plus the sort key that picks the stores kept."""

    __slots__ = ("values", "total_flops", "executions", "weight", "vectorized", "parallel", "order")


def store_row(store: BufferStore, stack: list[Loop], guards: int, memo: dict, fv_memo: dict) -> Row:
    """The row of ``store`` under the loops of ``stack`` (outermost first) and ``guards`` ifs."""
    nest = loops.effective(stack)
    ops = arithmetic.count_ops(store.value, store.indices)
    executions = math.prod(lp.extent for lp in nest)
    accesses, rmw = access.distinct_accesses(store, ops.loads, memo, fv_memo)
    par_pos = loops.parallel_position(nest)
    iters_inner = loops.iterations_inner(nest)
    acc = access.StoreAccesses(accesses, nest, par_pos, iters_inner)
    par_prod = prod0(lp.extent for lp in nest if lp.spreads_work)

    v: list[float] = [1.0, float(rmw)]
    v += arithmetic.compute_values(ops, executions)
    v += loops.structure_values(nest, len(stack), par_pos, executions)
    v += gpu.mapping_values(nest)
    v += [log_scale(guards), log_scale(sum(lp.tail for lp in nest)), log_scale(len(accesses) - 1)]
    v += acc.total_values()
    v += arithmetic.intensity_values(ops.flops, executions, par_prod, acc.total_bytes, iters_inner)
    v += acc.slot_values()

    row = Row()
    row.values = v
    row.total_flops = ops.flops * executions
    row.executions = executions
    row.weight = executions * len(accesses)
    row.vectorized = any(lp.kind == ir.VECTORIZED for lp in nest)
    row.parallel = par_prod > 1
    return row


class Walk:
    """One pass over the IR: rows for stores, plus the global counters."""

    def __init__(self):
        self.rows: list[Row] = []
        self.stack: list[Loop] = []
        self.guards = 0
        self.n_loops = 0
        self.n_eff_loops = 0
        self.tail_loops = 0
        self.bounds: dict = {}
        self.max_par = 0
        self.alloc = {"local": 0, "shared": 0, "global": 0}
        self.total_guards = 0
        self.barriers = 0
        self.register_tiles = 0  # allocations promote_accumulators holds in registers
        self.vector_tiles = 0    # of those, the ones the C backends print as vector variables
        self.launch = gpu.LaunchExtents()
        self.memo: dict = {}
        self.fv_memo: dict = {}

    def visit(self, s) -> None:
        t = type(s)
        if t is For:
            self._loop(s)
        elif t is Seq:
            for x in s.stmts:
                self.visit(x)
        elif t is BufferStore:
            row = store_row(s, self.stack, self.guards, self.memo, self.fv_memo)
            row.order = len(self.rows)
            self.rows.append(row)
        elif t is Allocate:
            b = s.buffer
            self.alloc[b.scope if b.scope in self.alloc else "global"] += b.size * dtypes.nbytes(b.dtype)
            if b.in_registers:
                self.register_tiles += 1
                on_gpu = any(lp.kind == ir.THREAD_BINDING for lp in self.stack)
                self.vector_tiles += not on_gpu and vectorizable(s, VECTOR_TILE_BITS)
            self.visit(s.body)
        elif t is IfThenElse:
            self.guards += 1
            self.total_guards += 1
            self.visit(s.then_case)
            if s.else_case is not None:
                self.visit(s.else_case)
            self.guards -= 1
        elif t is Barrier:
            self.barriers += 1

    def _loop(self, s: For) -> None:
        extent = ir.const_int(s.extent)
        tail = extent is None
        if tail:  # a tail loop (``min(f, n - i*f)``): its largest extent
            r = interval(s.extent, self.bounds)
            extent = max(1, r[1]) if r is not None else 1
        self.n_loops += 1
        self.tail_loops += tail
        loop = Loop(s.var, extent, s.kind, s.thread_tag, tail)
        if extent > 1:
            self.n_eff_loops += 1
            if s.kind == ir.PARALLEL:
                self.max_par = max(self.max_par, extent)
        self.stack.append(loop)
        self.bounds[s.var] = (0, extent - 1)
        if s.kind == ir.THREAD_BINDING:
            self.launch.see(self.stack)
        self.visit(s.body)
        self.stack.pop()

    def global_values(self) -> list[float]:
        """The ``g.*`` features, in ``layout.GLOBAL_NAMES`` order."""
        rows = self.rows
        total_flops = sum(r.total_flops for r in rows)
        flops_or_1 = max(total_flops, 1)
        return [
            log_scale(total_flops), log_scale(len(rows)), log_scale(self.n_loops), log_scale(self.n_eff_loops),
            log_scale(self.max_par), log_scale(self.alloc["local"]), log_scale(self.alloc["shared"]),
            log_scale(self.alloc["global"]), log_scale(self.total_guards), log_scale(self.tail_loops),
            log_scale(self.barriers), log_scale(sum(r.executions for r in rows)),
            sum(r.total_flops for r in rows if r.vectorized) / flops_or_1,
            sum(r.total_flops for r in rows if r.parallel) / flops_or_1,
            *self.launch.values(),
            self.vector_tiles / self.register_tiles if self.register_tiles else 0.0,
        ]


def extract(func: LoweredFunc) -> np.ndarray:
    """The feature vector (float32[FEATURE_DIM]) of a lowered function."""
    w = Walk()
    w.visit(func.body)
    rows = sorted(w.rows, key=lambda r: (-r.total_flops, -r.weight, r.order))
    out = np.zeros(FEATURE_DIM, dtype=np.float32)
    for n, row in enumerate(rows[:MAX_STORES]):
        out[n * ROW_DIM:(n + 1) * ROW_DIM] = row.values
    out[MAX_STORES * ROW_DIM:] = w.global_values()
    return out


def describe(x: np.ndarray, nonzero_only: bool = True) -> str:
    """``name = value`` lines of a feature vector (for debugging and docs)."""
    return "\n".join(f"{n} = {v:.3f}" for n, v in zip(FEATURE_NAMES, x) if v or not nonzero_only)
