"""The loop-nest IR that schedules lower to and backends generate code from.

Expressions are ``te`` expressions plus ``BufferLoad``; statements are a closed set:

    For          a loop ``for var in [0, extent)`` of a kind: serial, parallel,
                 vectorized, unrolled, or bound to a GPU thread index (``thread_tag``)
    Seq          statements in order
    BufferStore  ``buffer[indices] = value``
    Allocate     a buffer that lives for the duration of ``body``
    IfThenElse   a guard (``else_case`` may be None)
    Barrier      a block-wide barrier (GPU shared memory)

A ``Buffer`` has a static shape, dtype and storage scope ("global", "local", "shared").
Nodes are frozen dataclasses; passes build new trees.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Callable, Iterator

from te.expr import Binary, Const, Expr, Var, free_vars, post_order, structural_equal

SERIAL = "serial"
PARALLEL = "parallel"
VECTORIZED = "vectorized"
UNROLLED = "unrolled"
THREAD_BINDING = "thread_binding"

SCOPES = ("global", "local", "shared")


@dataclass(frozen=True, eq=False)
class Buffer:
    """A multi-dimensional array in memory; ``is_arg`` marks kernel parameters,
    ``in_registers`` a tile that ``promote_accumulators`` made to be held in registers
    (the CPU backend prints its loops so that the compiler can keep it there)."""

    name: str
    shape: tuple[int, ...]
    dtype: str
    scope: str = "global"
    is_arg: bool = False
    in_registers: bool = False

    @property
    def size(self) -> int:
        n = 1
        for x in self.shape:
            n *= x
        return n

    def __repr__(self):
        return f"Buffer({self.name}, {self.shape}, {self.dtype}, {self.scope})"


@dataclass(frozen=True, eq=False)
class BufferLoad(Expr):
    """``buffer[indices]``."""

    buffer: Buffer
    indices: tuple[Expr, ...]
    dtype: str

    def children(self):
        return self.indices

    def with_children(self, children):
        return BufferLoad(self.buffer, tuple(children), self.dtype)

    def _print(self, fmt):
        return f"{self.buffer.name}[{', '.join(fmt(i) for i in self.indices)}]"


class Stmt:
    """Base of every statement node."""

    __slots__ = ()

    def __str__(self):
        from .printer import stmt_to_str

        return stmt_to_str(self)


@dataclass(frozen=True, eq=False)
class For(Stmt):
    var: Var
    extent: Expr
    kind: str
    body: Stmt
    thread_tag: str | None = None


@dataclass(frozen=True, eq=False)
class Seq(Stmt):
    stmts: tuple[Stmt, ...]


@dataclass(frozen=True, eq=False)
class BufferStore(Stmt):
    buffer: Buffer
    indices: tuple[Expr, ...]
    value: Expr


@dataclass(frozen=True, eq=False)
class Allocate(Stmt):
    buffer: Buffer
    body: Stmt


@dataclass(frozen=True, eq=False)
class IfThenElse(Stmt):
    condition: Expr
    then_case: Stmt
    else_case: Stmt | None = None


@dataclass(frozen=True, eq=False)
class Barrier(Stmt):
    scope: str = "shared"


def seq(*stmts: Stmt | None) -> Stmt:
    """A Seq of the non-empty statements, flattened; a single statement stays itself."""
    flat: list[Stmt] = []
    for s in stmts:
        if s is None:
            continue
        if isinstance(s, Seq):
            flat.extend(s.stmts)
        else:
            flat.append(s)
    return flat[0] if len(flat) == 1 else Seq(tuple(flat))


def child_stmts(s: Stmt) -> tuple[Stmt, ...]:
    if isinstance(s, (For, Allocate)):
        return (s.body,)
    if isinstance(s, Seq):
        return s.stmts
    if isinstance(s, IfThenElse):
        return (s.then_case,) if s.else_case is None else (s.then_case, s.else_case)
    return ()


def walk(s: Stmt) -> Iterator[Stmt]:
    """Every statement of ``s`` in pre-order."""
    stack = [s]
    while stack:
        node = stack.pop()
        yield node
        stack.extend(reversed(child_stmts(node)))


def map_stmt(s: Stmt, fstmt: Callable[[Stmt], Stmt | None] | None = None,
             fexpr: Callable[[Expr], Expr] | None = None) -> Stmt:
    """Rebuild ``s`` bottom-up, applying ``fexpr`` to every expression and then ``fstmt``."""
    fe = fexpr or (lambda e: e)
    if isinstance(s, For):
        new = dataclasses.replace(s, extent=fe(s.extent), body=map_stmt(s.body, fstmt, fexpr))
    elif isinstance(s, Seq):
        new = Seq(tuple(map_stmt(x, fstmt, fexpr) for x in s.stmts))
    elif isinstance(s, BufferStore):
        new = BufferStore(s.buffer, tuple(fe(i) for i in s.indices), fe(s.value))
    elif isinstance(s, Allocate):
        new = Allocate(s.buffer, map_stmt(s.body, fstmt, fexpr))
    elif isinstance(s, IfThenElse):
        new = IfThenElse(fe(s.condition), map_stmt(s.then_case, fstmt, fexpr),
                         None if s.else_case is None else map_stmt(s.else_case, fstmt, fexpr))
    else:
        new = s
    if fstmt is not None:
        out = fstmt(new)
        return new if out is None else out
    return new


def const_int(e: Expr) -> int | None:
    """The value of an integer constant expression, else None."""
    return e.value if isinstance(e, Const) and isinstance(e.value, int) and not isinstance(e.value, bool) else None


def tail_bound(extent: Expr) -> tuple[int, Expr] | None:
    """``(factor, rest)`` of a tail loop's extent ``min(factor, rest)`` (``schedule.passes.
    tail_bounds`` makes those; the constant on either side), else None."""
    if getattr(extent, "op", None) != "min":
        return None
    for factor, rest in ((extent.a, extent.b), (extent.b, extent.a)):
        n = const_int(factor)
        if n is not None:
            return n, rest
    return None


def max_trip_count(extent: Expr) -> int | None:
    """A loop's constant extent, or the factor of a tail loop ``min(factor, rest)``: the
    most iterations it runs. None if unknown."""
    n = const_int(extent)
    if n is None:
        tail = tail_bound(extent)
        n = tail[0] if tail else None
    return n


@dataclass(frozen=True, eq=False)
class Prepack:
    """An input whose layout a schedule rewrote once, at build time (``Schedule.rewrite_layout``):
    the kernel's parameter ``param`` holds ``func(source)``, where ``source`` is the input as
    the user lays it out and ``func`` (parameters: source, packed) writes the new layout."""

    param: int
    source: Buffer
    func: "LoweredFunc"


@dataclass(frozen=True, eq=False)
class LoweredFunc:
    """The result of lowering: a kernel's parameters and body, and the packing functions of
    inputs whose layout was rewritten at build time (empty for most schedules)."""

    name: str
    params: tuple[Buffer, ...]
    body: Stmt
    prepacks: tuple[Prepack, ...] = ()

    @property
    def user_params(self) -> tuple[Buffer, ...]:
        """The parameters as the caller lays them out: each prepacked one as its source."""
        params = list(self.params)
        for p in self.prepacks:
            params[p.param] = p.source
        return tuple(params)

    def __str__(self):
        from .printer import func_to_str

        return func_to_str(self)


def flat_index(buf: Buffer, indices) -> Expr:
    """The row-major flat index of ``buf[indices]`` (not simplified)."""
    flat: Expr = Const(0)
    stride = 1
    for idx, extent in reversed(list(zip(indices, buf.shape))):
        flat = flat + idx * stride
        stride *= extent
    return flat


def register_tile_accesses(s: Stmt, tile: Buffer | None = None) -> list:
    """The stores to and loads from register tiles (``Buffer.in_registers``) in the
    statements of ``s``; only ``tile``'s when given."""
    def held(buf: Buffer) -> bool:
        return buf is tile if tile is not None else buf.in_registers

    out = []
    for node in walk(s):
        if isinstance(node, BufferStore):
            if held(node.buffer):
                out.append(node)
            out += [e for e in post_order(node.value) if isinstance(e, BufferLoad) and held(e.buffer)]
    return out


def indexes_register_tile(loop: For, tile: Buffer | None = None) -> bool:
    """Whether ``loop``'s variable indexes a register tile (``tile``, when given) in its body."""
    return any(loop.var in free_vars(i) for access in register_tile_accesses(loop.body, tile) for i in access.indices)


#: Combiners a scalar accumulator loop folds with.
FOLDABLE = ("add", "mul", "min", "max")


def folded_reduction(loop: For) -> tuple[BufferStore, Binary, Expr] | None:
    """(store, combiner, folded value) when ``loop`` is a serial or vectorized loop whose
    whole body folds one value per iteration into one element that does not move with the
    loop (``buf[i] = buf[i] + f(k)``, ``max``, ``min``, ``*``), else None.

    A CPU backend prints such a loop over a scalar accumulator the compiler may vectorize
    (a reduction innermost: softmax's max and sum, a dot product), and the loop
    description calls it a vector loop."""
    if loop.kind not in (SERIAL, VECTORIZED):
        return None
    store = loop.body
    if isinstance(store, Seq) and len(store.stmts) == 1:
        store = store.stmts[0]
    if not isinstance(store, BufferStore) or not isinstance(store.value, Binary) or store.value.op not in FOLDABLE:
        return None
    if store.buffer.dtype not in ("float32", "float64", "int32", "int64"):
        return None
    if any(n is loop.var for idx in store.indices for n in post_order(idx)):
        return None
    combine = store.value

    def is_target(e: Expr) -> bool:
        return (isinstance(e, BufferLoad) and e.buffer is store.buffer and len(e.indices) == len(store.indices)
                and all(structural_equal(a, b) for a, b in zip(e.indices, store.indices)))

    for mine, other in ((combine.a, combine.b), (combine.b, combine.a)):
        if is_target(mine) and not any(isinstance(n, BufferLoad) and n.buffer is store.buffer
                                       for n in post_order(other)):
            return store, combine, other
    return None
