"""Index arithmetic: linear forms, interval bounds, and the simplifier.

Integer index expressions are brought to a canonical linear form ``sum(c_i * t_i) + k``
over *terms* (variables, or non-linear sub-expressions kept whole). On that form:

- constants fold and like terms cancel (``(io*32 + ii) - io*32  ->  ii``);
- ``(c*q + r) // c -> q`` and ``(c*q + r) % c -> r`` when ``0 <= r < c`` is provable
  from the loop bounds, which undoes the div/mod that ``fuse`` and ``split`` introduce;
- comparisons whose outcome the bounds decide fold to True/False, so guards of splits
  that divide their extent disappear.

``Bounds`` maps loop variables to inclusive integer ranges. An ``Analyzer`` is the
simplifier with its memo tables (structural keys, linear forms): one per lowering, so
nothing is cached on the immutable ``te`` nodes themselves.
"""
from __future__ import annotations

from typing import Dict, Optional, Tuple

from te import dtypes
from te.expr import (
    Binary, Cast, Compare, Const, Expr, Logical, Not, Select, Var,
    post_order, rebuild, rewrite_bottom_up, substitute,
)

Interval = Tuple[int, int]
Bounds = Dict[Var, Interval]


# ---------------------------------------------------------------- the analyzer's memo tables


class Analyzer:
    """The simplifier with its memo tables, for one lowering.

    Structural keys and linear forms are pure functions of an (immutable) node, and
    lowering asks for them again and again (each level of an index chain linearizes
    the chain below it), so they are remembered here, keyed by the node itself (nodes
    hash by identity, and the table keeps them alive, so no id is reused). The tables
    live as long as the analyzer: ``schedule.lower`` makes one per lowering and hands
    it to every pass; the module-level functions below use a fresh one per call.
    """

    __slots__ = ("_keys", "_linear", "_sensitive", "_simplified")

    def __init__(self):
        self._keys: dict[Expr, object] = {}
        self._linear: dict[Expr, Linear] = {}
        self._sensitive: dict[Expr, bool] = {}
        self._simplified: dict[Expr, Expr] = {}  # node -> simplified without bounds

    def structural_key(self, e: Expr):
        """A hashable key equal for structurally equal expressions (variables by identity)."""
        keys = self._keys
        cached = keys.get(e)
        if cached is not None:
            return cached
        for node in post_order(e):
            if node in keys:
                continue
            if isinstance(node, Var):
                key = ("var", id(node))
            elif isinstance(node, Const):
                key = ("const", node.dtype, node.value)
            else:
                extra = getattr(node, "op", None) or getattr(node, "func", None) or getattr(node, "combiner", None)
                target = getattr(node, "buffer", None) or getattr(node, "tensor", None)
                key = (type(node).__name__, node.dtype, extra, id(target) if target is not None else None,
                       tuple(keys[c] for c in node.children()))
            keys[node] = key
        return keys[e]

    def linearize(self, e: Expr) -> "Linear":
        """The linear form of an (already simplified) integer expression; do not mutate it."""
        cached = self._linear.get(e)
        if cached is None:
            cached = self._linear[e] = self._linearize(e)
        return cached

    def _linearize(self, e: Expr) -> "Linear":
        if isinstance(e, Const):
            return Linear(const=int(e.value))
        if isinstance(e, Binary) and e.op in ("add", "sub"):
            return self.linearize(e.a).plus(self.linearize(e.b), 1 if e.op == "add" else -1)
        if isinstance(e, Binary) and e.op == "mul":
            la, lb = self.linearize(e.a), self.linearize(e.b)
            if lb.is_const:
                return la.scaled(lb.const)
            if la.is_const:
                return lb.scaled(la.const)
        return Linear({self.structural_key(e): (e, 1)})

    def simplify(self, e: Expr, bounds: "Bounds | None" = None) -> Expr:
        """Simplify ``e`` bottom-up using variable ``bounds`` (inclusive ranges).

        Without bounds the result is a pure function of the node, so it is remembered: the
        index expressions of one lowering share most of their subtrees (the loop variables'
        root values), and each is simplified once.
        """
        if bounds:
            return rewrite_bottom_up(e, lambda node: _simplify_node(self, node, bounds))
        try:
            return self._simplify_unbounded(e)
        except RecursionError:  # deeper than Python's recursion limit: the iterative walk
            return rewrite_bottom_up(e, lambda node: _simplify_node(self, node, {}))

    def _simplify_unbounded(self, node: Expr) -> Expr:
        done = self._simplified.get(node)
        if done is not None:
            return done
        kids = node.children()
        if kids:
            node_ = rebuild(node, tuple([self._simplify_unbounded(k) for k in kids]))
        else:
            node_ = node
        out = self._simplified[node] = _simplify_node(self, node_, {})
        return out

    def substitute(self, e: Expr, mapping: "dict[Var, Expr]") -> Expr:
        """``e`` with the variables of ``mapping`` replaced, and simplified where a replacement
        reached: each node above one is simplified again (``0 * 8 + j`` -> ``j``), and every
        subtree without a replaced variable is kept as it is, taken as already simplified.

        The lowering passes that give a loop variable a value (a loop of one iteration, the
        rows of a specialized loop) call this on every expression of the loop's body: a full
        ``simplify`` of each would rebuild every node of it, and that was most of lowering.
        """
        memo: dict[int, Expr] = {}

        def rewrite(node: Expr) -> Expr:
            done = memo.get(id(node))
            if done is not None:
                return done
            if isinstance(node, Var):
                out = mapping.get(node, node)
            else:
                kids = node.children()
                new_kids = tuple([rewrite(k) for k in kids])
                if all(a is b for a, b in zip(kids, new_kids)):
                    out = node
                else:
                    out = _simplify_node(self, rebuild(node, new_kids), {})
            memo[id(node)] = out
            return out

        try:
            return rewrite(e)
        except RecursionError:  # deeper than Python's recursion limit: substitute, then simplify all
            new = substitute(e, mapping)
            return new if new is e else self.simplify(new)

    def prove(self, cond: Expr, bounds: "Bounds") -> bool | None:
        """True/False if the bounds decide ``cond``, else None."""
        s = self.simplify(cond, bounds)
        return bool(s.value) if isinstance(s, Const) else None

    def simplify_under(self, e: Expr, bounds: "Bounds") -> Expr:
        """Re-simplify an already simplified ``e`` under ``bounds``, when bounds can change it.

        Only div/mod, min/max and comparisons profit from knowing the loop ranges, so
        any other expression comes back as it is without a walk (lowering's hot path).
        """
        sensitive = self._sensitive.get(e)
        if sensitive is None:
            sensitive = self._sensitive[e] = any(
                isinstance(n, Compare) or (isinstance(n, Binary) and n.op in _BOUNDS_SENSITIVE_OPS)
                for n in post_order(e))
        return self.simplify(e, bounds) if sensitive else e


_BOUNDS_SENSITIVE_OPS = ("floordiv", "floormod", "min", "max")


def structural_key(e: Expr, analyzer: Analyzer | None = None):
    """A hashable key equal for structurally equal expressions (variables by identity)."""
    return (analyzer or Analyzer()).structural_key(e)


# ---------------------------------------------------------------- linear forms


class Linear:
    """``sum(coeff * term) + const`` with terms in first-seen order (deterministic output)."""

    __slots__ = ("terms", "const")

    def __init__(self, terms: dict | None = None, const: int = 0):
        self.terms: dict[object, tuple[Expr, int]] = terms or {}
        self.const = const

    def scaled(self, c: int) -> "Linear":
        if c == 0:
            return Linear()
        return Linear({k: (t, v * c) for k, (t, v) in self.terms.items()}, self.const * c)

    def plus(self, other: "Linear", sign: int = 1) -> "Linear":
        terms = dict(self.terms)
        for k, (t, v) in other.terms.items():
            old = terms.get(k, (t, 0))[1] + sign * v
            if old == 0:
                terms.pop(k, None)
            else:
                terms[k] = (terms.get(k, (t, 0))[0], old)
        return Linear(terms, self.const + sign * other.const)

    @property
    def is_const(self) -> bool:
        return not self.terms

    def to_expr(self, dtype: str = dtypes.INDEX_DTYPE) -> Expr:
        out: Expr | None = None
        items = sorted(self.terms.values(), key=lambda tc: tc[1] < 0)  # positive terms first (stable)
        if items and items[0][1] < 0 and self.const > 0:
            out = Const(self.const, dtype)  # "7 - k*3" rather than "0 - k*3 + 7"
        for term, c in items:
            piece = term if abs(c) == 1 else Binary("mul", term, Const(abs(c), dtype), dtype)
            if out is None:
                out = piece if c > 0 else Binary("sub", Const(0, dtype), piece, dtype)
            else:
                out = Binary("add" if c > 0 else "sub", out, piece, dtype)
        if out is None:
            return Const(self.const, dtype)
        if self.const > 0 and not (items and items[0][1] < 0):
            return Binary("add", out, Const(self.const, dtype), dtype)
        if self.const < 0:
            return Binary("sub", out, Const(-self.const, dtype), dtype)
        return out


def linearize(e: Expr, analyzer: Analyzer | None = None) -> Linear:
    """The linear form of an (already simplified) integer expression; do not mutate it."""
    return (analyzer or Analyzer()).linearize(e)


# ---------------------------------------------------------------- intervals


def interval(e: Expr, bounds: Bounds) -> Optional[Interval]:
    """Inclusive integer range of ``e`` given variable ranges, or None if unknown."""
    if isinstance(e, Const):
        if isinstance(e.value, bool) or not isinstance(e.value, int):
            return None
        return (e.value, e.value)
    if isinstance(e, Var):
        return bounds.get(e)
    if isinstance(e, Cast):
        return interval(e.value, bounds) if dtypes.is_int(e.dtype) else None
    if isinstance(e, Select):
        a, b = interval(e.true_value, bounds), interval(e.false_value, bounds)
        return None if a is None or b is None else (min(a[0], b[0]), max(a[1], b[1]))
    if not isinstance(e, Binary) or not dtypes.is_int(e.dtype):
        return None
    a, b = interval(e.a, bounds), interval(e.b, bounds)
    if a is None or b is None:
        if e.op == "floormod" and b is not None and b[0] > 0:
            return (0, b[1] - 1)
        return None
    if e.op == "add":
        return (a[0] + b[0], a[1] + b[1])
    if e.op == "sub":
        return (a[0] - b[1], a[1] - b[0])
    if e.op == "mul":
        products = [x * y for x in a for y in b]
        return (min(products), max(products))
    if e.op == "min":
        return (min(a[0], b[0]), min(a[1], b[1]))
    if e.op == "max":
        return (max(a[0], b[0]), max(a[1], b[1]))
    if e.op == "floordiv" and b[0] > 0:
        return (min(a[0] // b[0], a[0] // b[1]), max(a[1] // b[0], a[1] // b[1]))
    if e.op == "floormod" and b[0] > 0:
        if b[0] == b[1] and a[0] // b[0] == a[1] // b[0]:
            return (a[0] % b[0], a[1] % b[0])
        return (0, b[1] - 1)
    return None


def linear_interval(lin: Linear, bounds: Bounds) -> Optional[Interval]:
    lo = hi = lin.const
    for term, c in lin.terms.values():
        r = interval(term, bounds)
        if r is None:
            return None
        lo += min(c * r[0], c * r[1])
        hi += max(c * r[0], c * r[1])
    return (lo, hi)


# ---------------------------------------------------------------- the simplifier


def _fold_const(op: str, a, b, dtype: str):
    if op == "add":
        return a + b
    if op == "sub":
        return a - b
    if op == "mul":
        return a * b
    if op == "min":
        return min(a, b)
    if op == "max":
        return max(a, b)
    if dtypes.is_int(dtype):
        if b == 0:
            return None
        if op == "floordiv":
            return a // b
        if op == "floormod":
            return a % b
    return None


def _fits(value: int, dtype: str) -> bool:
    return dtypes.min_value(dtype) <= value <= dtypes.max_value(dtype)


def _simplify_divmod(an: Analyzer, e: Binary, bounds: Bounds) -> Expr:
    """``(c*q + r) // c`` and ``% c`` with a provable ``0 <= r < c``."""
    c = e.b.value
    lin = an.linearize(e.a)
    whole = Linear({k: (t, v // c) for k, (t, v) in lin.terms.items() if v % c == 0}, lin.const // c)
    rest = Linear({k: (t, v) for k, (t, v) in lin.terms.items() if v % c != 0}, lin.const % c)
    r = linear_interval(rest, bounds)
    if r is not None and 0 <= r[0] and r[1] < c:
        return whole.to_expr(e.dtype) if e.op == "floordiv" else rest.to_expr(e.dtype)
    if e.op == "floormod" and len(rest.terms) < len(lin.terms):
        return Binary("floormod", rest.to_expr(e.dtype), e.b, e.dtype)
    return e


def _simplify_node(an: Analyzer, e: Expr, bounds: Bounds) -> Expr:
    if isinstance(e, Binary):
        a, b = e.a, e.b
        if isinstance(a, Const) and isinstance(b, Const) and not dtypes.is_float(e.dtype):
            v = _fold_const(e.op, a.value, b.value, e.dtype)
            if v is not None and _fits(v, e.dtype):
                return Const(v, e.dtype)
        if dtypes.is_int(e.dtype):
            if e.op in ("add", "sub", "mul"):
                lin = an.linearize(e)
                out = lin.to_expr(e.dtype)
                # The parent linearizes this node next: without the remembered form every
                # level of an index chain would re-linearize the whole chain below it.
                an._linear.setdefault(out, lin)
                return out
            if e.op in ("floordiv", "floormod") and isinstance(b, Const) and b.value > 0:
                if b.value == 1:
                    return a if e.op == "floordiv" else Const(0, e.dtype)
                return _simplify_divmod(an, e, bounds)
            if e.op in ("min", "max"):
                ra, rb = interval(a, bounds), interval(b, bounds)
                if ra is not None and rb is not None:
                    if ra[1] <= rb[0]:
                        return a if e.op == "min" else b
                    if rb[1] <= ra[0]:
                        return b if e.op == "min" else a
        elif dtypes.is_float(e.dtype):
            if e.op == "mul" and isinstance(b, Const) and b.value == 1.0:
                return a
            if e.op == "add" and isinstance(b, Const) and b.value == 0.0:
                return a
        return e
    if isinstance(e, Compare):
        if dtypes.is_int(e.a.dtype):
            diff = an.linearize(e.a).plus(an.linearize(e.b), -1)
            r = linear_interval(diff, bounds)
            if r is not None:
                lo, hi = r
                decided = {
                    "lt": (hi < 0, lo >= 0), "le": (hi <= 0, lo > 0),
                    "gt": (lo > 0, hi <= 0), "ge": (lo >= 0, hi < 0),
                    "eq": (lo == hi == 0, lo > 0 or hi < 0), "ne": (lo > 0 or hi < 0, lo == hi == 0),
                }[e.op]
                if decided[0]:
                    return Const(True, "bool")
                if decided[1]:
                    return Const(False, "bool")
        return e
    if isinstance(e, Logical):
        a, b = e.a, e.b
        for x, y in ((a, b), (b, a)):
            if isinstance(x, Const):
                if e.op == "and":
                    return y if x.value else Const(False, "bool")
                return Const(True, "bool") if x.value else y
        return e
    if isinstance(e, Not) and isinstance(e.a, Const):
        return Const(not e.a.value, "bool")
    if isinstance(e, Select) and isinstance(e.cond, Const):
        return e.true_value if e.cond.value else e.false_value
    if isinstance(e, Cast) and isinstance(e.value, Const) and dtypes.is_int(e.dtype) and dtypes.is_int(e.value.dtype):
        if _fits(e.value.value, e.dtype):
            return Const(e.value.value, e.dtype)
    return e


def simplify(e: Expr, bounds: Bounds | None = None, analyzer: Analyzer | None = None) -> Expr:
    """Simplify ``e`` bottom-up using variable ``bounds`` (inclusive ranges)."""
    return (analyzer or Analyzer()).simplify(e, bounds)


def prove(cond: Expr, bounds: Bounds, analyzer: Analyzer | None = None) -> bool | None:
    """True/False if the bounds decide ``cond``, else None."""
    return (analyzer or Analyzer()).prove(cond, bounds)
