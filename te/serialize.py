"""Workloads as data: a canonical JSON form of a workload's DAG, and back.

    text = te.workload_to_json(wl)        # the same bytes for the same DAG, in any process
    wl2 = te.workload_from_json(text)     # a Workload over freshly built tensors
    wl.dag_hash                           # sha256 of the JSON, 16 hex digits

Why: a workload has to cross process boundaries (the measuring process, the feature
pool, a database read back later). Re-creating it there by name from the registry only
works for the built-in ops; the DAG itself travels whatever defined it (a function
registered in the user's script, or tensors built by hand).

The form, one JSON object (sorted keys, no whitespace):

    format      FORMAT_VERSION
    name, params, registered, num_inputs     the Workload's fields
    ops         every operation, producers before consumers (``te.dag.topological_order``
                of the args): {"kind": "placeholder", name, shape, dtype} or
                {"kind": "compute", name, axis: [itervar index], body: node index, tag, attrs}
    args        the workload's args as op indices
    itervars    {name, start, extent, kind, dtype}, numbered as the ops first use them
    nodes       every expression node once, children before parents; a node refers to its
                children, itervars and tensors by index, so shared sub-expressions stay shared

Numbering follows the DAG's structure only (never object ids), so building the same DAG
twice gives the same bytes and the same hash. Non-finite float literals (the identity
of a float max reduction is -inf) are written as the strings "inf", "-inf", "nan" so the
text stays strict JSON. An expression node or operation of a kind this module does not
know is refused with a ``SerializeError`` naming it, never silently dropped.
"""
from __future__ import annotations

import hashlib
import json
import math
from typing import Any

from . import dtypes
from .dag import topological_order
from .errors import TEError
from .expr import Binary, Call, Cast, Compare, Const, Expr, Logical, Not, Reduce, Select, TensorRead, Var
from .tensor import ComputeOp, IterVar, PlaceholderOp, Tensor, _check_body

#: Version of the JSON layout; a reader refuses other versions.
FORMAT_VERSION = 1


class SerializeError(TEError):
    """A workload that cannot be written as JSON, or a JSON text that is not a workload."""


def canonical_dumps(value: Any) -> str:
    """JSON with sorted keys and no whitespace (strict: no NaN or Infinity literals)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), allow_nan=False)


def dag_hash_of(text: str) -> str:
    """The 16-hex-digit sha256 of a workload's JSON text."""
    return hashlib.sha256(text.encode()).hexdigest()[:16]


# ---------------------------------------------------------------- writing


def _scalar_to_json(value, dtype: str):
    if dtypes.is_float(dtype) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    return value


def _scalar_from_json(value, dtype: str):
    if isinstance(value, str):
        if not dtypes.is_float(dtype) or value not in ("inf", "-inf", "nan"):
            raise SerializeError(f"literal {value!r} is not a value of dtype {dtype}")
        return float(value)
    return value


class _Writer:
    """Numbers the ops, itervars and expression nodes of one workload as it walks it."""

    def __init__(self):
        self.ops: list[dict] = []
        self.op_index: dict[int, int] = {}
        self.itervars: list[dict] = []
        self.iv_index: dict[int, int] = {}      # id(IterVar.var) -> index
        self.nodes: list[dict] = []
        self.node_index: dict[int, int] = {}

    def itervar(self, iv: IterVar) -> int:
        n = self.iv_index.get(id(iv.var))
        if n is None:
            n = self.iv_index[id(iv.var)] = len(self.itervars)
            self.itervars.append({"name": iv.var.name, "start": iv.start, "extent": iv.extent,
                                  "kind": iv.kind, "dtype": iv.var.dtype})
        return n

    def op(self, op) -> None:
        if isinstance(op, PlaceholderOp):
            entry = {"kind": "placeholder", "name": op.name, "shape": list(op.shape), "dtype": op.dtype}
        elif isinstance(op, ComputeOp):
            axis = [self.itervar(iv) for iv in op.axis]
            for iv in op.reduce_axis:
                self.itervar(iv)
            entry = {"kind": "compute", "name": op.name, "axis": axis, "body": self.expr(op.body),
                     "tag": op.tag, "attrs": _attrs_to_json(op)}
        else:
            raise SerializeError(f"cannot serialize operation {op.name!r} of kind {type(op).__name__}: "
                                 f"only placeholders and computes are known")
        self.op_index[id(op)] = len(self.ops)
        self.ops.append(entry)

    def expr(self, root: Expr) -> int:
        """Index of ``root``, numbering its not yet seen nodes children first (iteratively:
        deep expressions must not hit the recursion limit)."""
        stack: list[tuple[Expr, bool]] = [(root, False)]
        while stack:
            node, expanded = stack.pop()
            if id(node) in self.node_index:
                continue
            if expanded:
                self.node_index[id(node)] = len(self.nodes)
                self.nodes.append(self.node(node))
                continue
            stack.append((node, True))
            for child in reversed(_children(node)):
                if id(child) not in self.node_index:
                    stack.append((child, False))
        return self.node_index[id(root)]

    def ref(self, node: Expr) -> int:
        return self.node_index[id(node)]

    def node(self, e: Expr) -> dict:
        """The JSON entry of one node whose children are numbered already."""
        kind = type(e)
        if kind is Var:
            n = self.iv_index.get(id(e))
            if n is not None:
                return {"k": "itervar", "iv": n}
            return {"k": "var", "name": e.name, "dtype": e.dtype}
        if kind is Const:
            return {"k": "const", "value": _scalar_to_json(e.value, e.dtype), "dtype": e.dtype}
        if kind in (Binary, Compare, Logical):
            return {"k": _OP_KINDS[kind], "op": e.op, "a": self.ref(e.a), "b": self.ref(e.b), "dtype": e.dtype}
        if kind is Not:
            return {"k": "not", "a": self.ref(e.a)}
        if kind is Select:
            return {"k": "select", "cond": self.ref(e.cond), "true": self.ref(e.true_value),
                    "false": self.ref(e.false_value), "dtype": e.dtype}
        if kind is Cast:
            return {"k": "cast", "value": self.ref(e.value), "dtype": e.dtype}
        if kind is Call:
            return {"k": "call", "func": e.func, "args": [self.ref(a) for a in e.args], "dtype": e.dtype}
        if kind is TensorRead:
            op = e.tensor.op
            if id(op) not in self.op_index:
                raise SerializeError(f"tensor {e.tensor.name!r} is read before its operation is numbered")
            return {"k": "read", "tensor": self.op_index[id(op)], "indices": [self.ref(i) for i in e.indices],
                    "dtype": e.dtype}
        if kind is Reduce:
            return {"k": "reduce", "combiner": e.combiner, "source": self.ref(e.source),
                    "axes": [self.itervar(iv) for iv in e.axes],
                    "condition": None if e.condition is None else self.ref(e.condition),
                    "identity": _scalar_to_json(e.identity.value, e.identity.dtype), "dtype": e.dtype,
                    **({} if e.logit is None else {"logit": self.ref(e.logit)})}
        raise SerializeError(f"cannot serialize expression node of kind {kind.__name__} ({e!r}): "
                             f"te.serialize knows {', '.join(sorted(c.__name__ for c in _KNOWN))}")


_OP_KINDS = {Binary: "binary", Compare: "compare", Logical: "logical"}
_KNOWN = (Var, Const, Binary, Compare, Logical, Not, Select, Cast, Call, TensorRead, Reduce)


def _children(e: Expr) -> tuple:
    if type(e) not in _KNOWN:  # refuse before walking into a node we could not write
        raise SerializeError(f"cannot serialize expression node of kind {type(e).__name__} ({e!r}): "
                             f"te.serialize knows {', '.join(sorted(c.__name__ for c in _KNOWN))}")
    return e.children()


def _attrs_to_json(op: ComputeOp) -> dict:
    try:
        return json.loads(canonical_dumps(op.attrs))
    except (TypeError, ValueError) as exc:
        raise SerializeError(f"compute {op.name!r}: its attrs {op.attrs!r} are not plain JSON values ({exc})") from None


def workload_to_dict(wl) -> dict:
    """The JSON-ready dict of ``wl`` (see the module docstring)."""
    from .workload import canonical_params

    w = _Writer()
    for op in topological_order(wl.args):
        w.op(op)
    return {
        "format": FORMAT_VERSION, "name": wl.name, "params": canonical_params(wl.name, wl.params),
        "registered": wl.registered, "num_inputs": wl.num_inputs,
        "ops": w.ops, "args": [w.op_index[id(t.op)] for t in wl.args],
        "itervars": w.itervars, "nodes": w.nodes,
    }


def workload_to_json(wl) -> str:
    """The canonical JSON text of workload ``wl``: same DAG, same bytes."""
    return canonical_dumps(workload_to_dict(wl))


# ---------------------------------------------------------------- reading


class _Reader:
    """Rebuilds the itervars, tensors and nodes of one JSON workload, in their numbering."""

    def __init__(self, data: dict):
        self.itervars = [self._itervar(n, iv) for n, iv in enumerate(data["itervars"])]
        self.tensors: list[Tensor] = []
        self.raw_nodes: list[dict] = data["nodes"]
        self.nodes: list[Expr | None] = [None] * len(self.raw_nodes)
        self.built = 0

    @staticmethod
    def _itervar(n: int, iv: dict) -> IterVar:
        return IterVar(Var(iv["name"], dtypes.check_dtype(iv["dtype"])), int(iv["start"]), int(iv["extent"]),
                       iv["kind"])

    def op(self, entry: dict) -> None:
        kind = entry.get("kind")
        if kind == "placeholder":
            from .tensor import placeholder

            self.tensors.append(placeholder(tuple(entry["shape"]), entry["dtype"], entry["name"]))
        elif kind == "compute":
            axis = tuple(self.itervars[n] for n in entry["axis"])
            body = self.node(entry["body"])
            _check_body(entry["name"], axis, body)
            self.tensors.append(ComputeOp(entry["name"], axis, body, entry["tag"], entry["attrs"]).output(0))
        else:
            raise SerializeError(f"unknown operation kind {kind!r} in workload JSON")

    def node(self, index: int) -> Expr:
        """Node ``index``, building every node up to it in order (children come first)."""
        while self.built <= index:
            self.nodes[self.built] = self._build(self.raw_nodes[self.built])
            self.built += 1
        return self.nodes[index]

    def _ref(self, n: int) -> Expr:
        node = self.nodes[n]
        if node is None:
            raise SerializeError(f"expression node {n} is used before it is defined")
        return node

    def _build(self, d: dict) -> Expr:
        k = d.get("k")
        if k == "itervar":
            return self.itervars[d["iv"]].var
        if k == "var":
            return Var(d["name"], dtypes.check_dtype(d["dtype"]))
        if k == "const":
            return Const(_scalar_from_json(d["value"], d["dtype"]), dtypes.check_dtype(d["dtype"]))
        if k in ("binary", "compare", "logical"):
            cls = {"binary": Binary, "compare": Compare, "logical": Logical}[k]
            return cls(d["op"], self._ref(d["a"]), self._ref(d["b"]), d["dtype"])
        if k == "not":
            return Not(self._ref(d["a"]))
        if k == "select":
            return Select(self._ref(d["cond"]), self._ref(d["true"]), self._ref(d["false"]), d["dtype"])
        if k == "cast":
            return Cast(dtypes.check_dtype(d["dtype"]), self._ref(d["value"]))
        if k == "call":
            return Call(d["func"], tuple(self._ref(a) for a in d["args"]), d["dtype"])
        if k == "read":
            tensor = self.tensors[d["tensor"]]
            return TensorRead(tensor, tuple(self._ref(i) for i in d["indices"]), d["dtype"])
        if k == "reduce":
            cond = None if d["condition"] is None else self._ref(d["condition"])
            identity = Const(_scalar_from_json(d["identity"], d["dtype"]), d["dtype"])
            logit = self._ref(d["logit"]) if d.get("logit") is not None else None
            return Reduce(d["combiner"], self._ref(d["source"]), tuple(self.itervars[n] for n in d["axes"]),
                          cond, identity, d["dtype"], logit)
        raise SerializeError(f"unknown expression node kind {k!r} in workload JSON")


def workload_from_dict(data: dict):
    """The Workload of a dict made by ``workload_to_dict`` (see ``workload_from_json``)."""
    from .workload import Workload

    if not isinstance(data, dict) or data.get("format") != FORMAT_VERSION:
        found = data.get("format") if isinstance(data, dict) else type(data).__name__
        raise SerializeError(f"not a workload JSON of format {FORMAT_VERSION} (format: {found!r})")
    try:
        reader = _Reader(data)
        for entry in data["ops"]:
            reader.op(entry)
        args = [reader.tensors[n] for n in data["args"]]
        return Workload(data["name"], dict(data["params"]), args, int(data["num_inputs"]),
                        registered=bool(data["registered"]))
    except (KeyError, IndexError, TypeError) as exc:
        raise SerializeError(f"malformed workload JSON ({type(exc).__name__}: {exc})") from None


def workload_from_json(text: str):
    """A ``Workload`` rebuilt from ``workload_to_json`` text: fresh tensors with the same
    names, shapes, dtypes and expressions; the same name, params and num_inputs (so the
    same key). Nothing is looked up in the registry."""
    try:
        data = json.loads(text)
    except (TypeError, ValueError) as exc:
        raise SerializeError(f"workload JSON does not parse: {exc}") from None
    return workload_from_dict(data)
