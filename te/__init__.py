"""Tensor expressions: the language operators are written in.

See ``te.expr`` (nodes), ``te.tensor`` (placeholder/compute/reductions), ``te.ops``
(the operator library), ``te.workload`` (the registry) and ``te.evaluate`` (the NumPy
reference evaluator) and ``te.serialize`` (workloads as canonical JSON).
"""
from . import dtypes
from .dag import consumers, input_placeholders, producers, topological_order
from .errors import DTypeError, ReductionError, ShapeError, TEError, WorkloadError
from .evaluate import EvaluationError, evaluate
from .expr import (
    Binary, Call, Cast, Compare, Const, Expr, Logical, Not, Reduce, Select, TensorRead, Var,
    abs, all_of, any_of, cast, ceil, const, cos, equal, erf, exp, floor, if_then_else, log,
    not_equal, rsqrt, sigmoid, sin, sqrt, structural_equal, tanh, var,
)
from .printer import compute_to_str, expr_to_str
from .tensor import (
    ComputeOp, IterVar, Operation, PlaceholderOp, Tensor, compute, max, min, placeholder,
    reduce_axis, softmax_sum, sum,
)
from .serialize import SerializeError, workload_from_json, workload_to_json
from .workload import Workload, create_workload, flop_count, library_workloads, list_workloads, register_workload, workload_key

from . import ops  # noqa: E402  (registers the library's workloads)
