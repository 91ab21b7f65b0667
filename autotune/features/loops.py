"""Loop-structure features: the nest around a store, its innermost loop, and how it is annotated.

    n_loops, depth, inner_extent, inner_<kind>     the nest and its innermost loop
    vec_lanes, vec_inner                           vectorized lanes, innermost-vectorized flag
    unroll_prod, unroll_num                        unrolled extents and count
    par_prod, par_num, work_per_thread             parallel (or GPU block) extents and the work each gets
    loops_below_par                                loops nested inside the outermost parallel one
"""
from __future__ import annotations

from ._deps import Var, ir
from .layout import KINDS, log_scale, prod0


class Loop:
    """One enclosing loop of a store: its variable, constant extent, kind and thread tag.

    A tail loop (extent ``min(f, n - i*f)``) carries its largest extent and ``tail``.
    """

    __slots__ = ("var", "extent", "kind", "tag", "tail")

    def __init__(self, var: Var, extent: int, kind: str, tag: str | None, tail: bool = False):
        self.var, self.extent, self.kind, self.tag, self.tail = var, extent, kind, tag, tail

    @property
    def is_block(self) -> bool:
        return self.kind == ir.THREAD_BINDING and (self.tag or "").startswith("blockIdx")

    @property
    def is_thread(self) -> bool:
        return self.kind == ir.THREAD_BINDING and not self.is_block

    @property
    def spreads_work(self) -> bool:
        """A CPU parallel loop or a GPU block loop: its iterations run on different cores."""
        return self.kind == ir.PARALLEL or self.is_block


def effective(stack: list[Loop]) -> list[Loop]:
    """The loops that matter: extent-1 loops are no-ops and would shift every "n-th innermost" feature."""
    return [lp for lp in stack if lp.extent > 1]


def parallel_position(loops: list[Loop]) -> int | None:
    """Index of the outermost loop that spreads work over cores or blocks (None if there is none)."""
    return next((n for n, lp in enumerate(loops) if lp.spreads_work), None)


def iterations_inner(loops: list[Loop]) -> list[int]:
    """Iterations when the 1, 2, ... len(loops) innermost loops run."""
    out, it = [], 1
    for lp in reversed(loops):
        it *= lp.extent
        out.append(it)
    return out


def structure_values(loops: list[Loop], depth: int, par_pos: int | None, executions: int) -> list[float]:
    """Loop-structure features of one store: nest depth, innermost loop, vector/unroll/parallel."""
    inner = loops[-1] if loops else None
    par = [lp.extent for lp in loops if lp.spreads_work]
    unr = [lp.extent for lp in loops if lp.kind == ir.UNROLLED]
    v = [log_scale(len(loops)), log_scale(depth), log_scale(inner.extent if inner else 0)]
    v += [float(inner is not None and inner.kind == k) for k in KINDS]
    v += [log_scale(prod0(lp.extent for lp in loops if lp.kind == ir.VECTORIZED)),
          float(inner is not None and inner.kind == ir.VECTORIZED),
          log_scale(prod0(unr)), log_scale(len(unr)),
          log_scale(prod0(par)), log_scale(len(par)), log_scale(executions / max(prod0(par), 1)),
          log_scale(len(loops) - 1 - par_pos if par_pos is not None else 0)]
    return v
