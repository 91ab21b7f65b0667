"""What every lowering pass is built from: a visitor, a mutator, and the ``Pass`` record.

    class CountStores(StmtVisitor):
        def visit_BufferStore(self, s):
            print(s.buffer.name, [loop.var.name for loop in self.loops])

``StmtVisitor`` walks a statement tree with one ``visit_<Node>`` method per statement
type and a ``visit_expr`` hook for the expressions inside statements. While it walks,
``self.loops`` is the stack of enclosing loops (outermost first) and ``self.allocated``
the stack of enclosing allocations, so no pass tracks them by hand.

``StmtMutator`` is the same walk returning a statement: each ``visit_<Node>`` returns
the node's replacement, and a node none of whose parts changed comes back as the very
same object (identity checks are cheap; untouched subtrees are never rebuilt).

A ``Pass`` is a named step ``ir -> ir`` (a ``LoweredFunc``, or a ``GPUProgram`` on the GPU
side) run with the lowering's ``PassContext``; the pipelines in ``schedule.passes`` are
plain lists of them.
"""
from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

from te.expr import Expr, Var

from .. import ir
from ..ir import Allocate, Barrier, Buffer, BufferStore, For, IfThenElse, Seq, Stmt
from ..simplify import Analyzer


@dataclass(frozen=True)
class Loop:
    """One enclosing loop as a pass sees it (the extent as the pass rewrote it)."""

    var: Var
    extent: Expr
    kind: str
    thread_tag: str | None = None

    @staticmethod
    def of(node: For, extent: Expr | None = None) -> "Loop":
        return Loop(node.var, node.extent if extent is None else extent, node.kind, node.thread_tag)


class _Walk:
    """The loop and allocation stacks shared by visitors and mutators."""

    def __init__(self):
        self.loops: list[Loop] = []
        self.allocated: list[Buffer] = []

    @contextmanager
    def in_loop(self, loop: Loop) -> Iterator[None]:
        self.loops.append(loop)
        try:
            yield
        finally:
            self.loops.pop()

    @contextmanager
    def in_allocation(self, buf: Buffer) -> Iterator[None]:
        self.allocated.append(buf)
        try:
            yield
        finally:
            self.allocated.pop()

    def loop_vars(self) -> set[Var]:
        """Variables of the enclosing loops."""
        return {loop.var for loop in self.loops}

    def visit(self, s: Stmt):
        return getattr(self, "visit_" + type(s).__name__)(s)


class StmtVisitor(_Walk):
    """Read-only walk in pre-order; override ``visit_<Node>`` (call the base to recurse)."""

    def visit_expr(self, e: Expr) -> None:
        """Called for every expression a statement holds (extents, conditions, indices, values)."""

    def visit_For(self, s: For) -> None:
        self.visit_expr(s.extent)
        with self.in_loop(Loop.of(s)):
            self.visit(s.body)

    def visit_Seq(self, s: Seq) -> None:
        for x in s.stmts:
            self.visit(x)

    def visit_BufferStore(self, s: BufferStore) -> None:
        for i in s.indices:
            self.visit_expr(i)
        self.visit_expr(s.value)

    def visit_Allocate(self, s: Allocate) -> None:
        with self.in_allocation(s.buffer):
            self.visit(s.body)

    def visit_IfThenElse(self, s: IfThenElse) -> None:
        self.visit_expr(s.condition)
        self.visit(s.then_case)
        if s.else_case is not None:
            self.visit(s.else_case)

    def visit_Barrier(self, s: Barrier) -> None:
        pass


class StmtMutator(_Walk):
    """Rebuilding walk: children first through ``visit``, the same node back if nothing changed.

    A rewritten ``Seq`` is rebuilt with ``ir.seq`` (flattened, empty parts dropped).
    """

    def visit_expr(self, e: Expr) -> Expr:
        """The replacement of an expression a statement holds (default: itself)."""
        return e

    def visit_For(self, s: For) -> Stmt:
        extent = self.visit_expr(s.extent)
        with self.in_loop(Loop.of(s, extent)):
            body = self.visit(s.body)
        if extent is s.extent and body is s.body:
            return s
        return For(s.var, extent, s.kind, body, s.thread_tag)

    def visit_Seq(self, s: Seq) -> Stmt:
        stmts = [self.visit(x) for x in s.stmts]
        if all(a is b for a, b in zip(stmts, s.stmts)):
            return s
        return ir.seq(*stmts)

    def visit_BufferStore(self, s: BufferStore) -> Stmt:
        indices = tuple(self.visit_expr(i) for i in s.indices)
        value = self.visit_expr(s.value)
        if value is s.value and all(a is b for a, b in zip(indices, s.indices)):
            return s
        return BufferStore(s.buffer, indices, value)

    def visit_Allocate(self, s: Allocate) -> Stmt:
        with self.in_allocation(s.buffer):
            body = self.visit(s.body)
        return s if body is s.body else Allocate(s.buffer, body)

    def visit_IfThenElse(self, s: IfThenElse) -> Stmt:
        cond = self.visit_expr(s.condition)
        then = self.visit(s.then_case)
        other = None if s.else_case is None else self.visit(s.else_case)
        if cond is s.condition and then is s.then_case and other is s.else_case:
            return s
        return IfThenElse(cond, then, other)

    def visit_Barrier(self, s: Barrier) -> Stmt:
        return s


class ExprMutator(StmtMutator):
    """A mutator that rewrites every expression with one function and keeps the statements."""

    def __init__(self, fexpr: Callable[[Expr], Expr]):
        super().__init__()
        self.visit_expr = fexpr  # type: ignore[method-assign]


@dataclass(frozen=True)
class PassContext:
    """What one lowering shares among its passes: the simplifier and its memo tables."""

    analyzer: Analyzer = field(default_factory=Analyzer)


@dataclass(frozen=True)
class Pass:
    """A named lowering step: ``fn(ir, ctx) -> ir``; ``doc`` says in one line why it exists."""

    name: str
    fn: Callable[[Any, PassContext], Any]

    @property
    def doc(self) -> str:
        """The first line of the pass function's docstring."""
        text = (self.fn.__doc__ or "").strip()
        return text.splitlines()[0] if text else ""

    def __call__(self, ir_in, ctx: PassContext | None = None):
        return self.fn(ir_in, ctx if ctx is not None else PassContext())

    def __repr__(self):
        return f"Pass({self.name})"


def lowering_pass(name: str) -> Callable[[Callable], Pass]:
    """Decorator: the function ``fn(ir, ctx) -> ir`` as a ``Pass`` called ``name``."""
    def wrap(fn: Callable) -> Pass:
        return Pass(name, fn)

    return wrap
