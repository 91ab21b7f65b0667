"""Features of a lowered loop nest, for the cost model: one fixed-length vector per schedule.

    func = task.lower(config)          # the loop IR (schedule.ir)
    x = extract(func)                  # float32[FEATURE_DIM], named by FEATURE_NAMES
    cache = FeatureCache()
    x = cache.get(task, config)        # lowers + extracts once per (task, config)

Features come from the loop IR, never from the config's knobs, so one model reads
every operator (Ansor's per-store features, adapted to our IR). The walk visits the IR
once, keeping the stack of enclosing loops, and makes one *row* per ``BufferStore``:

    compute     float ops per execution by kind (add/sub, mul, div, math calls,
                compare/min/max, select), integer index ops, executions (the product
                of the enclosing loop extents), total flops
    loops       innermost loop: extent and kind; vector lanes; unroll product and
                count; parallel extent above the store and the work per thread; GPU
                block/thread extents; enclosing guards
    accesses    the store and up to ``MAX_LOADS`` distinct loads, each with: scope,
                element size, stride w.r.t. the innermost loop (0 reuse, 1
                contiguous, >1 strided), bytes touched when the 1..4 innermost loops
                run and per parallel iteration and over the whole nest, the reuse
                ratio (iterations per unique element) at those levels, and the
                innermost reuse loop (Ansor's reuse distance in iterations and bytes,
                reuse count)
    intensity   flops per byte touched, per parallel iteration and over the nest

Loops of extent 1 are dropped from the stack first: they are no-ops in the code and
would shift every "n-th innermost loop" feature. A tail loop (extent
``min(f, n - i*f)``) counts with its largest extent and in ``tail_loops``. A load
equal to the store (an accumulator's read) is folded into the ``rmw`` flag. Load slots
are ordered by bytes touched over the nest, largest first.

The vector holds the rows of the two stores with the most total flops (ties: the one
with more executions times accesses, then program order; the second row is zero when
there is one store, its ``present`` flag says so), then global features: total flops,
stores, loops, parallel extent, allocated bytes by scope, guards, tail loops,
barriers, GPU blocks/threads, fractions of flops that are vectorized and parallel.
Counts, extents and bytes are scaled with log2(1 + x) (0 for "none"); flags and
fractions stay raw. Extraction is plain Python, about 0.3-1.5 ms per kernel; lowering
costs ten times more, hence ``FeatureCache``.

Footprints are estimates, computed per index dimension from the linear form of the
index (``sum(c_v * v) + k``): when loops ``L`` run, dimension ``d`` takes at most
``min(1 + sum_{v in L} |c_v| (extent_v - 1), prod_{v in L, v in d} extent_v,
shape_d)`` distinct values, and the footprint is the product over dimensions. That
is exact for tiles (``io*32 + ii``) and sliding windows (``y + ry``); non-linear
terms (``fused // 4``) use interval bounds.
"""
from __future__ import annotations

import math
import time
from collections import OrderedDict

import numpy as np

from schedule import ir
from schedule.ir import Allocate, Barrier, BufferLoad, BufferStore, For, IfThenElse, LoweredFunc, Seq
from schedule.simplify import interval, structural_key
from te import dtypes
from te.expr import Binary, Call, Cast, Compare, Const, Logical, Not, Select, Var, free_vars

#: Distinct loads kept per store (the store itself is access slot 0).
MAX_LOADS = 3
#: Stores whose rows enter the vector (those with the most total flops).
MAX_STORES = 2
#: Footprint levels reported per access: the 1, 2, 3, 4 innermost loops.
LEVELS = 4

_KINDS = (ir.SERIAL, ir.PARALLEL, ir.VECTORIZED, ir.UNROLLED, ir.THREAD_BINDING)
_SCOPES = ir.SCOPES  # global, local, shared

_OP_FIELDS = ("f_addsub", "f_mul", "f_div", "f_math", "f_cmp", "select", "int_arith", "int_divmod", "bool_ops")
_LEVEL_NAMES = tuple(f"l{n}" for n in range(LEVELS)) + ("par", "all")

_ACCESS_NAMES = (
    ["present", *(f"scope_{s}" for s in _SCOPES), "elem_bytes", "stride", "stride_zero", "stride_one", "stride_big"]
    + [f"bytes_{lv}" for lv in _LEVEL_NAMES]
    + [f"reuse_{lv}" for lv in _LEVEL_NAMES[:LEVELS]]
    + ["reuse_dis_iter", "reuse_dis_bytes", "reuse_ct", "no_reuse"]
)
_ROW_NAMES = (
    ["present", "rmw", *_OP_FIELDS, "flops", "total_flops", "executions", "n_loops", "depth", "inner_extent"]
    + [f"inner_{k}" for k in _KINDS]
    + ["vec_lanes", "vec_inner", "unroll_prod", "unroll_num", "par_prod", "par_num", "work_per_thread",
       "loops_below_par", "block_prod", "thread_prod", "guards", "tail_loops", "n_loads"]
    + [f"total_bytes_{lv}" for lv in _LEVEL_NAMES]
    + ["ai_all", "ai_par", f"ai_l{LEVELS - 1}"]
)
_GLOBAL_NAMES = [
    "total_flops", "n_stores", "n_loops", "n_eff_loops", "max_par", "local_bytes", "shared_bytes", "temp_bytes",
    "guards", "tail_loops", "barriers", "total_executions", "vec_flop_frac", "par_flop_frac",
    "gpu_blocks", "gpu_threads",
]

FEATURE_NAMES: list[str] = (
    [f"s{r}.{name}" for r in range(MAX_STORES) for name in
     _ROW_NAMES + [f"a{a}.{n}" for a in range(1 + MAX_LOADS) for n in _ACCESS_NAMES]]
    + [f"g.{name}" for name in _GLOBAL_NAMES]
)
FEATURE_DIM = len(FEATURE_NAMES)
_ROW_DIM = len(_ROW_NAMES) + (1 + MAX_LOADS) * len(_ACCESS_NAMES)


def _log(x: float) -> float:
    return math.log2(1.0 + x) if x > 0 else 0.0


# ---------------------------------------------------------------- index analysis


class _Loop:
    """One enclosing loop of a store: its variable, constant extent, kind and thread tag."""

    __slots__ = ("var", "extent", "kind", "tag", "tail")

    def __init__(self, var: Var, extent: int, kind: str, tag: str | None, tail: bool = False):
        self.var, self.extent, self.kind, self.tag, self.tail = var, extent, kind, tag, tail

    @property
    def is_block(self) -> bool:
        return self.kind == ir.THREAD_BINDING and (self.tag or "").startswith("blockIdx")

    @property
    def is_thread(self) -> bool:
        return self.kind == ir.THREAD_BINDING and not self.is_block


def _linear(e, memo: dict) -> tuple[dict, int, list]:
    """``e`` as ``({var: coeff}, const, [(coeff, non-linear term)])``; memoized by node id."""
    hit = memo.get(id(e))
    if hit is not None:
        return hit
    if isinstance(e, Var):
        out = ({e: 1}, 0, [])
    elif isinstance(e, Const) and isinstance(e.value, int):
        out = ({}, int(e.value), [])
    elif isinstance(e, Binary) and e.op in ("add", "sub"):
        (ca, ka, na), (cb, kb, nb) = _linear(e.a, memo), _linear(e.b, memo)
        sign = 1 if e.op == "add" else -1
        coeffs = dict(ca)
        for v, c in cb.items():
            coeffs[v] = coeffs.get(v, 0) + sign * c
        out = (coeffs, ka + sign * kb, na + [(sign * c, t) for c, t in nb])
    elif isinstance(e, Binary) and e.op == "mul" and (isinstance(e.a, Const) or isinstance(e.b, Const)):
        k, other = (e.a, e.b) if isinstance(e.a, Const) else (e.b, e.a)
        c0, k0, n0 = _linear(other, memo)
        s = int(k.value)
        out = ({v: c * s for v, c in c0.items()}, k0 * s, [(c * s, t) for c, t in n0])
    else:
        out = ({}, 0, [(1, e)])
    memo[id(e)] = out
    return out


class _Dim:
    """One index dimension of an access: linear coefficients and non-linear terms."""

    __slots__ = ("coeffs", "nonlin", "nl_vars", "size")

    def __init__(self, index, size: int, memo: dict, fv_memo: dict):
        coeffs, _, nonlin = _linear(index, memo)
        self.coeffs = {v: c for v, c in coeffs.items() if c != 0}
        self.nonlin = [(c, t, _free(t, fv_memo)) for c, t in nonlin if c != 0]
        self.nl_vars = set().union(*(fv for _, _, fv in self.nonlin)) if self.nonlin else set()
        self.size = size

    def uses(self, v: Var) -> bool:
        return v in self.coeffs or v in self.nl_vars


def _free(term, fv_memo: dict) -> frozenset:
    hit = fv_memo.get(id(term))
    if hit is None:
        hit = fv_memo[id(term)] = frozenset(free_vars(term))
    return hit


def _nonlin_span(dim: _Dim, included: dict) -> int:
    """Range width of ``dim``'s non-linear terms when the ``included`` loops run."""
    span = 0
    for c, term, fv in dim.nonlin:
        if not (fv & included.keys()):
            continue
        bounds = {v: (0, included[v] - 1) if v in included else (0, 0) for v in fv}
        r = interval(term, bounds)
        if r is None:
            r = (0, math.prod(included[v] for v in fv if v in included) - 1)
        span += abs(c) * (r[1] - r[0])
    return span


class _Access:
    """A buffer access (the store or a load) and what the loop nest makes of it."""

    __slots__ = ("buffer", "dims", "elem_bytes", "key")

    def __init__(self, buffer: ir.Buffer, indices, memo: dict, fv_memo: dict):
        self.buffer = buffer
        shape = buffer.shape or (1,)
        self.dims = [_Dim(i, s, memo, fv_memo) for i, s in zip(indices, shape)]
        self.elem_bytes = max(1, dtypes.bits(buffer.dtype) // 8)
        self.key = (id(buffer), tuple(
            (tuple(sorted((id(v), c) for v, c in d.coeffs.items())), _linear(i, memo)[1],
             tuple((c, structural_key(t)) for c, t, _ in d.nonlin))
            for d, i in zip(self.dims, indices)))

    def uses(self, v: Var) -> bool:
        return any(d.uses(v) for d in self.dims)

    def stride(self, v: Var) -> int:
        """Elements between the accesses of consecutive iterations of loop ``v`` (row-major)."""
        total, row = 0, 1
        for d in reversed(self.dims):
            c = d.coeffs.get(v, 0)
            if v in d.nl_vars:
                c += _nonlin_span(d, {v: 2})
            total += c * row
            row *= d.size
        return total

    def footprints(self, loops: list[_Loop]) -> list[int]:
        """Distinct elements touched when the innermost 1, 2, ... len(loops) loops run."""
        spans = [1] * len(self.dims)
        counts = [1] * len(self.dims)
        included: dict = {}
        out = []
        for loop in reversed(loops):
            v, e = loop.var, loop.extent
            included[v] = e
            for n, d in enumerate(self.dims):
                c = d.coeffs.get(v)
                if c is not None:
                    spans[n] += abs(c) * (e - 1)
                    counts[n] *= e
                elif v in d.nl_vars:
                    counts[n] *= e
            elems = 1
            for n, d in enumerate(self.dims):
                span = spans[n] + (_nonlin_span(d, included) if d.nl_vars and d.nl_vars & included.keys() else 0)
                elems *= min(span, counts[n], d.size)
            out.append(elems)
        return out


# ---------------------------------------------------------------- per-store rows


class _Ops:
    """Operation counts of one stored value, and the loads it makes (in order)."""

    __slots__ = (*_OP_FIELDS, "loads")

    def __init__(self):
        for f in _OP_FIELDS:
            setattr(self, f, 0)
        self.loads: list[BufferLoad] = []

    @property
    def flops(self) -> int:
        return self.f_addsub + self.f_mul + self.f_div + self.f_math + self.f_cmp


def _count_ops(value, indices) -> _Ops:
    ops = _Ops()
    stack = [value, *indices]
    while stack:
        e = stack.pop()
        t = type(e)
        if t is Binary:
            if dtypes.is_float(e.dtype):
                if e.op in ("add", "sub"):
                    ops.f_addsub += 1
                elif e.op == "mul":
                    ops.f_mul += 1
                elif e.op == "div":
                    ops.f_div += 1
                elif e.op in ("min", "max"):
                    ops.f_cmp += 1
                else:
                    ops.f_math += 1
            elif e.op in ("floordiv", "floormod", "div"):
                ops.int_divmod += 1
            else:
                ops.int_arith += 1
            stack.append(e.a)
            stack.append(e.b)
        elif t is BufferLoad:
            ops.loads.append(e)
            stack.extend(e.indices)
        elif t is Call:
            ops.f_math += 1
            stack.extend(e.args)
        elif t is Compare:
            if dtypes.is_float(e.a.dtype):
                ops.f_cmp += 1
            else:
                ops.int_arith += 1
            stack.append(e.a)
            stack.append(e.b)
        elif t is Select:
            ops.select += 1
            stack.extend((e.cond, e.true_value, e.false_value))
        elif t is Logical or t is Not:
            ops.bool_ops += 1
            stack.extend(e.children())
        elif t is Cast:
            stack.append(e.value)
        elif t is not Var and t is not Const:
            stack.extend(e.children())
    ops.loads.reverse()  # the stack visits right to left; keep program order
    return ops


class _Row:
    """The features of one store, plus the sort key that picks the stores kept."""

    __slots__ = ("values", "total_flops", "executions", "weight", "vectorized", "parallel", "order")


def _level_values(fp: list[int], loops: list[_Loop], par_pos: int | None) -> list[int]:
    """Footprints (elements) at the LEVELS innermost levels, per parallel iteration, whole nest."""
    if not fp:
        return [1] * (LEVELS + 2)
    inner = [fp[min(n, len(fp) - 1)] for n in range(LEVELS)]
    below_par = len(loops) - 1 - par_pos if par_pos is not None else len(loops)
    per_par = fp[below_par - 1] if below_par > 0 else 1
    return inner + [per_par, fp[-1]]


def _distinct_accesses(store: BufferStore, loads: list[BufferLoad], memo: dict,
                       fv_memo: dict) -> tuple[list[_Access], bool]:
    """The store, then each distinct load; and whether the store's own element is read."""
    st = _Access(store.buffer, store.indices, memo, fv_memo)
    accesses = [st]
    seen = {st.key}
    rmw = False
    for load in loads:
        acc = _Access(load.buffer, load.indices, memo, fv_memo)
        if acc.key in seen:
            rmw |= acc.key == st.key
            continue
        seen.add(acc.key)
        accesses.append(acc)
    return accesses, rmw


def _store_row(store: BufferStore, stack: list[_Loop], guards: int, memo: dict, fv_memo: dict) -> _Row:
    loops = [lp for lp in stack if lp.extent > 1]
    ops = _count_ops(store.value, store.indices)
    executions = math.prod(lp.extent for lp in loops)
    accesses, rmw = _distinct_accesses(store, ops.loads, memo, fv_memo)

    par_pos = next((n for n, lp in enumerate(loops) if lp.kind == ir.PARALLEL or lp.is_block), None)
    fps = [a.footprints(loops) for a in accesses]
    levels = [_level_values(fp, loops, par_pos) for fp in fps]
    bytes_levels = [[x * a.elem_bytes for x in lv] for a, lv in zip(accesses, levels)]
    total_bytes = [sum(col) for col in zip(*bytes_levels)]
    iters_inner = []  # iterations when the n innermost loops run
    it = 1
    for lp in reversed(loops):
        it *= lp.extent
        iters_inner.append(it)
    total_by_loop = [sum(fp[n] * a.elem_bytes for fp, a in zip(fps, accesses)) for n in range(len(loops))]

    # Load slots: most bytes touched over the nest first (program order on ties); MAX_LOADS kept.
    loads = sorted(range(1, len(accesses)), key=lambda n: -bytes_levels[n][-1])[:MAX_LOADS]
    slots = [0] + loads

    flops = ops.flops
    total_flops = flops * executions
    par_prod = _prod0(lp.extent for lp in loops if lp.kind == ir.PARALLEL or lp.is_block)
    inner = loops[-1] if loops else None

    v: list[float] = [1.0, float(rmw)]
    v += [_log(getattr(ops, f)) for f in _OP_FIELDS]
    v += [_log(flops), _log(total_flops), _log(executions)]
    v += _loop_values(loops, len(stack), par_pos, executions)
    v += [_log(guards), _log(sum(lp.tail for lp in loops)), _log(len(accesses) - 1)]
    v += [_log(b) for b in total_bytes]
    inner_flops = flops * (iters_inner[LEVELS - 1] if len(iters_inner) >= LEVELS else executions)
    v += [_log(total_flops / max(total_bytes[-1], 1)),
          _log(total_flops / max(par_prod, 1) / max(total_bytes[-2], 1)),
          _log(inner_flops / max(total_bytes[LEVELS - 1], 1))]

    for slot in range(1 + MAX_LOADS):
        if slot >= len(slots):
            v += [0.0] * len(_ACCESS_NAMES)
            continue
        n = slots[slot]
        v += _access_values(accesses[n], accesses, loops, inner, fps[n], bytes_levels[n], iters_inner,
                            total_by_loop)

    row = _Row()
    row.values = v
    row.total_flops = total_flops
    row.executions = executions
    row.weight = executions * len(accesses)
    row.vectorized = any(lp.kind == ir.VECTORIZED for lp in loops)
    row.parallel = par_prod > 1
    return row


def _prod0(xs) -> int:
    """The product of ``xs``, or 0 when there are none (so "no such loop" logs to 0)."""
    xs = list(xs)
    return math.prod(xs) if xs else 0


def _loop_values(loops: list[_Loop], depth: int, par_pos: int | None, executions: int) -> list[float]:
    """Loop-structure features of one store: nest depth, innermost loop, vector/unroll/parallel."""
    inner = loops[-1] if loops else None
    par = [lp.extent for lp in loops if lp.kind == ir.PARALLEL or lp.is_block]
    unr = [lp.extent for lp in loops if lp.kind == ir.UNROLLED]
    v = [_log(len(loops)), _log(depth), _log(inner.extent if inner else 0)]
    v += [float(inner is not None and inner.kind == k) for k in _KINDS]
    v += [_log(_prod0(lp.extent for lp in loops if lp.kind == ir.VECTORIZED)),
          float(inner is not None and inner.kind == ir.VECTORIZED),
          _log(_prod0(unr)), _log(len(unr)),
          _log(_prod0(par)), _log(len(par)), _log(executions / max(_prod0(par), 1)),
          _log(len(loops) - 1 - par_pos if par_pos is not None else 0),
          _log(_prod0(lp.extent for lp in loops if lp.is_block)),
          _log(_prod0(lp.extent for lp in loops if lp.is_thread))]
    return v


def _access_values(acc: _Access, accesses, loops, inner, fp, bytes_levels, iters_inner,
                   total_by_loop) -> list[float]:
    scope = acc.buffer.scope
    stride = abs(acc.stride(inner.var)) if inner is not None else 0
    v = [1.0, *(float(scope == s) for s in _SCOPES), _log(acc.elem_bytes), _log(stride),
         float(stride == 0), float(stride == 1), float(stride > 1)]
    v += [_log(b) for b in bytes_levels]
    for n in range(LEVELS):  # iterations per distinct element when the n+1 innermost loops run
        k = min(n, len(iters_inner) - 1)
        v.append(_log(iters_inner[k] / fp[k]) if iters_inner else 0.0)
    # The reuse loop: the innermost loop whose variable the access does not use.
    pos = next((n for n, lp in enumerate(reversed(loops)) if not acc.uses(lp.var)), None)
    if pos is None:
        v += [0.0, 0.0, 0.0, 1.0]
    else:
        dis_iter = iters_inner[pos - 1] if pos > 0 else 1
        dis_bytes = total_by_loop[pos - 1] if pos > 0 else sum(a.elem_bytes for a in accesses)
        v += [_log(dis_iter), _log(dis_bytes), _log(loops[len(loops) - 1 - pos].extent), 0.0]
    return v


# ---------------------------------------------------------------- the walk


class _Walk:
    """One pass over the IR: rows for stores, plus the global counters."""

    def __init__(self):
        self.rows: list[_Row] = []
        self.stack: list[_Loop] = []
        self.guards = 0
        self.n_loops = 0
        self.n_eff_loops = 0
        self.tail_loops = 0
        self.bounds: dict = {}
        self.max_par = 0
        self.alloc = {"local": 0, "shared": 0, "global": 0}
        self.total_guards = 0
        self.barriers = 0
        self.blocks = 0
        self.threads = 0
        self.memo: dict = {}
        self.fv_memo: dict = {}

    def visit(self, s) -> None:
        t = type(s)
        if t is For:
            extent = ir.const_int(s.extent)
            tail = extent is None
            if tail:  # a tail loop (``min(f, n - i*f)``): its largest extent
                r = interval(s.extent, self.bounds)
                extent = max(1, r[1]) if r is not None else 1
            self.n_loops += 1
            self.tail_loops += tail
            loop = _Loop(s.var, extent, s.kind, s.thread_tag, tail)
            if extent > 1:
                self.n_eff_loops += 1
                if s.kind == ir.PARALLEL:
                    self.max_par = max(self.max_par, extent)
            self.stack.append(loop)
            self.bounds[s.var] = (0, extent - 1)
            if s.kind == ir.THREAD_BINDING:
                self._gpu_extents()
            self.visit(s.body)
            self.stack.pop()
        elif t is Seq:
            for x in s.stmts:
                self.visit(x)
        elif t is BufferStore:
            row = _store_row(s, self.stack, self.guards, self.memo, self.fv_memo)
            row.order = len(self.rows)
            self.rows.append(row)
        elif t is Allocate:
            b = s.buffer
            self.alloc[b.scope if b.scope in self.alloc else "global"] += b.size * max(1, dtypes.bits(b.dtype) // 8)
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

    def _gpu_extents(self) -> None:
        blocks = _prod0(lp.extent for lp in self.stack if lp.is_block)
        threads = _prod0(lp.extent for lp in self.stack if lp.is_thread)
        self.blocks, self.threads = max(self.blocks, blocks), max(self.threads, threads)


def extract(func: LoweredFunc) -> np.ndarray:
    """The feature vector (float32[FEATURE_DIM]) of a lowered function."""
    w = _Walk()
    w.visit(func.body)
    rows = sorted(w.rows, key=lambda r: (-r.total_flops, -r.weight, r.order))
    out = np.zeros(FEATURE_DIM, dtype=np.float32)
    for n, row in enumerate(rows[:MAX_STORES]):
        out[n * _ROW_DIM:(n + 1) * _ROW_DIM] = row.values
    total_flops = sum(r.total_flops for r in w.rows)
    flops_or_1 = max(total_flops, 1)
    g = [
        _log(total_flops), _log(len(w.rows)), _log(w.n_loops), _log(w.n_eff_loops), _log(w.max_par),
        _log(w.alloc["local"]), _log(w.alloc["shared"]), _log(w.alloc["global"]),
        _log(w.total_guards), _log(w.tail_loops), _log(w.barriers), _log(sum(r.executions for r in w.rows)),
        sum(r.total_flops for r in w.rows if r.vectorized) / flops_or_1,
        sum(r.total_flops for r in w.rows if r.parallel) / flops_or_1,
        _log(w.blocks), _log(w.threads),
    ]
    out[MAX_STORES * _ROW_DIM:] = g
    return out


def describe(x: np.ndarray, nonzero_only: bool = True) -> str:
    """``name = value`` lines of a feature vector (for debugging and docs)."""
    return "\n".join(f"{n} = {v:.3f}" for n, v in zip(FEATURE_NAMES, x) if v or not nonzero_only)


# ---------------------------------------------------------------- the cache

#: Fewest new configs worth sending to the worker pool.
PARALLEL_MIN = 32
_WORKER_TASKS: dict = {}


def _ignore_sigint() -> None:
    """Pool workers leave Ctrl-C to the tuner, which shuts the pool down."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _lower_and_extract(job) -> np.ndarray | None:
    """Pool worker: features of one config (None if it does not lower)."""
    from schedule.config import Config

    from .task import Task

    name, params, target, config_json = job
    key = (name, repr(sorted(params.items())), target)
    task = _WORKER_TASKS.get(key)
    if task is None:
        task = _WORKER_TASKS[key] = Task(name, params, target)
    try:
        return extract(task.lower(Config.from_json(config_json)))
    except Exception:  # noqa: BLE001 - a broken config must not stop a search
        return None



class FeatureCache:
    """Features per (task, config), lowered and extracted once; LRU beyond ``max_entries``.

    Keys are the task's workload key and target plus the config's hash, so one cache
    can serve several tasks. A config that fails to lower gets an all-zero vector
    (counted in ``failures``): the tuner never proposes such configs on purpose, and a
    search must not die on one. ``lower_s``/``extract_s`` accumulate the time spent.
    """

    def __init__(self, max_entries: int = 50_000, workers: int = 1):
        self.max_entries = max_entries
        self.workers = workers
        self._pool = None
        self._data: OrderedDict[tuple, np.ndarray] = OrderedDict()
        self.hits = self.misses = self.failures = 0
        self.lower_s = self.extract_s = 0.0

    def __len__(self) -> int:
        return len(self._data)

    @property
    def seconds(self) -> float:
        """Time spent lowering and extracting, in all."""
        return self.lower_s + self.extract_s

    def get(self, task, config) -> np.ndarray:
        key = (task.key, task.target, config.hash)
        x = self._data.get(key)
        if x is not None:
            self.hits += 1
            self._data.move_to_end(key)
            return x
        self.misses += 1
        t0 = time.perf_counter()
        try:
            func = task.lower(config)
        except Exception:  # noqa: BLE001 - a broken config must not stop a search
            self.failures += 1
            func = None
        t1 = time.perf_counter()
        x = extract(func) if func is not None else np.zeros(FEATURE_DIM, dtype=np.float32)
        self.lower_s += t1 - t0
        self.extract_s += time.perf_counter() - t1
        x.setflags(write=False)
        self._data[key] = x
        if len(self._data) > self.max_entries:
            self._data.popitem(last=False)
        return x

    def get_many(self, task, configs) -> np.ndarray:
        """Features of ``configs`` as a (len(configs), FEATURE_DIM) array.

        Lowering is the cost (milliseconds per config); when many configs are new and
        ``workers`` > 1, they are lowered and extracted in a pool of forked processes.
        """
        if not configs:
            return np.zeros((0, FEATURE_DIM), dtype=np.float32)
        missing = [c for c in dict.fromkeys(configs) if (task.key, task.target, c.hash) not in self._data]
        if self.workers > 1 and len(missing) >= PARALLEL_MIN:
            self._extract_in_pool(task, missing)
        return np.stack([self.get(task, c) for c in configs])

    def _extract_in_pool(self, task, configs) -> None:
        t0 = time.perf_counter()
        if self._pool is None:
            import multiprocessing
            from concurrent.futures import ProcessPoolExecutor

            # fork: children inherit the registered workloads (also user ones) and need no
            # re-import; they only lower and extract, never run OpenMP code.
            self._pool = ProcessPoolExecutor(self.workers, mp_context=multiprocessing.get_context("fork"),
                                             initializer=_ignore_sigint)
        jobs = [(task.workload_name, task.params, task.target, c.to_json()) for c in configs]
        chunk = max(1, len(jobs) // (4 * self.workers))
        for config, x in zip(configs, self._pool.map(_lower_and_extract, jobs, chunksize=chunk)):
            if x is None:
                self.failures += 1
                x = np.zeros(FEATURE_DIM, dtype=np.float32)
            x.setflags(write=False)
            self._data[(task.key, task.target, config.hash)] = x
        self.misses += len(configs)
        self.lower_s += time.perf_counter() - t0
        while len(self._data) > self.max_entries:
            self._data.popitem(last=False)

    def close(self) -> None:
        """Stop the worker pool (if one was started)."""
        if self._pool is not None:
            self._pool.shutdown(cancel_futures=True)
            self._pool = None

    def feature_fn(self, task):
        """``config -> features`` for ``task``: what ``XGBTuner`` takes."""
        return lambda config: self.get(task, config)
