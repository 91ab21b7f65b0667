"""Readable text for expressions and compute definitions.

Infix operators with minimal parentheses (by precedence), math calls by name,
reductions as ``sum(body, axis=[k])``. The output is deterministic, so it suits
golden tests.
"""
from __future__ import annotations

from .expr import Binary, Call, Cast, Compare, Const, Expr, Logical, Not, Reduce, Select, TensorRead, Var

_INFIX = {
    "add": ("+", 4), "sub": ("-", 4), "mul": ("*", 5), "div": ("/", 5),
    "floordiv": ("//", 5), "floormod": ("%", 5),
    "lt": ("<", 3), "le": ("<=", 3), "gt": (">", 3), "ge": (">=", 3), "eq": ("==", 3), "ne": ("!=", 3),
    "and": ("&&", 2), "or": ("||", 1),
}
_ATOM = 10


def _const_str(c: Const) -> str:
    if c.dtype == "bool":
        return "True" if c.value else "False"
    if c.dtype == "int32":
        return str(c.value)
    if c.dtype == "float32":
        return repr(c.value) + ("f" if c.value == c.value and abs(c.value) != float("inf") else "")
    return f"{c.dtype}({c.value!r})"


def _fmt(e: Expr, names=None) -> tuple[str, int]:
    """(text, precedence) of ``e``; extension nodes print themselves via ``_print``."""
    if isinstance(e, Var):
        return (names(e) if names else e.name), _ATOM
    if isinstance(e, Const):
        return _const_str(e), _ATOM
    if isinstance(e, (Binary, Compare, Logical)) and e.op in _INFIX:
        sym, prec = _INFIX[e.op]
        a, pa = _fmt(e.a, names)
        b, pb = _fmt(e.b, names)
        if pa < prec:
            a = f"({a})"
        if pb <= prec:  # left-associative: parenthesise equal precedence on the right
            b = f"({b})"
        return f"{a} {sym} {b}", prec
    if isinstance(e, Binary):  # min, max, pow
        return f"{e.op}({_s(e.a, names)}, {_s(e.b, names)})", _ATOM
    if isinstance(e, Not):
        a, pa = _fmt(e.a, names)
        return f"!({a})" if pa < _ATOM else f"!{a}", 6
    if isinstance(e, Select):
        return f"select({_s(e.cond, names)}, {_s(e.true_value, names)}, {_s(e.false_value, names)})", _ATOM
    if isinstance(e, Cast):
        return f"{e.dtype}({_s(e.value, names)})", _ATOM
    if isinstance(e, Call):
        return f"{e.func}({', '.join(_s(a, names) for a in e.args)})", _ATOM
    if isinstance(e, TensorRead):
        return f"{e.tensor.name}[{', '.join(_s(i, names) for i in e.indices)}]", _ATOM
    if isinstance(e, Reduce):
        axes = ", ".join(iv.name for iv in e.axes)
        where = "" if e.condition is None else f", where={_s(e.condition, names)}"
        logit = "" if e.logit is None else f", {_s(e.logit, names)}"
        return f"{e.combiner}({_s(e.source, names)}{logit}, axis=[{axes}]{where})", _ATOM
    custom = getattr(e, "_print", None)
    if custom is not None:
        return custom(lambda x: _s(x, names)), _ATOM
    return repr(e), _ATOM


def _s(e: Expr, names=None) -> str:
    return _fmt(e, names)[0]


def expr_to_str(e: Expr, names=None) -> str:
    """Text of ``e``. ``names`` optionally maps a Var to the name to print."""
    return _s(e, names)


def compute_to_str(tensor) -> str:
    """``C[i, j] = sum(A[i, k] * B[k, j], axis=[k])`` style definition of a tensor."""
    from .tensor import ComputeOp

    op = tensor.op
    if not isinstance(op, ComputeOp):
        return f"{tensor.name} = placeholder({tensor.shape}, {tensor.dtype})"
    axes = ", ".join(iv.name for iv in op.axis)
    return f"{tensor.name}[{axes}] = {expr_to_str(op.body)}"
