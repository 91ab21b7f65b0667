"""Helpers over the DAG of operations behind a set of output tensors.

    producers(op)            the operations ``op`` reads from
    consumers(outputs)       for each operation, the operations that read it
    topological_order(outs)  every operation, producers before consumers
    input_placeholders(outs) the placeholder tensors the outputs depend on
"""
from __future__ import annotations

from .tensor import Operation, PlaceholderOp, Tensor


def _as_list(outputs) -> list[Tensor]:
    if isinstance(outputs, Tensor):
        return [outputs]
    outs = list(outputs)
    for t in outs:
        if not isinstance(t, Tensor):
            raise TypeError(f"expected te.Tensor outputs, got {t!r}")
    return outs


def producers(op: Operation) -> list[Operation]:
    """Operations whose outputs ``op`` reads, in first-read order."""
    return [t.op for t in op.input_tensors]


def topological_order(outputs) -> list[Operation]:
    """All operations reachable from ``outputs``, each after everything it reads.

    Deterministic: a depth-first post-order following read order.
    """
    order: list[Operation] = []
    seen: set[int] = set()
    for out in _as_list(outputs):
        stack: list[tuple[Operation, bool]] = [(out.op, False)]
        while stack:
            op, expanded = stack.pop()
            if expanded:
                if id(op) not in seen:
                    seen.add(id(op))
                    order.append(op)
                continue
            if id(op) in seen:
                continue
            stack.append((op, True))
            for p in reversed(producers(op)):
                if id(p) not in seen:
                    stack.append((p, False))
    return order


def consumers(outputs) -> dict[Operation, list[Operation]]:
    """Map from each operation of the DAG to the operations that read it."""
    result: dict[Operation, list[Operation]] = {}
    for op in topological_order(outputs):
        result.setdefault(op, [])
        for p in producers(op):
            if op not in result[p]:
                result[p].append(op)
    return result


def input_placeholders(outputs) -> list[Tensor]:
    """Placeholder tensors the outputs depend on, in topological order."""
    return [op.output(0) for op in topological_order(outputs) if isinstance(op, PlaceholderOp)]
