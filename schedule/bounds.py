"""Bound inference: how much of a producer a consumer needs inside one of its loops.

A stage attached with ``compute_at(host, axis)`` computes, at each iteration of
``axis``, exactly the region of its output that its readers read in the loops nested
below ``axis``: the host, and stages attached inside that loop when the host reads it
through them (their regions were inferred first, so a chain of attached stages carries
the host's need back one stage at a time). Each index a reader uses is brought to a
linear form (or a linear form divided by a constant, or its remainder: panel reads); loop
variables below the attach point vary over their extents, everything else (outer loops,
the host's own region offset) is a symbolic base. Reads that share a base union into one
box ``[base + lo, base + hi]`` per dimension. A dimension whose indices are not linear
in the varying loops, or whose reads have different bases, falls back to the whole
extent: larger, never wrong.
"""
from __future__ import annotations

from dataclasses import dataclass

from te.expr import Binary, Const, Expr, Var, free_vars

from .simplify import Analyzer, Linear


@dataclass(frozen=True)
class Region:
    """Per dimension: the first index (an expression over outer loops) and a static extent."""

    mins: tuple[Expr, ...]
    extents: tuple[int, ...]


def _linear_box(lin: Linear, varying: dict[Var, int]):
    """(base Linear, lo, hi) of one linear index: the terms of loops that do not vary are the
    base; the varying ones and the constant span ``[lo, hi]``. None if a term is non-linear
    in a varying loop."""
    base = Linear()
    vlo = vhi = 0
    for key, (term, coeff) in lin.terms.items():
        if isinstance(term, Var) and term in varying:
            span = coeff * (varying[term] - 1)
            vlo += min(0, span)
            vhi += max(0, span)
        elif free_vars(term) & varying.keys():
            return None
        else:
            base.terms[key] = (term, coeff)
    return base, lin.const + vlo, lin.const + vhi


def _index_box(an: Analyzer, idx: Expr, varying: dict[Var, int]):
    """(base Linear, lo, hi) of one index, or None.

    Besides linear indices, ``(base + v) // c`` and ``(base + v) % c`` of a constant ``c``
    whose base terms are all multiples of ``c``: the panel reads ``B.panels[j // 16, k, j % 16]``
    of a micro-kernel, whose tile of ``j`` starts at a multiple of the panel width. The base
    divides through (``//``) or drops out (``%``), and ``v``'s span maps to a span of whole
    panels, or of lanes within one panel."""
    idx = an.simplify(idx)
    if isinstance(idx, Binary) and idx.op in ("floordiv", "floormod") and isinstance(idx.b, Const) \
            and isinstance(idx.b.value, int) and idx.b.value > 0:
        c = idx.b.value
        box = _linear_box(an.linearize(idx.a), varying)
        if box is not None and not any(coeff % c for _, coeff in box[0].terms.values()):
            base, lo, hi = box
            if idx.op == "floordiv":
                return Linear({k: (t, coeff // c) for k, (t, coeff) in base.terms.items()}), lo // c, hi // c
            if lo // c != hi // c:
                return Linear(), 0, c - 1
            return Linear(), lo % c, hi % c
    # otherwise the division is one term of a linear form: a base when no varying loop is in it
    return _linear_box(an.linearize(idx), varying)


def _dim_box(an: Analyzer, indices: list[Expr], varying: dict[Var, int], full: int):
    """(base Linear, lo, hi) covering every index of one dimension, or None to use the full extent."""
    base_key = None
    base: Linear | None = None
    lo = hi = None
    for idx in indices:
        box = _index_box(an, idx, varying)
        if box is None:
            return None  # non-linear in a varying loop
        rest, this_lo, this_hi = box
        key = tuple((k, c) for k, (_, c) in rest.terms.items())
        if base_key is None:
            base_key, base = key, rest
        elif set(key) != set(base_key):
            return None
        lo = this_lo if lo is None else min(lo, this_lo)
        hi = this_hi if hi is None else max(hi, this_hi)
    if base is None or hi - lo + 1 >= full:
        return None
    return base, lo, hi


def infer_region(shape: tuple[int, ...], reads: list[tuple[Expr, ...]], varying: dict[Var, int],
                 analyzer: Analyzer | None = None) -> Region:
    """Region of a tensor of ``shape`` covering all ``reads`` as ``varying`` loops run.

    ``varying`` maps each loop variable below the attach point to its extent; ``analyzer``
    is the lowering's simplifier (its memo tables), a fresh one when omitted.
    """
    an = analyzer or Analyzer()
    mins, extents = [], []
    for d, full in enumerate(shape):
        box = _dim_box(an, [r[d] for r in reads], varying, full) if reads else None
        if box is None:
            mins.append(Const(0))
            extents.append(full)
            continue
        base, lo, hi = box
        mins.append(an.simplify(Linear(base.terms, lo).to_expr()))
        extents.append(hi - lo + 1)
    return Region(tuple(mins), tuple(extents))
