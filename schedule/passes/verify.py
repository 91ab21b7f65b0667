"""Invariants of the loop IR, checked after lowering.

``verify(func)`` raises ``IRVerifyError`` unless:
- every variable an expression uses is bound by an enclosing loop;
- every buffer loaded or stored is a parameter or allocated in an enclosing Allocate;
- every access has one index per buffer dimension, and constant indices are in range;
- no parallel loop is nested in another parallel loop;
- a vectorized loop contains no loop and no allocation (it is innermost);
- loop extents are positive.
"""
from __future__ import annotations

from te.errors import TEError
from te.expr import Const, Expr, Var, post_order

from .. import ir
from ..ir import Allocate, BufferLoad, BufferStore, For, LoweredFunc
from .base import PassContext, StmtVisitor, lowering_pass


class IRVerifyError(TEError):
    """The lowered IR breaks an invariant (a bug in lowering or a pass)."""


class _Verifier(StmtVisitor):
    def __init__(self, func: LoweredFunc):
        super().__init__()
        self.func = func
        self.params = set(func.params)

    def fail(self, message: str):
        raise IRVerifyError(f"{self.func.name}: {message}")

    def visit_expr(self, e: Expr) -> None:
        bound = None
        for node in post_order(e):
            if isinstance(node, Var):
                bound = self.loop_vars() if bound is None else bound
                if node not in bound:
                    self.fail(f"variable {node.name!r} used outside any loop binding it")
            if isinstance(node, BufferLoad):
                self.access(node.buffer, node.indices, "load")

    def access(self, buf, indices, what: str) -> None:
        if buf not in self.params and buf not in self.allocated:
            self.fail(f"{what} of buffer {buf.name!r}, which is neither a parameter nor allocated here")
        if len(indices) != len(buf.shape):
            self.fail(f"{what} of {buf.name!r} with {len(indices)} indices for {len(buf.shape)} dims")
        for i, n in zip(indices, buf.shape):
            if isinstance(i, Const) and not 0 <= i.value < n:
                self.fail(f"constant index {i.value} out of range for {buf.name!r} dim of extent {n}")

    def visit_For(self, s: For) -> None:
        self.visit_expr(s.extent)
        n = ir.const_int(s.extent)
        if n is not None and n <= 0:
            self.fail(f"loop {s.var.name!r} has extent {n}")
        if s.kind == ir.PARALLEL and any(loop.kind == ir.PARALLEL for loop in self.loops):
            self.fail(f"parallel loop {s.var.name!r} nested in another parallel loop")
        if s.kind == ir.VECTORIZED:
            for inner in ir.walk(s.body):
                if isinstance(inner, (For, Allocate)):
                    self.fail(f"vectorized loop {s.var.name!r} is not innermost "
                              f"(it contains a loop or an attached stage)")
        super().visit_For(s)

    def visit_BufferStore(self, s: BufferStore) -> None:
        self.access(s.buffer, s.indices, "store")
        super().visit_BufferStore(s)


def verify(func: LoweredFunc) -> None:
    """Raise ``IRVerifyError`` unless ``func`` keeps the invariants of the module docstring."""
    _Verifier(func).visit(func.body)


@lowering_pass("verify")
def verify_pass(func: LoweredFunc, ctx: PassContext) -> LoweredFunc:
    """A pass that breaks the IR fails here, at lowering, not as wrong code at run time."""
    verify(func)
    return func
