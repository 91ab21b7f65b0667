"""Arithmetic features: what one stored value computes, how often, and per byte touched.

    f_addsub ... bool_ops        operation counts per execution, by kind
    flops, total_flops           float ops per execution and over the nest
    executions                   the product of the enclosing loop extents
    ai_all, ai_par, ai_l<n>      arithmetic intensity (flops per byte touched) over the
                                 nest, per parallel iteration, and in the innermost levels
"""
from __future__ import annotations

from ._deps import Binary, BufferLoad, Call, Cast, Compare, Const, Logical, Not, Select, Var, dtypes
from .layout import LEVELS, OP_FIELDS, log_scale


class Ops:
    """Operation counts of one stored value, and the loads it makes (in order)."""

    __slots__ = (*OP_FIELDS, "loads")

    def __init__(self):
        for f in OP_FIELDS:
            setattr(self, f, 0)
        self.loads: list[BufferLoad] = []

    @property
    def flops(self) -> int:
        return self.f_addsub + self.f_mul + self.f_div + self.f_math + self.f_cmp


def count_ops(value, indices) -> Ops:
    """The operations of a store's value and indices (float ops by kind, integer and boolean ops)."""
    ops = Ops()
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


def compute_values(ops: Ops, executions: int) -> list[float]:
    """Operation counts by kind, then ``flops``, ``total_flops``, ``executions``."""
    flops = ops.flops
    v = [log_scale(getattr(ops, f)) for f in OP_FIELDS]
    v += [log_scale(flops), log_scale(flops * executions), log_scale(executions)]
    return v


def intensity_values(flops: int, executions: int, par_prod: int, total_bytes: list[int],
                     iters_inner: list[int]) -> list[float]:
    """Flops per byte touched: over the nest, per parallel iteration, in the LEVELS innermost loops.

    ``total_bytes`` are the bytes all accesses touch at each level (the innermost
    LEVELS, per parallel iteration, whole nest); ``iters_inner`` the iterations when
    the n innermost loops run.
    """
    total_flops = flops * executions
    inner_flops = flops * (iters_inner[LEVELS - 1] if len(iters_inner) >= LEVELS else executions)
    return [log_scale(total_flops / max(total_bytes[-1], 1)),
            log_scale(total_flops / max(par_prod, 1) / max(total_bytes[-2], 1)),
            log_scale(inner_flops / max(total_bytes[LEVELS - 1], 1))]
