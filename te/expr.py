"""Immutable expression nodes of the tensor-expression language.

A closed set of node types, each a frozen dataclass:

    Var        a named integer variable (loop and axis variables)
    Const      a literal of a given dtype
    Binary     arithmetic: add sub mul div floordiv floormod min max pow
    Compare    lt le gt ge eq ne  -> bool
    Logical    and or             -> bool;  Not -> bool
    Select     if_then_else(cond, a, b)
    Cast       dtype conversion
    Call       math functions (exp, log, sqrt, tanh, ...)
    TensorRead element access ``A[i, j]`` of a ``Tensor``
    Reduce     sum / max / min over reduce axes, with a stated identity

Nodes compare and hash by identity (``==`` on expressions is *not* overloaded, so
nodes can be dict keys); use ``te.equal`` to build an equality test and
``structural_equal`` to compare two trees. Python operators build nodes:
``+ - * / // % < <= > >= & | ~ -x``. ``/`` is true division and needs floats;
``//`` and ``%`` are floor division and floor modulo (Python's rules) and need integers.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Iterator

from . import dtypes
from .dtypes import INDEX_DTYPE
from .errors import DTypeError, TEError

if TYPE_CHECKING:  # pragma: no cover
    from .tensor import IterVar, Tensor


class ExprOps:
    """Python operator overloads shared by expressions and iteration variables."""

    __slots__ = ()

    def __add__(self, other):
        return binary("add", self, other)

    def __radd__(self, other):
        return binary("add", other, self)

    def __sub__(self, other):
        return binary("sub", self, other)

    def __rsub__(self, other):
        return binary("sub", other, self)

    def __mul__(self, other):
        return binary("mul", self, other)

    def __rmul__(self, other):
        return binary("mul", other, self)

    def __truediv__(self, other):
        return binary("div", self, other)

    def __rtruediv__(self, other):
        return binary("div", other, self)

    def __floordiv__(self, other):
        return binary("floordiv", self, other)

    def __rfloordiv__(self, other):
        return binary("floordiv", other, self)

    def __mod__(self, other):
        return binary("floormod", self, other)

    def __rmod__(self, other):
        return binary("floormod", other, self)

    def __pow__(self, other):
        return binary("pow", self, other)

    def __neg__(self):
        e = as_expr(self)
        return binary("sub", Const(0, e.dtype), e)

    def __lt__(self, other):
        return compare("lt", self, other)

    def __le__(self, other):
        return compare("le", self, other)

    def __gt__(self, other):
        return compare("gt", self, other)

    def __ge__(self, other):
        return compare("ge", self, other)

    def __and__(self, other):
        return logical("and", self, other)

    def __rand__(self, other):
        return logical("and", other, self)

    def __or__(self, other):
        return logical("or", self, other)

    def __ror__(self, other):
        return logical("or", other, self)

    def __invert__(self):
        return Not(as_bool(self, "~"))

    def __bool__(self):
        raise TEError(
            "an expression has no truth value at definition time; "
            "use te.if_then_else(cond, a, b) instead of a Python if/and/or"
        )


class Expr(ExprOps):
    """Base of every expression node. Subclasses are frozen dataclasses with ``dtype``."""

    __slots__ = ()
    dtype: str

    def __str__(self) -> str:
        from .printer import expr_to_str

        return expr_to_str(self)

    __hash__ = object.__hash__

    def __eq__(self, other):
        if other is None or isinstance(other, Expr):
            return self is other  # fast path: nodes as dict keys and list members
        return identity_or_compare("eq", self, other)

    def __ne__(self, other):
        if other is None or isinstance(other, Expr):
            return self is not other
        return identity_or_compare("ne", self, other)

    def children(self) -> tuple["Expr", ...]:
        """Sub-expressions in field order (used by generic traversals)."""
        return tuple(getattr(self, name) for name in self._child_fields)

    _child_fields: tuple[str, ...] = ()


# ---------------------------------------------------------------- leaves


@dataclass(frozen=True, eq=False)
class Var(Expr):
    """A named scalar variable; loop and axis variables are int32."""

    name: str
    dtype: str = INDEX_DTYPE

    def __repr__(self):
        return f"Var({self.name})"

    def children(self):
        return ()


@dataclass(frozen=True, eq=False)
class Const(Expr):
    """A literal. ``value`` is a Python int, float or bool matching ``dtype``."""

    value: Any
    dtype: str = INDEX_DTYPE

    def __post_init__(self):
        dtypes.check_dtype(self.dtype)
        if dtypes.is_float(self.dtype):
            object.__setattr__(self, "value", float(self.value))
        elif dtypes.is_bool(self.dtype):
            object.__setattr__(self, "value", bool(self.value))
        else:
            object.__setattr__(self, "value", int(self.value))

    def __repr__(self):
        return f"Const({self.value!r}, {self.dtype})"

    def children(self):
        return ()


# ---------------------------------------------------------------- operators

@dataclass(frozen=True, eq=False)
class Binary(Expr):
    op: str
    a: Expr
    b: Expr
    dtype: str
    _child_fields = ("a", "b")

    def children(self):  # hot in every traversal: skip the generic getattr walk
        return (self.a, self.b)


@dataclass(frozen=True, eq=False)
class Compare(Expr):
    op: str
    a: Expr
    b: Expr
    dtype: str = "bool"
    _child_fields = ("a", "b")

    def children(self):  # hot in every traversal: skip the generic getattr walk
        return (self.a, self.b)


@dataclass(frozen=True, eq=False)
class Logical(Expr):
    op: str
    a: Expr
    b: Expr
    dtype: str = "bool"
    _child_fields = ("a", "b")

    def children(self):  # hot in every traversal: skip the generic getattr walk
        return (self.a, self.b)


@dataclass(frozen=True, eq=False)
class Not(Expr):
    a: Expr
    dtype: str = "bool"
    _child_fields = ("a",)


@dataclass(frozen=True, eq=False)
class Select(Expr):
    """``true_value`` where ``cond`` holds, else ``false_value`` (only the taken branch matters)."""

    cond: Expr
    true_value: Expr
    false_value: Expr
    dtype: str
    _child_fields = ("cond", "true_value", "false_value")


@dataclass(frozen=True, eq=False)
class Cast(Expr):
    """Convert ``value`` to ``dtype`` with C semantics (float->int truncates toward zero)."""

    dtype: str
    value: Expr
    _child_fields = ("value",)


@dataclass(frozen=True, eq=False)
class Call(Expr):
    """A math function of one float argument."""

    func: str
    args: tuple[Expr, ...]
    dtype: str

    def children(self):
        return self.args


@dataclass(frozen=True, eq=False)
class TensorRead(Expr):
    """``tensor[indices]``: one element of a tensor."""

    tensor: "Tensor"
    indices: tuple[Expr, ...]
    dtype: str

    def children(self):
        return self.indices


#: ``softmax_sum``: the sum of ``source`` weighted by ``exp(logit - max(logit))`` over the
#: axes (softmax's numerator applied to a value), computed in one pass with a running maximum.
REDUCERS = ("sum", "max", "min", "softmax_sum")


@dataclass(frozen=True, eq=False)
class Reduce(Expr):
    """A commutative reduction of ``source`` over ``axes``.

    ``identity`` is the value of an empty reduction and the initial value of the
    accumulator: 0 for sum, the dtype's lowest value (-inf for floats) for max and its
    highest (+inf) for min. Points where ``condition`` is false contribute the identity.

    ``logit`` (``softmax_sum`` only): the exponent of each point's weight. Lowering keeps a
    second accumulator beside the sum, the running maximum ``m`` of the logits, and rescales
    the sum whenever ``m`` grows: ``acc = acc * exp(m - m') + source * exp(logit - m')``,
    ``m' = max(m, logit)`` (FlashAttention's online softmax).
    """

    combiner: str
    source: Expr
    axes: tuple["IterVar", ...]
    condition: Expr | None
    identity: Const
    dtype: str
    logit: Expr | None = None

    def children(self):
        kids = (self.source,) if self.condition is None else (self.source, self.condition)
        return kids if self.logit is None else kids + (self.logit,)


# ---------------------------------------------------------------- conversion and typing


def as_expr(value, dtype: str | None = None) -> Expr:
    """Turn ``value`` (an Expr, IterVar or Python scalar) into an Expr.

    A Python scalar becomes a Const of ``dtype`` when given (and compatible), else of
    its natural dtype (int32, float32, bool).
    """
    if isinstance(value, Expr):  # the common case, before the import
        return value
    from .tensor import IterVar, Tensor

    if isinstance(value, IterVar):
        return value.var
    if isinstance(value, Tensor):
        raise TEError(
            f"tensor {value.name!r} used as a scalar; index it first, e.g. {value.name}[i, j]"
        )
    if dtype is not None:
        if not dtypes.scalar_fits(value, dtype):
            raise DTypeError(
                f"literal {value!r} does not fit dtype {dtype}; "
                f"use te.cast or a literal of matching kind"
            )
        return Const(value, dtype)
    return Const(value, dtypes.scalar_dtype(value))


def _is_scalar(value) -> bool:
    if isinstance(value, Expr):  # the common case, before the import
        return False
    from .tensor import IterVar

    return not isinstance(value, IterVar)


def _operands(op: str, a, b) -> tuple[Expr, Expr]:
    """Convert two operands, letting a Python scalar take the other side's dtype."""
    if _is_scalar(a) and not _is_scalar(b):
        b = as_expr(b)
        return as_expr(a, b.dtype), b
    if _is_scalar(b) and not _is_scalar(a):
        a = as_expr(a)
        return a, as_expr(b, a.dtype)
    a, b = as_expr(a), as_expr(b)
    if a.dtype != b.dtype:
        raise DTypeError(
            f"operator {op!r} mixes dtypes {a.dtype} ({a}) and {b.dtype} ({b}); "
            f"convert one side with te.cast(dtype, x)"
        )
    return a, b


def binary(op: str, a, b) -> Expr:
    a, b = _operands(op, a, b)
    if a.dtype == "bool":
        raise DTypeError(f"operator {op!r} is not defined on bool values; use & | ~ or te.if_then_else")
    if op == "div" and not dtypes.is_float(a.dtype):
        raise DTypeError(
            f"'/' on integers ({a} / {b}) is ambiguous; use // (floor division) or te.cast to a float"
        )
    if op in ("floordiv", "floormod") and not dtypes.is_int(a.dtype):
        raise DTypeError(f"'{'//' if op == 'floordiv' else '%'}' needs integers, got {a.dtype}")
    if op == "pow" and not dtypes.is_float(a.dtype):
        raise DTypeError(f"'**' needs floats, got {a.dtype}; cast first")
    return Binary(op, a, b, a.dtype)


def compare(op: str, a, b) -> Expr:
    a, b = _operands(op, a, b)
    return Compare(op, a, b)


def identity_or_compare(op: str, a, b):
    """``==``/``!=`` between two nodes is identity (nodes are dict keys); with a Python
    scalar it builds the comparison, so ``te.if_then_else(i == 0, ...)`` means what it says."""
    if _is_scalar(b) and not isinstance(b, (type(None), str)):
        return compare(op, a, b)
    return (a is b) if op == "eq" else (a is not b)


def as_bool(value, where: str) -> Expr:
    if isinstance(value, bool):
        raise DTypeError(
            f"{where} got the Python bool {value}; '==' and '!=' between two expressions compare identity, "
            f"so build conditions with te.equal(a, b) / te.not_equal(a, b)"
        )
    e = as_expr(value)
    if e.dtype != "bool":
        raise DTypeError(f"{where} needs a bool condition, got {e.dtype} expression {e}")
    return e


def logical(op: str, a, b) -> Expr:
    return Logical(op, as_bool(a, f"'{op}'"), as_bool(b, f"'{op}'"))


# ---------------------------------------------------------------- public builders


def const(value, dtype: str | None = None) -> Const:
    """A literal of ``dtype`` (default: int32 for ints, float32 for floats)."""
    e = as_expr(value, dtypes.check_dtype(dtype) if dtype else None)
    assert isinstance(e, Const)
    return e


def var(name: str, dtype: str = INDEX_DTYPE) -> Var:
    return Var(name, dtypes.check_dtype(dtype))


def equal(a, b) -> Expr:
    """``a == b`` as an expression (Python's ``==`` keeps identity semantics)."""
    return compare("eq", a, b)


def not_equal(a, b) -> Expr:
    return compare("ne", a, b)


def all_of(*conds) -> Expr:
    """Logical and of any number of conditions."""
    if not conds:
        return Const(True, "bool")
    out = as_bool(conds[0], "all_of")
    for c in conds[1:]:
        out = logical("and", out, c)
    return out


def any_of(*conds) -> Expr:
    if not conds:
        return Const(False, "bool")
    out = as_bool(conds[0], "any_of")
    for c in conds[1:]:
        out = logical("or", out, c)
    return out


def if_then_else(cond, true_value, false_value) -> Expr:
    """``true_value`` where ``cond`` holds, else ``false_value``; only the taken branch is read."""
    cond = as_bool(cond, "if_then_else")
    t, f = _operands("if_then_else", true_value, false_value)
    return Select(cond, t, f, t.dtype)


def cast(dtype: str, value) -> Expr:
    """Convert ``value`` to ``dtype`` (C semantics: float to int truncates toward zero)."""
    dtypes.check_dtype(dtype)
    e = as_expr(value)
    if e.dtype == dtype:
        return e
    return Cast(dtype, e)


def _math(func: str) -> Callable[[Any], Expr]:
    def build(x):
        e = as_expr(x)
        if not dtypes.is_float(e.dtype):
            raise DTypeError(f"te.{func} needs a float argument, got {e.dtype} ({e}); cast it first")
        return Call(func, (e,), e.dtype)

    build.__name__ = func
    build.__doc__ = f"Element-wise ``{func}`` of a float expression."
    return build


exp = _math("exp")
log = _math("log")
sqrt = _math("sqrt")
rsqrt = _math("rsqrt")
tanh = _math("tanh")
sigmoid = _math("sigmoid")
erf = _math("erf")
floor = _math("floor")
ceil = _math("ceil")
sin = _math("sin")
cos = _math("cos")


def abs(x) -> Expr:  # noqa: A001 - mirrors te.abs
    """Absolute value; for integers built from a select so it stays exact."""
    e = as_expr(x)
    if dtypes.is_float(e.dtype):
        return Call("abs", (e,), e.dtype)
    return if_then_else(compare("lt", e, 0), binary("sub", 0, e), e)


# ---------------------------------------------------------------- generic traversal


def rebuild(node: Expr, new_children: tuple[Expr, ...]) -> Expr:
    """Return ``node`` with its children replaced (the node itself if nothing changed)."""
    old = node.children()
    if len(old) == len(new_children) and all(x is y for x, y in zip(old, new_children)):
        return node
    custom = getattr(node, "with_children", None)
    if custom is not None:  # node types defined outside te (e.g. the loop IR's loads)
        return custom(tuple(new_children))
    kind = type(node)
    if kind is Binary or kind is Compare or kind is Logical:  # the common case, without dataclasses.replace
        return kind(node.op, new_children[0], new_children[1], node.dtype)
    if isinstance(node, Call):
        return Call(node.func, tuple(new_children), node.dtype)
    if isinstance(node, TensorRead):
        return TensorRead(node.tensor, tuple(new_children), node.dtype)
    if isinstance(node, Reduce):
        rest = list(new_children[1:])
        cond = rest.pop(0) if node.condition is not None else None
        logit = rest.pop(0) if node.logit is not None else None
        return dataclasses.replace(node, source=new_children[0], condition=cond, logit=logit)
    return dataclasses.replace(node, **dict(zip(node._child_fields, new_children)))


def post_order(expr: Expr) -> Iterator[Expr]:
    """Every node of ``expr``, children before parents (shared nodes visited once)."""
    seen: set[int] = set()
    stack: list[tuple[Expr, bool]] = [(expr, False)]
    while stack:
        node, expanded = stack.pop()
        if id(node) in seen:
            continue
        if expanded:
            seen.add(id(node))
            yield node
            continue
        stack.append((node, True))
        for child in reversed(node.children()):
            if id(child) not in seen:
                stack.append((child, False))


def transform(expr: Expr, fn: Callable[[Expr], Expr | None]) -> Expr:
    """Bottom-up rewrite: ``fn(node)`` returns a replacement or None to keep the node."""
    def apply(node: Expr) -> Expr:
        out = fn(node)
        return node if out is None else out

    return rewrite_bottom_up(expr, apply)


def rewrite_bottom_up(expr: Expr, fn: Callable[[Expr], Expr]) -> Expr:
    """``fn`` applied to every node after its children were rewritten (shared nodes once).

    The hot loop of lowering: a memoized recursion, about twice as fast as walking
    ``post_order``; trees too deep for Python's recursion limit take the iterative walk.
    """
    memo: dict[int, Expr] = {}
    try:
        return _rewrite(expr, fn, memo)
    except RecursionError:
        memo.clear()
        for node in post_order(expr):
            memo[id(node)] = fn(rebuild(node, tuple(memo[id(c)] for c in node.children())))
        return memo[id(expr)]


def _rewrite(node: Expr, fn, memo: dict) -> Expr:
    done = memo.get(id(node))
    if done is not None:
        return done
    kids = node.children()
    if kids:
        node_ = rebuild(node, tuple([_rewrite(c, fn, memo) for c in kids]))
    else:
        node_ = node
    out = memo[id(node)] = fn(node_)
    return out


def substitute(expr: Expr, mapping: dict[Var, Any]) -> Expr:
    """Replace variables by expressions (or scalars)."""
    if not mapping:
        return expr
    table = {v: as_expr(e, v.dtype) for v, e in mapping.items()}
    return transform(expr, lambda n: table.get(n) if isinstance(n, Var) else None)


def free_vars(expr: Expr) -> set[Var]:
    return {n for n in post_order(expr) if isinstance(n, Var)}


def structural_equal(a: Expr, b: Expr) -> bool:
    """Whether two expression trees have the same shape, ops, dtypes, leaves and tensors."""
    if a is b:
        return True
    if type(a) is not type(b) or a.dtype != b.dtype:
        return False
    if isinstance(a, Var):
        return False  # distinct variables
    if isinstance(a, Const):
        return a.value == b.value or (
            isinstance(a.value, float) and math.isnan(a.value) and math.isnan(b.value)
        )
    for field in ("op", "func", "combiner"):
        if getattr(a, field, None) != getattr(b, field, None):
            return False
    if isinstance(a, TensorRead) and a.tensor is not b.tensor:
        return False
    if isinstance(a, Reduce) and tuple(x.var for x in a.axes) != tuple(x.var for x in b.axes):
        return False
    ca, cb = a.children(), b.children()
    return len(ca) == len(cb) and all(structural_equal(x, y) for x, y in zip(ca, cb))
