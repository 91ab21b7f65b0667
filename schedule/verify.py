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

from . import ir
from .ir import Allocate, BufferLoad, BufferStore, For, IfThenElse, LoweredFunc, Stmt


class IRVerifyError(TEError):
    """The lowered IR breaks an invariant (a bug in lowering or a pass)."""


def verify(func: LoweredFunc) -> None:
    _Verifier(func).run()


class _Verifier:
    def __init__(self, func: LoweredFunc):
        self.func = func

    def run(self):
        self.stmt(self.func.body, set(), set(self.func.params), in_parallel=False)

    def expr(self, e: Expr, loop_vars, buffers):
        for node in post_order(e):
            if isinstance(node, Var) and node not in loop_vars:
                raise IRVerifyError(f"{self.func.name}: variable {node.name!r} used outside any loop binding it")
            if isinstance(node, BufferLoad):
                self.access(node.buffer, node.indices, buffers, "load")

    def access(self, buf, indices, buffers, what):
        if buf not in buffers:
            raise IRVerifyError(f"{self.func.name}: {what} of buffer {buf.name!r}, which is neither a parameter nor allocated here")
        if len(indices) != len(buf.shape):
            raise IRVerifyError(f"{self.func.name}: {what} of {buf.name!r} with {len(indices)} indices for {len(buf.shape)} dims")
        for i, n in zip(indices, buf.shape):
            if isinstance(i, Const) and not 0 <= i.value < n:
                raise IRVerifyError(f"{self.func.name}: constant index {i.value} out of range for {buf.name!r} dim of extent {n}")

    def stmt(self, s: Stmt, loop_vars, buffers, in_parallel):
        if isinstance(s, For):
            self.expr(s.extent, loop_vars, buffers)
            n = ir.const_int(s.extent)
            if n is not None and n <= 0:
                raise IRVerifyError(f"{self.func.name}: loop {s.var.name!r} has extent {n}")
            if s.kind == ir.PARALLEL and in_parallel:
                raise IRVerifyError(f"{self.func.name}: parallel loop {s.var.name!r} nested in another parallel loop")
            if s.kind == ir.VECTORIZED:
                for inner in ir.walk(s.body):
                    if isinstance(inner, (For, Allocate)):
                        raise IRVerifyError(
                            f"{self.func.name}: vectorized loop {s.var.name!r} is not innermost "
                            f"(it contains a loop or an attached stage)"
                        )
            self.stmt(s.body, loop_vars | {s.var}, buffers, in_parallel or s.kind == ir.PARALLEL)
        elif isinstance(s, ir.Seq):
            for x in s.stmts:
                self.stmt(x, loop_vars, buffers, in_parallel)
        elif isinstance(s, Allocate):
            self.stmt(s.body, loop_vars, buffers | {s.buffer}, in_parallel)
        elif isinstance(s, IfThenElse):
            self.expr(s.condition, loop_vars, buffers)
            self.stmt(s.then_case, loop_vars, buffers, in_parallel)
            if s.else_case is not None:
                self.stmt(s.else_case, loop_vars, buffers, in_parallel)
        elif isinstance(s, BufferStore):
            self.access(s.buffer, s.indices, buffers, "store")
            for i in s.indices:
                self.expr(i, loop_vars, buffers)
            self.expr(s.value, loop_vars, buffers)
