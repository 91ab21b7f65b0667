"""The workload registry: named, parameterised expressions with stable keys.

    @te.register_workload("my_gemv")
    def my_gemv(N, K, dtype="float32"):
        ...
        return [A, x, y]            # inputs first, then outputs: the call order

    wl = te.create_workload("my_gemv", N=512, K=256)
    wl.args, wl.flops, wl.key

``key`` is the name plus the parameters (defaults filled in) as canonical JSON, so it is
the same string in every process and on every machine; the tuning database indexes
records by it.

A workload can also be made from tensors, with no registered function behind it:

    wl = te.Workload.from_tensors([A, x, y], name="my_gemv")
    wl.key        # 'my_gemv{"dag":"<dag_hash>"}': the name and the hash of its DAG

Either kind crosses process boundaries as data (``wl.dag_json``, ``te.serialize``), never
by a registry lookup. A registered workload keeps the name + params key, so databases
written before DAGs were stored still match; a workload from tensors has no params, so
its DAG's hash stands in for them, in the same ``name{...}`` shape of key.
"""
from __future__ import annotations

import functools
import inspect
import json
import numbers
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from . import dtypes
from .dag import input_placeholders, topological_order
from .errors import WorkloadError
from .expr import Binary, Call, Compare, Expr, Logical, Not, Reduce, Select, TensorRead
from .tensor import ComputeOp, PlaceholderOp, Tensor

_REGISTRY: dict[str, Callable[..., list[Tensor]]] = {}
#: name -> parameters left out of a workload's params (and so of its key) while they hold
#: their default: parameters added after databases keyed by the others were written.
_KEYED_ONLY_WHEN_SET: dict[str, tuple[str, ...]] = {}


def register_workload(name: str, *, override: bool = False, keyed_only_when_set: tuple[str, ...] = ()):
    """Decorator registering ``fn(**params) -> [inputs..., outputs...]`` under ``name``.

    ``keyed_only_when_set``: parameters that appear in the workload's params and key only
    when given a value other than their default. A parameter added to a registered
    workload goes there, so that every key stored before it (which lacks it) still names
    the same workload."""
    if not isinstance(name, str) or not name:
        raise WorkloadError(f"workload name must be a non-empty string, got {name!r}")

    def decorate(fn):
        if name in _REGISTRY and not override and _REGISTRY[name] is not fn:
            raise WorkloadError(f"workload {name!r} is already registered (pass override=True to replace it)")
        _REGISTRY[name] = fn
        _KEYED_ONLY_WHEN_SET[name] = tuple(keyed_only_when_set)
        return fn

    return decorate


def list_workloads() -> list[str]:
    return sorted(_REGISTRY)


def library_workloads() -> list[str]:
    """The workloads the library itself registers (``te.ops``); a script may register more."""
    _ensure_library_loaded()
    return sorted(n for n, fn in _REGISTRY.items() if fn.__module__.startswith(__package__ + ".ops"))


def registered_name(fn: Callable) -> str | None:
    """The name ``fn`` is registered under with ``register_workload``, if it is."""
    return next((name for name, f in _REGISTRY.items() if f is fn), None)


def get_workload_function(name: str) -> Callable[..., list[Tensor]]:
    _ensure_library_loaded()
    try:
        return _REGISTRY[name]
    except KeyError:
        known = ", ".join(sorted(_REGISTRY)) or "none"
        raise WorkloadError(f"unknown workload {name!r}; registered workloads: {known}") from None


def _ensure_library_loaded() -> None:
    from . import ops  # noqa: F401  (registers the library's workloads)


def _canonical(value, where: str):
    """A JSON-stable form of one parameter value."""
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        return float(value)
    if isinstance(value, str) or value is None:
        return value
    if isinstance(value, (list, tuple)):
        return [_canonical(v, where) for v in value]
    raise WorkloadError(f"{where}: parameter value {value!r} is not a number, string, bool or list of them")


def _bind_params(name: str, fn: Callable, params: dict[str, Any]) -> dict[str, Any]:
    sig = inspect.signature(fn)
    unknown = [p for p in params if p not in sig.parameters]
    if unknown:
        raise WorkloadError(
            f"workload {name!r} got unknown parameter(s) {', '.join(unknown)}; "
            f"it takes {', '.join(sig.parameters)}"
        )
    missing = [p.name for p in sig.parameters.values() if p.default is inspect.Parameter.empty and p.name not in params]
    if missing:
        raise WorkloadError(f"workload {name!r} is missing parameter(s) {', '.join(missing)}")
    bound = sig.bind(**params)
    bound.apply_defaults()
    optional = _KEYED_ONLY_WHEN_SET.get(name, ())
    return {k: v for k, v in bound.arguments.items()
            if not (k in optional and v == sig.parameters[k].default)}


@dataclass(frozen=True)
class Workload:
    """One instance of a workload: a registered function's (``create_workload``), or tensors
    given directly (``Workload.from_tensors``: ``registered`` False, no params)."""

    name: str
    params: dict[str, Any]
    args: list[Tensor] = field(repr=False)
    num_inputs: int
    registered: bool = True

    @classmethod
    def from_tensors(cls, tensors, name: str) -> "Workload":
        """A workload of ``tensors`` (placeholders first, then outputs, the call order) named
        ``name``; nothing is registered. Its key is the name plus its DAG's hash."""
        if not isinstance(name, str) or not name:
            raise WorkloadError(f"workload name must be a non-empty string, got {name!r}")
        if isinstance(tensors, Tensor):
            tensors = [tensors]
        args, num_inputs = _check_args(name, tensors)
        return cls(name, {}, args, num_inputs, registered=False)

    @property
    def inputs(self) -> list[Tensor]:
        return self.args[: self.num_inputs]

    @property
    def outputs(self) -> list[Tensor]:
        return self.args[self.num_inputs:]

    @functools.cached_property
    def key(self) -> str:
        """Stable identity: ``name`` + canonical JSON of the parameters; for a workload from
        tensors, ``name`` + ``{"dag": dag_hash}`` (see the module docstring)."""
        if self.registered:
            return workload_key(self.name, self.params)
        return workload_key(self.name, {"dag": self.dag_hash})

    @functools.cached_property
    def dag_json(self) -> str:
        """The canonical JSON of this workload (``te.serialize.workload_to_json``), made once."""
        from .serialize import workload_to_json

        return workload_to_json(self)

    @functools.cached_property
    def dag_hash(self) -> str:
        """sha256 of ``dag_json``, 16 hex digits: equal for the same DAG built twice."""
        from .serialize import dag_hash_of

        return dag_hash_of(self.dag_json)

    @property
    def flops(self) -> int:
        return flop_count(self.outputs)

    def random_inputs(self, seed: int = 0) -> list[np.ndarray]:
        """Input arrays of the right shapes and dtypes (values in [-1, 1) for floats)."""
        rng = np.random.default_rng(seed)
        arrays = []
        for t in self.inputs:
            dt = dtypes.numpy_dtype(t.dtype)
            if dtypes.is_float(t.dtype):
                arrays.append(rng.uniform(-1, 1, size=t.shape).astype(dt))
            elif t.dtype == "bool":
                arrays.append(rng.integers(0, 2, size=t.shape).astype(dt))
            else:
                arrays.append(rng.integers(-8 if dt.kind == "i" else 0, 8, size=t.shape).astype(dt))
        return arrays

    def reference(self, *inputs: np.ndarray) -> list[np.ndarray]:
        """Outputs computed by the NumPy reference evaluator."""
        from .evaluate import evaluate

        return evaluate(self.outputs, dict(zip(self.inputs, inputs)))


def canonical_params(name: str, params: dict[str, Any]) -> dict[str, Any]:
    """``params`` with JSON-stable values (tuples as lists, NumPy scalars as Python ones)."""
    return {k: _canonical(v, f"workload {name!r}") for k, v in params.items()}


def workload_key(name: str, params: dict[str, Any]) -> str:
    return name + json.dumps(canonical_params(name, params), sort_keys=True, separators=(",", ":"))


def split_key(key: str) -> tuple[str, dict[str, Any] | None]:
    """(name, params) of a workload key ``workload_key`` made; params None when the key is
    not of that form (a key from a DAG's hash keeps its one "dag" parameter)."""
    brace = key.find("{")
    if brace < 0:
        return key, None
    try:
        params = json.loads(key[brace:])
    except ValueError:
        return key, None
    return (key[:brace], params) if isinstance(params, dict) else (key, None)


def create_workload(name: str, **params) -> Workload:
    """Instantiate workload ``name`` with ``params`` (defaults filled in)."""
    fn = get_workload_function(name)
    bound = _bind_params(name, fn, params)
    for k, v in bound.items():
        _canonical(v, f"workload {name!r} parameter {k!r}")
    args, num_inputs = _check_args(name, fn(**bound))
    return Workload(name, bound, args, num_inputs)


def _check_args(name: str, args) -> tuple[list[Tensor], int]:
    """(args as a list, number of inputs) of a workload's tensors: placeholders first, then
    at least one output, and every placeholder the outputs read among them."""
    try:
        args = list(args) if not isinstance(args, Tensor) else None
    except TypeError:
        args = None
    if not args or not all(isinstance(t, Tensor) for t in args):
        raise WorkloadError(f"workload {name!r} must be a list of tensors (inputs, then outputs)")
    num_inputs = sum(isinstance(t.op, PlaceholderOp) for t in args)
    if any(not isinstance(t.op, PlaceholderOp) for t in args[:num_inputs]) or num_inputs == len(args):
        raise WorkloadError(f"workload {name!r} must list its placeholders first, then at least one output")
    needed = input_placeholders(args[num_inputs:])
    missing = [t.name for t in needed if t not in args[:num_inputs]]
    if missing:
        raise WorkloadError(f"workload {name!r}: outputs read placeholder(s) {', '.join(missing)} not in its args")
    return args, num_inputs


# ---------------------------------------------------------------- FLOP counting

def _expr_flops(e: Expr) -> int:
    """Arithmetic operations in ``e`` outside index computations and conditions."""
    count = 0
    stack = [e]
    while stack:
        node = stack.pop()
        if isinstance(node, TensorRead):
            continue  # index arithmetic is addressing, not work
        if isinstance(node, Select):
            stack.extend([node.true_value, node.false_value])
            continue
        if isinstance(node, (Compare, Logical, Not)):
            continue
        if isinstance(node, (Binary, Call)):
            count += 1
        stack.extend(node.children())
    return count


def flop_count(outputs) -> int:
    """FLOPs to compute ``outputs``: per compute, arithmetic ops per point times points.

    A reduction counts one combine per reduction point (so matmul is 2*M*N*K). Outputs
    whose compute declares ``attrs["flops"]`` count that instead, with everything they
    read: the FLOPs of the computation they stand for (a Winograd convolution counts the
    direct convolution's, as TVM and cuDNN report such algorithms, so its GFLOP/s compare
    with the direct one's).
    """
    out_ops = [t.op for t in outputs] if isinstance(outputs, (list, tuple)) else [outputs.op]
    if all(isinstance(op, ComputeOp) and "flops" in op.attrs for op in out_ops):
        return sum(int(op.attrs["flops"]) for op in out_ops)
    total = 0
    for op in topological_order(outputs):
        if not isinstance(op, ComputeOp):
            continue
        points = int(np.prod([iv.extent for iv in op.axis + op.reduce_axis]))
        body = op.body
        per_point = _expr_flops(body.source) + 1 if isinstance(body, Reduce) else _expr_flops(body)
        total += points * per_point
    return total
