"""Intermediate buffers whose lifetimes do not overlap share storage.

The stages a schedule leaves at the root are allocated around the whole function body,
``Allocate(a, Allocate(b, Seq(s0, s1, ...)))``, so every intermediate of an unfused chain
is held at once. A root buffer is live from the first top-level statement that touches
it to the last; two buffers of one dtype and scope whose live ranges do not overlap can
use the same memory (``exp`` of a chain ``x -> exp -> sum -> log -> y`` is dead once the
sum is taken, so ``log`` may reuse it). Buffers are assigned to slots largest first, each
into the first slot none of whose members is live when it is; a slot shared by several
buffers becomes one flat buffer as large as its largest user, accessed at each user's
flat index. A buffer alone in its slot is left as it was.

Stages computed at a loop are allocated the same way around that loop's body (their
nests, then the host's body), and are planned the same way over those statements: of
a chain computed per row, the row's ``exp`` and its ``log`` share one row of storage.
Below the root only ``global`` buffers of a cache line or more are planned: a ``local``
tile is meant to stay in registers, and a GPU's threads run a loop's statements side by
side (its ``shared`` buffers would need a barrier between the last reader of one and the
first writer of the next).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from te import dtypes
from te.expr import Const, Expr, post_order

from ..ir import Allocate, Buffer, BufferLoad, BufferStore, For, LoweredFunc, Seq, Stmt, walk
from ..simplify import Analyzer
from .base import PassContext, StmtMutator, lowering_pass
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


def _chain(body: Stmt) -> tuple[list[Buffer], Stmt]:
    """The buffers of ``body``'s leading chain of ``Allocate`` (outermost first), and what
    they are allocated around."""
    buffers = []
    while isinstance(body, Allocate):
        buffers.append(body.buffer)
        body = body.body
    return buffers, body


def _allocated(buffers: list[Buffer], body: Stmt) -> Stmt:
    """``body`` inside an ``Allocate`` of each of ``buffers``, the first outermost."""
    for buf in reversed(buffers):
        body = Allocate(buf, body)
    return body


#: The scopes planned below the root (see the module docstring).
BELOW_ROOT_SCOPES = frozenset({"global"})
#: Below the root, buffers smaller than this (a cache line) keep their own storage: a
#: row's statistic shares nothing worth its name.
BELOW_ROOT_MIN_BYTES = 64


def share_storage(body: Stmt, analyzer: Analyzer | None = None, scopes: frozenset | None = None,
                  min_bytes: int = 0) -> Stmt:
    """``body`` with the buffers its leading chain of ``Allocate`` holds (of ``scopes``,
    None: every scope; of at least ``min_bytes``) in shared storage where their lifetimes
    over the chain's statements do not overlap."""
    buffers, inner = _chain(body)
    if not isinstance(inner, Seq):
        return body
    planned = [b for b in buffers if (scopes is None or b.scope in scopes)
               and b.size * dtypes.nbytes(b.dtype) >= min_bytes]
    if len(planned) < 2:
        return body
    slots = plan_slots(planned, inner.stmts)
    shared = [s for s in slots if len(s.members) > 1]
    if not shared:
        return body
    into = {}
    for slot in shared:
        members = sorted(slot.members, key=buffers.index)
        storage = Buffer("_".join(b.name for b in members), (slot.size,), slot.dtype, slot.scope,
                         in_registers=all(b.in_registers for b in members))
        into.update({b: storage for b in slot.members})
    an = analyzer or Analyzer()
    flat: dict = {}  # (buffer, indices) -> flat index: a tile's accesses repeat their indices

    def flat_index(buf: Buffer, indices) -> tuple[Expr, ...]:
        key = (buf, tuple(indices))
        if key not in flat:
            flat[key] = _flat_index(buf, indices, an)
        return flat[key]

    def flattened(buf: Buffer):
        if buf not in into:
            return None
        return into[buf], lambda indices: flat_index(buf, indices)

    kept = [b for b in buffers if b not in into]
    return _allocated(kept + list(dict.fromkeys(into.values())), RemapAccesses(flattened).visit(inner))


class _ShareInLoops(StmtMutator):
    """Every chain of allocations it meets (those of the stages computed at one loop)
    planned by ``share_storage`` over ``BELOW_ROOT_SCOPES`` and ``BELOW_ROOT_MIN_BYTES``,
    inner chains first."""

    def __init__(self, analyzer: Analyzer):
        super().__init__()
        self.analyzer = analyzer

    def visit_Allocate(self, s: Allocate) -> Stmt:
        buffers, inner = _chain(s)
        body = self.visit(inner)
        chain = s if body is inner else _allocated(buffers, body)
        return share_storage(chain, self.analyzer, BELOW_ROOT_SCOPES, BELOW_ROOT_MIN_BYTES)


def share_storage_in_loops(body: Stmt, analyzer: Analyzer | None = None) -> Stmt:
    """``body`` (a function body) with the buffers allocated inside its loops shared where
    their lifetimes do not overlap; the root chain itself is ``share_storage``'s. A GPU
    function (a loop bound to threads) is left as it is."""
    if any(isinstance(n, For) and n.thread_tag is not None for n in walk(body)):
        return body  # a GPU kernel's threads run a loop's statements side by side
    buffers, inner = _chain(body)
    new = _ShareInLoops(analyzer or Analyzer()).visit(inner)
    return body if new is inner else _allocated(buffers, new)


@lowering_pass("share_storage")
def share_storage_pass(func: LoweredFunc, ctx: PassContext) -> LoweredFunc:
    """Buffers whose lifetimes do not overlap use the same memory: at the root, and among
    the stages computed at one loop."""
    body = share_storage(share_storage_in_loops(func.body, ctx.analyzer), ctx.analyzer)
    return func if body is func.body else dataclasses.replace(func, body=body)


__all__ = ["BELOW_ROOT_MIN_BYTES", "BELOW_ROOT_SCOPES", "plan_slots", "share_storage", "share_storage_in_loops",
           "share_storage_pass"]
