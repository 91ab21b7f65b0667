"""Block-wide barriers for shared memory.

A barrier goes where shared memory that threads wrote is read (read after write), and
at the top of a loop whose body reads what its next iteration overwrites (write after
read across iterations). The analysis is conservative per buffer: any write and any
read of the same shared buffer since the last barrier conflict.
"""
from __future__ import annotations

import dataclasses

from te.expr import Expr, post_order

from .. import ir
from ..ir import Allocate, Barrier, BufferLoad, BufferStore, For, IfThenElse, Stmt
from .base import PassContext, StmtMutator, lowering_pass
from .gpu_program import GPUProgram

# A sync state: shared buffers written and read since the last barrier.
_State = tuple[frozenset, frozenset]
_EMPTY: _State = (frozenset(), frozenset())


def _shared_loads(e: Expr) -> set:
    return {n.buffer for n in post_order(e) if isinstance(n, BufferLoad) and n.buffer.scope == "shared"}


def _own_access(s: Stmt) -> tuple[set, set]:
    """(reads, writes) of shared buffers by ``s`` itself, not its children."""
    reads: set = set()
    writes: set = set()
    if isinstance(s, BufferStore):
        for e in (*s.indices, s.value):
            reads |= _shared_loads(e)
        if s.buffer.scope == "shared":
            writes.add(s.buffer)
    elif isinstance(s, IfThenElse):
        reads |= _shared_loads(s.condition)
    elif isinstance(s, For):
        reads |= _shared_loads(s.extent)
    return reads, writes


def _exposed(s: Stmt) -> tuple[set, set, bool]:
    """Shared (reads, writes) ``s`` may do before it passes a barrier, and whether it always does."""
    if isinstance(s, Barrier):
        return set(), set(), True
    reads, writes = _own_access(s)
    if isinstance(s, ir.Seq):
        for x in s.stmts:
            r, w, passed = _exposed(x)
            reads |= r
            writes |= w
            if passed:
                return reads, writes, True
        return reads, writes, False
    if isinstance(s, (For, Allocate)):
        r, w, passed = _exposed(s.body)
        return reads | r, writes | w, passed
    if isinstance(s, IfThenElse):
        r1, w1, p1 = _exposed(s.then_case)
        r2, w2, p2 = _exposed(s.else_case) if s.else_case is not None else (set(), set(), False)
        return reads | r1 | r2, writes | w1 | w2, p1 and p2
    return reads, writes, False


def _conflict(state: _State, reads: set, writes: set) -> bool:
    written, read = state
    return bool(reads & written or writes & read)


class _Sync(StmtMutator):
    """Barriers inserted in program order; ``self.state`` holds the accesses pending so far."""

    def __init__(self):
        super().__init__()
        self.state: _State = _EMPTY

    def _read(self, reads: set) -> None:
        self.state = (self.state[0], self.state[1] | reads)

    def visit_Barrier(self, s: Barrier) -> Stmt:
        self.state = _EMPTY
        return s

    def visit_Seq(self, s: ir.Seq) -> Stmt:
        out: list[Stmt] = []
        for x in s.stmts:
            reads, writes, _ = _exposed(x)
            if _conflict(self.state, reads, writes):
                out.append(Barrier())
                self.state = _EMPTY
            out.append(self.visit(x))
        return ir.seq(*out)

    def visit_BufferStore(self, s: BufferStore) -> Stmt:
        reads, writes = _own_access(s)
        self.state = (self.state[0] | writes, self.state[1] | reads)
        return s

    def visit_IfThenElse(self, s: IfThenElse) -> Stmt:
        self._read(_own_access(s)[0])
        before = self.state
        then = self.visit(s.then_case)
        st1, self.state = self.state, before
        other = None if s.else_case is None else self.visit(s.else_case)
        st2 = self.state
        self.state = (st1[0] | st2[0], st1[1] | st2[1])
        return IfThenElse(s.condition, then, other)

    def visit_For(self, s: For) -> Stmt:
        self._read(_own_access(s)[0])
        body = self.visit(s.body)
        if s.kind != ir.THREAD_BINDING and ir.const_int(s.extent) != 1:
            head_reads, head_writes, _ = _exposed(body)
            if _conflict(self.state, head_reads, head_writes):  # the next iteration against this one
                self.state = _EMPTY
                body = self.visit(ir.seq(Barrier(), s.body))
        return dataclasses.replace(s, body=body)


def insert_barriers(s: Stmt) -> Stmt:
    """Barriers for shared memory (see the module docstring); conservative per buffer."""
    return _Sync().visit(s)


def missing_barriers(body: Stmt) -> int:
    """How many barriers ``insert_barriers`` would add to ``body``: 0 for a kernel whose shared
    memory is synchronised (the pass is idempotent), more for one that lost a barrier."""

    def count(s: Stmt) -> int:
        return sum(isinstance(n, Barrier) for n in ir.walk(s))

    return count(insert_barriers(body)) - count(body)


@lowering_pass("insert_barriers")
def insert_barriers_pass(program: GPUProgram, ctx: PassContext) -> GPUProgram:
    """Threads of a block see each other's shared-memory writes only across a barrier."""
    return program.map_bodies(insert_barriers)
