"""Memory-access features: per buffer access, the bytes touched and the reuse at each loop level.

Per access slot (the store, then up to ``MAX_LOADS`` distinct loads, most bytes first):

    scope_*, elem_bytes                  where the buffer lives, element size
    stride, stride_zero/one/big          elements between consecutive innermost iterations
    bytes_l0..l3, bytes_par, bytes_all   bytes touched when the 1..4 innermost loops run,
                                         per parallel iteration, over the whole nest
    reuse_l0..l3                         iterations per distinct element at those levels
    reuse_dis_iter, reuse_dis_bytes,     the innermost loop the access does not depend on
    reuse_ct, no_reuse                   (Ansor's reuse distance and count)

Per store row, ``total_bytes_*`` sums the slots' bytes at each level.

Footprints are estimates, computed per index dimension from the linear form of the
index (``sum(c_v * v) + k``): when loops ``L`` run, dimension ``d`` takes at most
``min(1 + sum_{v in L} |c_v| (extent_v - 1), prod_{v in L, v in d} extent_v,
shape_d)`` distinct values, and the footprint is the product over dimensions. That
is exact for tiles (``io*32 + ii``) and sliding windows (``y + ry``); non-linear
terms (``fused // 4``) use interval bounds.
"""
from __future__ import annotations

import math

from ._deps import Binary, BufferLoad, BufferStore, Const, Var, dtypes, free_vars, interval, ir, structural_key
from .layout import ACCESS_NAMES, LEVELS, MAX_LOADS, SCOPES, log_scale
from .loops import Loop

# ---------------------------------------------------------------- index analysis


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


class Access:
    """A buffer access (the store or a load) and what the loop nest makes of it."""

    __slots__ = ("buffer", "dims", "elem_bytes", "key")

    def __init__(self, buffer: ir.Buffer, indices, memo: dict, fv_memo: dict):
        self.buffer = buffer
        shape = buffer.shape or (1,)
        self.dims = [_Dim(i, s, memo, fv_memo) for i, s in zip(indices, shape)]
        self.elem_bytes = dtypes.nbytes(buffer.dtype)
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

    def footprints(self, loops: list[Loop]) -> list[int]:
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


def distinct_accesses(store: BufferStore, loads: list[BufferLoad], memo: dict,
                      fv_memo: dict) -> tuple[list[Access], bool]:
    """The store, then each distinct load; and whether the store's own element is read.

    A load equal to the store (an accumulator's read) is folded into that flag.
    """
    st = Access(store.buffer, store.indices, memo, fv_memo)
    accesses = [st]
    seen = {st.key}
    rmw = False
    for load in loads:
        acc = Access(load.buffer, load.indices, memo, fv_memo)
        if acc.key in seen:
            rmw |= acc.key == st.key
            continue
        seen.add(acc.key)
        accesses.append(acc)
    return accesses, rmw


# ---------------------------------------------------------------- per-store figures


def _level_values(fp: list[int], loops: list[Loop], par_pos: int | None) -> list[int]:
    """Footprints (elements) at the LEVELS innermost levels, per parallel iteration, whole nest."""
    if not fp:
        return [1] * (LEVELS + 2)
    inner = [fp[min(n, len(fp) - 1)] for n in range(LEVELS)]
    below_par = len(loops) - 1 - par_pos if par_pos is not None else len(loops)
    per_par = fp[below_par - 1] if below_par > 0 else 1
    return inner + [per_par, fp[-1]]


class StoreAccesses:
    """The accesses of one store and their footprints, in bytes, at every level that has a feature.

    ``total_bytes`` sums all accesses per level (the LEVELS innermost, per parallel
    iteration, whole nest); ``slots`` are the access indices that get a slot: the
    store, then the loads touching most bytes over the nest (program order on ties).
    """

    def __init__(self, accesses: list[Access], loops: list[Loop], par_pos: int | None, iters_inner: list[int]):
        self.accesses = accesses
        self.loops = loops
        self.iters_inner = iters_inner
        self.fps = [a.footprints(loops) for a in accesses]
        levels = [_level_values(fp, loops, par_pos) for fp in self.fps]
        self.bytes_levels = [[x * a.elem_bytes for x in lv] for a, lv in zip(accesses, levels)]
        self.total_bytes = [sum(col) for col in zip(*self.bytes_levels)]
        self.total_by_loop = [sum(fp[n] * a.elem_bytes for fp, a in zip(self.fps, accesses))
                              for n in range(len(loops))]
        loads = sorted(range(1, len(accesses)), key=lambda n: -self.bytes_levels[n][-1])[:MAX_LOADS]
        self.slots = [0] + loads

    def total_values(self) -> list[float]:
        """``total_bytes_*`` of the row."""
        return [log_scale(b) for b in self.total_bytes]

    def slot_values(self) -> list[float]:
        """The 1 + MAX_LOADS access slots of the row (absent ones all zero)."""
        inner = self.loops[-1] if self.loops else None
        v: list[float] = []
        for slot in range(1 + MAX_LOADS):
            if slot >= len(self.slots):
                v += [0.0] * len(ACCESS_NAMES)
                continue
            n = self.slots[slot]
            v += self._access_values(self.accesses[n], inner, self.fps[n], self.bytes_levels[n])
        return v

    def _access_values(self, acc: Access, inner: Loop | None, fp, bytes_levels) -> list[float]:
        loops, iters_inner = self.loops, self.iters_inner
        scope = acc.buffer.scope
        stride = abs(acc.stride(inner.var)) if inner is not None else 0
        v = [1.0, *(float(scope == s) for s in SCOPES), log_scale(acc.elem_bytes), log_scale(stride),
             float(stride == 0), float(stride == 1), float(stride > 1)]
        v += [log_scale(b) for b in bytes_levels]
        for n in range(LEVELS):  # iterations per distinct element when the n+1 innermost loops run
            k = min(n, len(iters_inner) - 1)
            v.append(log_scale(iters_inner[k] / fp[k]) if iters_inner else 0.0)
        # The reuse loop: the innermost loop whose variable the access does not use.
        pos = next((n for n, lp in enumerate(reversed(loops)) if not acc.uses(lp.var)), None)
        if pos is None:
            v += [0.0, 0.0, 0.0, 1.0]
        else:
            dis_iter = iters_inner[pos - 1] if pos > 0 else 1
            dis_bytes = self.total_by_loop[pos - 1] if pos > 0 else sum(a.elem_bytes for a in self.accesses)
            v += [log_scale(dis_iter), log_scale(dis_bytes), log_scale(loops[len(loops) - 1 - pos].extent), 0.0]
        return v

