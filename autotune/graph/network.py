"""A network of library ops, built in Python: what ``tune_graph`` splits into tasks.

    g = Graph("mlp")
    x = g.input("x", (64, 1024))
    h = g.relu(g.dense(x, g.param("w1", (4096, 1024)), g.param("b1", (4096,))))
    y = g.dense(h, g.param("w2", (1024, 4096)), g.param("b2", (1024,)))
    g.output("y", y)
    g.run_numpy(x=...)          # {"y": ...}: the network on NumPy, op by op

A ``Value`` is one node's result (or an input or a parameter): a name, a shape, a dtype.
Parameters are the network's weights: arrays fixed when the graph is built (given, or
drawn from a seeded generator), passed to its kernels as inputs. Each op knows two things:
how to build its ``te`` compute from the tensors of its operands (the tasks are made of
these), and how to compute it with NumPy (the independent reference ``run_numpy`` gives).

Ops: ``dense`` (x (M, K) times w (N, K) transposed, plus an optional bias, as a linear
layer), ``matmul``, ``bias_add``, ``add`` (same shapes), ``relu``, ``gelu`` (exact, erf),
``layernorm`` (over the last axis), ``softmax`` (over the last axis), ``attention``
(multi-head, over (seq, heads * dim) operands), ``conv2d`` (NCHW data, (K, C, R, S)
weights, an optional per-channel bias), ``pool2d`` (NCHW, max or average), ``batch_norm`` (inference: folded, when the graph
is built, into a per-channel ``channel_affine`` ``x * scale[c] + shift[c]`` of constant
parameters, as inference compilers fold it). The ones with a reduction are *anchors*; the
element-wise ones fuse into them (``partition``).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

import te
from te import dtypes


class GraphError(ValueError):
    """A graph built wrong (a shape mismatch, a name used twice, an unknown value)."""


@dataclass(frozen=True, eq=False)
class Value:
    """A value of the graph: what an input, a parameter or a node produces."""

    name: str
    shape: tuple[int, ...]
    dtype: str
    graph: "Graph" = field(repr=False)

    def __repr__(self):
        return f"Value({self.name}, {self.shape}, {self.dtype})"


@dataclass(frozen=True)
class OpKind:
    """One op: whether it reduces (an anchor of fusion), its te builder over operand
    tensors, and its NumPy version over operand arrays."""

    name: str
    reduces: bool
    build: Callable[..., "te.Tensor"]      # (tensors..., name=..., **attrs) -> tensor
    numpy: Callable[..., np.ndarray]       # (arrays..., **attrs) -> array


@dataclass(frozen=True, eq=False)
class Node:
    kind: OpKind
    inputs: tuple[Value, ...]
    output: Value
    attrs: dict = field(default_factory=dict)


def _erf(x: np.ndarray) -> np.ndarray:
    from scipy.special import erf

    return erf(x)


def _np_layernorm(x, gamma, beta, eps):
    x64 = x.astype(np.float64)
    mean = x64.mean(axis=-1, keepdims=True)
    var = ((x64 - mean) ** 2).mean(axis=-1, keepdims=True)
    return ((x64 - mean) / np.sqrt(var + eps) * gamma + beta).astype(x.dtype)


def _np_softmax(x):
    x64 = x.astype(np.float64)
    e = np.exp(x64 - x64.max(axis=-1, keepdims=True))
    return (e / e.sum(axis=-1, keepdims=True)).astype(x.dtype)


def _np_attention(q, k, v, heads, causal):
    seq, d = q.shape
    dim = d // heads

    def split(x):
        return x.astype(np.float64).reshape(seq, heads, dim).transpose(1, 0, 2)

    scores = split(q) @ split(k).transpose(0, 2, 1) / math.sqrt(dim)
    if causal:
        scores[:, np.triu_indices(seq, 1)[0], np.triu_indices(seq, 1)[1]] = -np.inf
    p = np.exp(scores - scores.max(axis=-1, keepdims=True))
    p /= p.sum(axis=-1, keepdims=True)
    return (p @ split(v)).transpose(1, 0, 2).reshape(seq, d).astype(q.dtype)


def _te_attention(Q, K, V, name, heads, causal):
    """Multi-head attention over (seq, heads * dim) operands: heads split by index views,
    ``te.ops.attention`` per head, and the heads merged back into (seq, heads * dim)."""
    seq, d = Q.shape
    dim = d // heads

    def split(X, part):
        return te.compute((heads, seq, dim), lambda h, s, j: X[s, h * dim + j], name=f"{name}_{part}",
                          tag="elementwise")

    O = te.ops.attention(split(Q, "q"), split(K, "k"), split(V, "v"), causal)
    return te.compute((seq, d), lambda s, c: O[c // dim, s, c % dim], name=name, tag="elementwise")


def _te_bias_add(X, b, name):
    return te.compute(X.shape, lambda *i: X[i] + b[i[-1]], name=name, tag="elementwise")


def _te_gelu(X, name):
    return te.compute(X.shape, lambda *i: te.ops.gelu(X[i]), name=name, tag="elementwise")


def _te_dense(X, W, *bias, name):
    return te.ops.dense(X, W, bias[0] if bias else None)


def _te_conv2d(X, W, name, stride, padding, dilation):
    return te.ops.conv2d_nchw(X, W, stride, padding, dilation, name=name)


def _np_conv2d(x, w, stride, padding, dilation):
    from ..anchor import im2col_conv2d

    return im2col_conv2d(x.astype(np.float64), w.astype(np.float64), stride, padding, dilation).astype(x.dtype)


def _te_pool2d(X, name, kernel, stride, padding, pool_type):
    return te.ops.pool2d(X, kernel, stride, padding, pool_type)


def _np_pool2d(x, kernel, stride, padding, pool_type):
    """Max or average (padding counted, as te's) pooling of NCHW ``x``, window by window."""
    (kh, kw), (sh, sw), (ph, pw) = (_pair(v) for v in (kernel, stride, padding))
    fill = -np.inf if pool_type == "max" else 0.0
    padded = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (ph, ph), (pw, pw)), constant_values=fill)
    windows = np.lib.stride_tricks.sliding_window_view(padded, (kh, kw), axis=(2, 3))[:, :, ::sh, ::sw]
    out = windows.max(axis=(-2, -1)) if pool_type == "max" else windows.sum(axis=(-2, -1)) / (kh * kw)
    return out.astype(x.dtype)


def _pair(v) -> tuple[int, int]:
    return (v, v) if isinstance(v, int) else (int(v[0]), int(v[1]))


def _te_channel_affine(X, scale, shift, name):
    return te.compute(X.shape, lambda n, c, *hw: X[(n, c, *hw)] * scale[c] + shift[c], name=name, tag="elementwise")


def _te_channel_bias(X, b, name):
    return te.compute(X.shape, lambda n, c, *hw: X[(n, c, *hw)] + b[c], name=name, tag="elementwise")


def _per_channel(v: np.ndarray, ndim: int) -> np.ndarray:
    """A (C,) vector shaped to broadcast over axis 1 of an ``ndim``-d NCHW array."""
    return v.reshape((1, -1) + (1,) * (ndim - 2))


DENSE = OpKind("dense", True, _te_dense,
               lambda x, w, *b: (x.astype(np.float64) @ w.astype(np.float64).T
                                 + (b[0].astype(np.float64) if b else 0)).astype(x.dtype))
MATMUL = OpKind("matmul", True, lambda A, B, name: te.ops.matmul(A, B, name=name),
                lambda a, b: (a.astype(np.float64) @ b.astype(np.float64)).astype(a.dtype))
LAYERNORM = OpKind("layernorm", True, lambda X, g, b, name, eps: te.ops.layer_norm(X, g, b, eps),
                   _np_layernorm)
ATTENTION = OpKind("attention", True, _te_attention, _np_attention)
SOFTMAX = OpKind("softmax", True, lambda X, name: te.ops.softmax(X, axis=-1), _np_softmax)
BIAS_ADD = OpKind("bias_add", False, _te_bias_add, lambda x, b: x + b)
ADD = OpKind("add", False, lambda X, Y, name: te.ops.add(X, Y, name=name), lambda x, y: x + y)
RELU = OpKind("relu", False, lambda X, name: te.ops.relu(X, name=name), lambda x: np.maximum(x, 0))
CONV2D = OpKind("conv2d", True, _te_conv2d, _np_conv2d)
POOL2D = OpKind("pool2d", True, _te_pool2d, _np_pool2d)
CHANNEL_AFFINE = OpKind("channel_affine", False, _te_channel_affine,
                        lambda x, scale, shift: x * _per_channel(scale, x.ndim) + _per_channel(shift, x.ndim))
CHANNEL_BIAS = OpKind("channel_bias", False, _te_channel_bias, lambda x, b: x + _per_channel(b, x.ndim))
GELU = OpKind("gelu", False, _te_gelu,
              lambda x: (0.5 * x.astype(np.float64) * (1 + _erf(x.astype(np.float64) / math.sqrt(2))))
              .astype(x.dtype))


class Graph:
    """A network: inputs, parameters, nodes in the order they were added, named outputs."""

    def __init__(self, name: str = "graph", seed: int = 0):
        self.name = name
        self.inputs: list[Value] = []
        self.params: dict[Value, np.ndarray] = {}
        self.nodes: list[Node] = []
        self.outputs: dict[str, Value] = {}
        self._names: set[str] = set()
        self._rng = np.random.default_rng(seed)

    # ------------------------------------------------------------ values

    def _value(self, name: str, shape, dtype: str) -> Value:
        if name in self._names:
            raise GraphError(f"graph {self.name!r}: the name {name!r} is used twice")
        if dtype not in dtypes.FLOAT_DTYPES:
            raise GraphError(f"graph {self.name!r}: {name} is {dtype}; graphs take float dtypes "
                             f"({', '.join(dtypes.FLOAT_DTYPES)})")
        shape = tuple(int(d) for d in shape)
        if not shape or any(d <= 0 for d in shape):
            raise GraphError(f"graph {self.name!r}: {name} has shape {shape}; extents must be positive")
        self._names.add(name)
        return Value(name, shape, dtype, self)

    def input(self, name: str, shape, dtype: str = "float32") -> Value:
        """An input of the network, given by name when it runs."""
        v = self._value(name, shape, dtype)
        self.inputs.append(v)
        return v

    def param(self, name: str, shape=None, dtype: str = "float32", value: np.ndarray | None = None) -> Value:
        """A weight: ``value`` as given, or drawn from the graph's seeded generator (uniform,
        scaled by 1/sqrt of the last extent, as a layer's initialisation)."""
        if value is not None:
            value = np.ascontiguousarray(value)
            shape, dtype = value.shape, str(value.dtype)
        v = self._value(name, shape, dtype)
        if value is None:
            bound = 1.0 / math.sqrt(v.shape[-1])
            value = self._rng.uniform(-bound, bound, size=v.shape).astype(dtypes.numpy_dtype(dtype))
        self.params[v] = value
        return v

    def output(self, name: str, value: Value) -> None:
        self._own(value)
        if name in self.outputs:
            raise GraphError(f"graph {self.name!r}: output {name!r} is named twice")
        self.outputs[name] = value

    def _own(self, *values: Value) -> None:
        for v in values:
            if not isinstance(v, Value) or v.graph is not self:
                raise GraphError(f"graph {self.name!r}: {v!r} is not a value of this graph")

    def _node(self, kind: OpKind, inputs, shape, dtype: str, **attrs) -> Value:
        self._own(*inputs)
        out = self._value(f"{kind.name}{len(self.nodes)}", shape, dtype)
        self.nodes.append(Node(kind, tuple(inputs), out, attrs))
        return out

    # ------------------------------------------------------------ ops

    def dense(self, x: Value, w: Value, bias: Value | None = None) -> Value:
        """``x @ w.T (+ bias)``: x (M, K), w (N, K), bias (N,)."""
        self._own(x, w, *([bias] if bias is not None else []))
        if len(x.shape) != 2 or len(w.shape) != 2 or x.shape[1] != w.shape[1]:
            raise GraphError(f"dense: x is {x.shape} and w is {w.shape}; they must be (M, K) and (N, K)")
        if bias is not None and bias.shape != (w.shape[0],):
            raise GraphError(f"dense: bias must have shape ({w.shape[0]},), got {bias.shape}")
        inputs = (x, w) if bias is None else (x, w, bias)
        return self._node(DENSE, inputs, (x.shape[0], w.shape[0]), x.dtype)

    def matmul(self, a: Value, b: Value) -> Value:
        self._own(a, b)
        if len(a.shape) != 2 or len(b.shape) != 2 or a.shape[1] != b.shape[0]:
            raise GraphError(f"matmul: a is {a.shape} and b is {b.shape}; they must be (M, K) and (K, N)")
        return self._node(MATMUL, (a, b), (a.shape[0], b.shape[1]), a.dtype)

    def bias_add(self, x: Value, b: Value) -> Value:
        self._own(x, b)
        if b.shape != (x.shape[-1],):
            raise GraphError(f"bias_add: bias must have shape ({x.shape[-1]},) for x {x.shape}, got {b.shape}")
        return self._node(BIAS_ADD, (x, b), x.shape, x.dtype)

    def add(self, a: Value, b: Value) -> Value:
        self._own(a, b)
        if a.shape != b.shape:
            raise GraphError(f"add: shapes {a.shape} and {b.shape} differ (no broadcasting)")
        return self._node(ADD, (a, b), a.shape, a.dtype)

    def relu(self, x: Value) -> Value:
        return self._node(RELU, (x,), x.shape, x.dtype)

    def gelu(self, x: Value) -> Value:
        return self._node(GELU, (x,), x.shape, x.dtype)

    def layernorm(self, x: Value, gamma: Value, beta: Value, eps: float = 1e-5) -> Value:
        self._own(x, gamma, beta)
        if len(x.shape) != 2 or gamma.shape != (x.shape[1],) or beta.shape != (x.shape[1],):
            raise GraphError(f"layernorm: x must be (M, N) with gamma and beta (N,), got {x.shape}, "
                             f"{gamma.shape}, {beta.shape}")
        return self._node(LAYERNORM, (x, gamma, beta), x.shape, x.dtype, eps=eps)

    def softmax(self, x: Value) -> Value:
        return self._node(SOFTMAX, (x,), x.shape, x.dtype)

    def attention(self, q: Value, k: Value, v: Value, heads: int, causal: bool = False) -> Value:
        """Multi-head attention: q, k, v (seq, heads * dim), each head
        ``softmax(q_h k_h^T / sqrt(dim)) v_h``, the heads side by side in the result."""
        self._own(q, k, v)
        if not (len(q.shape) == 2 and q.shape == k.shape == v.shape):
            raise GraphError(f"attention: q, k and v must be (seq, heads * dim) alike, got {q.shape}, {k.shape}, "
                             f"{v.shape}")
        if not isinstance(heads, int) or heads <= 0 or q.shape[1] % heads:
            raise GraphError(f"attention: heads must divide the width {q.shape[1]}, got {heads!r}")
        return self._node(ATTENTION, (q, k, v), q.shape, q.dtype, heads=heads, causal=bool(causal))

    def conv2d(self, x: Value, w: Value, bias: Value | None = None, stride=1, padding=0, dilation=1) -> Value:
        """2-d convolution: x (N, C, H, W), w (K, C, R, S), bias (K,); ``stride``, ``dilation``
        an int or [h, w]; ``padding`` an int, [h, w] or [top, left, bottom, right]."""
        self._own(x, w, *([bias] if bias is not None else []))
        if len(x.shape) != 4 or len(w.shape) != 4 or x.shape[1] != w.shape[1]:
            raise GraphError(f"conv2d: x is {x.shape} and w is {w.shape}; they must be (N, C, H, W) and (K, C, R, S)")
        if bias is not None and bias.shape != (w.shape[0],):
            raise GraphError(f"conv2d: bias must have shape ({w.shape[0]},), got {bias.shape}")
        try:  # the op checks its parameters and gives the output shape
            probe = te.ops.conv2d_nchw(te.placeholder(x.shape, x.dtype, "x"), te.placeholder(w.shape, w.dtype, "w"),
                                       stride, padding, dilation)
        except te.TEError as exc:
            raise GraphError(str(exc)) from None
        out = self._node(CONV2D, (x, w), probe.shape, x.dtype, stride=stride, padding=padding, dilation=dilation)
        return out if bias is None else self._node(CHANNEL_BIAS, (out, bias), out.shape, out.dtype)

    def pool2d(self, x: Value, kernel, stride=None, padding=0, pool_type: str = "max") -> Value:
        """Max or average pooling of an NCHW value: ``kernel``, ``stride`` (default: the
        kernel) and ``padding`` an int or [h, w]; average pooling counts the padding (its
        windows divide by the kernel's area)."""
        self._own(x)
        stride = kernel if stride is None else stride
        try:  # the op checks its parameters and gives the output shape
            probe = te.ops.pool2d(te.placeholder(x.shape, x.dtype, "x"), kernel, stride, padding, pool_type)
        except te.TEError as exc:
            raise GraphError(str(exc)) from None
        return self._node(POOL2D, (x,), probe.shape, x.dtype, kernel=kernel, stride=stride, padding=padding,
                          pool_type=pool_type)

    def channel_affine(self, x: Value, scale: Value, shift: Value) -> Value:
        """``x * scale[c] + shift[c]`` over the channels (axis 1) of an NCHW value."""
        self._own(x, scale, shift)
        if len(x.shape) < 2 or scale.shape != (x.shape[1],) or shift.shape != (x.shape[1],):
            raise GraphError(f"channel_affine: scale and shift must have shape ({x.shape[1] if len(x.shape) > 1 else '?'},) "
                             f"for x {x.shape}, got {scale.shape} and {shift.shape}")
        return self._node(CHANNEL_AFFINE, (x, scale, shift), x.shape, x.dtype)

    def batch_norm(self, x: Value, gamma: Value, beta: Value, mean: Value, var: Value, eps: float = 1e-5) -> Value:
        """Inference batch norm over the channels of x: ``(x - mean) / sqrt(var + eps) * gamma
        + beta``, folded now into ``channel_affine`` with constant parameters (its four
        operands must be parameters: their values are known when the graph is built)."""
        self._own(x, gamma, beta, mean, var)
        operands = (gamma, beta, mean, var)
        if any(v not in self.params for v in operands):
            raise GraphError("batch_norm: gamma, beta, mean and var must be parameters (constants) to fold")
        g, b, m, v = (self.params[p].astype(np.float64) for p in operands)
        scale = g / np.sqrt(v + eps)
        dtype = dtypes.numpy_dtype(x.dtype)
        n = len(self.nodes)
        scale_v = self.param(f"bn{n}_scale", value=scale.astype(dtype))
        shift_v = self.param(f"bn{n}_shift", value=(b - m * scale).astype(dtype))
        return self.channel_affine(x, scale_v, shift_v)

    # ------------------------------------------------------------ running

    def consumers(self, value: Value) -> list[Node]:
        return [n for n in self.nodes if value in n.inputs]

    def check_inputs(self, arrays: dict) -> dict[Value, np.ndarray]:
        """The arrays for the graph's inputs, by name; GraphError naming what is wrong."""
        names = {v.name for v in self.inputs}
        unknown, missing = sorted(set(arrays) - names), sorted(names - set(arrays))
        if unknown or missing:
            raise GraphError(f"graph {self.name!r} takes inputs {', '.join(sorted(names))}"
                             + (f"; missing {', '.join(missing)}" if missing else "")
                             + (f"; unknown {', '.join(unknown)}" if unknown else ""))
        values = {}
        for v in self.inputs:
            a = np.asarray(arrays[v.name])
            if a.shape != v.shape or a.dtype != dtypes.numpy_dtype(v.dtype):
                raise GraphError(f"input {v.name}: expected {v.dtype} {v.shape}, got {a.dtype} {a.shape}")
            values[v] = np.ascontiguousarray(a)
        return values

    def run_numpy(self, **inputs) -> dict[str, np.ndarray]:
        """The network computed op by op with NumPy (float64 inside each op): the reference."""
        values = {**self.check_inputs(inputs), **self.params}
        for node in self.nodes:
            values[node.output] = node.kind.numpy(*(values[v] for v in node.inputs), **node.attrs)
        return {name: values[v] for name, v in self.outputs.items()}
