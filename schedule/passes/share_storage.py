"""Intermediate buffers whose lifetimes do not overlap share storage.

The stages a schedule leaves at the root are allocated around the whole function body,
``Allocate(a, Allocate(b, Seq(s0, s1, ...)))``, so every intermediate of an unfused chain
is held at once. A root buffer is live from the first top-level statement that touches
it to the last; two buffers of one dtype and scope whose live ranges do not overlap can
use the same memory (``exp`` of a chain ``x -> exp -> sum -> log -> y`` is dead once the
sum is taken, so ``log`` may reuse it). Buffers are assigned to slots largest first, each
into the first slot none of whose members is live when it is; a slot shared by several
buffers becomes one flat buffer as large as its largest user, accessed at each user's
flat index. Buffers attached inside loops already reuse memory: an allocation in a loop
body is freed at the end of each iteration. Only the root chain is planned; a buffer
alone in its slot is left as it was.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from te.expr import Const, Expr, post_order

from ..ir import Allocate, Buffer, BufferLoad, BufferStore, LoweredFunc, Seq, Stmt, walk
from ..simplify import Analyzer
from .base import PassContext, lowering_pass
from .ir_tools import RemapAccesses, stmt_exprs


@dataclass
class _Slot:
    dtype: str
    scope: str
    size: int
    members: list[Buffer] = field(default_factory=list)
    spans: list[tuple[int, int]] = field(default_factory=list)  # each member's live range

    def takes(self, buf: Buffer, span: tuple[int, int]) -> bool:
        return (buf.dtype, buf.scope) == (self.dtype, self.scope) and \
            all(span[1] < first or last < span[0] for first, last in self.spans)


def _buffers_touched(s: Stmt) -> set[Buffer]:
    """Buffers ``s`` stores to or loads from."""
    found = {n.buffer for n in walk(s) if isinstance(n, BufferStore)}
    for e in stmt_exprs(s):
        found.update(n.buffer for n in post_order(e) if isinstance(n, BufferLoad))
    return found


def plan_slots(buffers: list[Buffer], stmts: tuple[Stmt, ...]) -> list[_Slot]:
    """The storage slots of root ``buffers`` over the top-level statements ``stmts``: the
    buffers of a slot are never live in the same statement. Largest first, each into the
    first slot it fits (a slot is as large as its first, largest member)."""
    touched = [_buffers_touched(s) for s in stmts]
    live = {}
    for buf in buffers:
        used = [n for n, bufs in enumerate(touched) if buf in bufs]
        if used:
            live[buf] = (used[0], used[-1])
    slots: list[_Slot] = []
    for buf in sorted(live, key=lambda b: (-b.size, live[b])):
        slot = next((s for s in slots if s.takes(buf, live[buf])), None)
        if slot is None:
            slot = _Slot(buf.dtype, buf.scope, buf.size)
            slots.append(slot)
        slot.members.append(buf)
        slot.spans.append(live[buf])
    return slots


def _flat_index(buf: Buffer, indices, an: Analyzer) -> tuple[Expr, ...]:
    """The row-major flat index of ``buf[indices]``."""
    flat: Expr = Const(0)
    for idx, extent in zip(indices, buf.shape):
        flat = flat * extent + idx
    return (an.simplify(flat),)


def share_storage(body: Stmt, analyzer: Analyzer | None = None) -> Stmt:
    """``body`` with the root buffers of disjoint lifetimes in shared storage."""
    buffers, inner = [], body
    while isinstance(inner, Allocate):
        buffers.append(inner.buffer)
        inner = inner.body
    if len(buffers) < 2 or not isinstance(inner, Seq):
        return body
    slots = plan_slots(buffers, inner.stmts)
    shared = [s for s in slots if len(s.members) > 1]
    if not shared:
        return body
    into = {}
    for slot in shared:
        members = sorted(slot.members, key=buffers.index)
        storage = Buffer("_".join(b.name for b in members), (slot.size,), slot.dtype, slot.scope)
        into.update({b: storage for b in slot.members})
    an = analyzer or Analyzer()

    def flattened(buf: Buffer):
        if buf not in into:
            return None
        return into[buf], lambda indices: _flat_index(buf, indices, an)

    new_body: Stmt = RemapAccesses(flattened).visit(inner)
    kept = [b for b in buffers if b not in into]
    storages = list(dict.fromkeys(into.values()))
    for buf in reversed(kept + storages):
        new_body = Allocate(buf, new_body)
    return new_body


@lowering_pass("share_storage")
def share_storage_pass(func: LoweredFunc, ctx: PassContext) -> LoweredFunc:
    """Root buffers whose lifetimes do not overlap use the same memory."""
    body = share_storage(func.body, ctx.analyzer)
    return func if body is func.body else dataclasses.replace(func, body=body)


__all__ = ["plan_slots", "share_storage", "share_storage_pass"]
