"""ONNX models as graphs: ``from_onnx("net.onnx")`` -> ``Graph`` (needs the ``onnx`` package).

The nodes this reads, and what each becomes:

    Gemm (alpha = beta = 1, transA = 0)   dense (transB = 1: B is (N, K)) or matmul (+ bias_add)
    MatMul                                matmul (2-d operands)
    Add                                   bias_add (a 1-d initializer on the last axis) or add
    Relu, Gelu (erf form), Softmax (last axis), LayerNormalization (last axis)
    Conv (2-d, group 1, explicit pads)    conv2d (+ its bias per channel); asymmetric pads kept
    BatchNormalization (inference)        batch_norm, folded into a per-channel scale and shift

Initializers become the graph's parameters (their values kept), the other graph inputs
its inputs, the graph outputs its outputs, all float32. Any other node, attribute or dtype
is refused with a ``GraphError`` naming the node, its op type and what is unsupported, so
a model either loads whole or says why not.
"""
from __future__ import annotations

from pathlib import Path

from .network import Graph, GraphError, Value


def from_onnx(model, name: str | None = None) -> Graph:
    """The graph of an ONNX model: a path, or an ``onnx.ModelProto``."""
    try:
        import onnx
        from google.protobuf.message import DecodeError
        from onnx import numpy_helper
    except ImportError:
        raise GraphError("reading ONNX models needs the onnx package: pip install -e '.[onnx]'") from None
    if isinstance(model, (str, Path)):
        try:
            model = onnx.load(str(model))
        except (OSError, ValueError, DecodeError) as exc:
            raise GraphError(f"cannot read the ONNX model {model}: {exc}") from None
    proto = model.graph
    g = Graph(name or proto.name or "onnx")
    values: dict[str, Value] = {}
    initializers = {t.name: numpy_helper.to_array(t) for t in proto.initializer}
    for tensor_name, array in initializers.items():
        if str(array.dtype) != "float32":
            raise GraphError(f"initializer {tensor_name!r} is {array.dtype}; only float32 models are read")
        values[tensor_name] = g.param(_safe(tensor_name), value=array)
    for inp in proto.input:
        if inp.name in values:
            continue
        values[inp.name] = g.input(inp.name, _static_shape(inp), _dtype(inp))
    for node in proto.node:
        _read_node(g, node, values, initializers)
    for out in proto.output:
        if out.name not in values:
            raise GraphError(f"graph output {out.name!r} is produced by no node")
        g.output(out.name, values[out.name])
    return g


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c == "_" else "_" for c in name)


def _static_shape(value_info) -> tuple[int, ...]:
    dims = value_info.type.tensor_type.shape.dim
    shape = []
    for d in dims:
        if not d.HasField("dim_value"):
            raise GraphError(f"input {value_info.name!r} has a symbolic dimension {d.dim_param!r}; "
                             f"only static shapes are read")
        shape.append(int(d.dim_value))
    return tuple(shape)


def _dtype(value_info) -> str:
    from onnx import TensorProto

    elem = value_info.type.tensor_type.elem_type
    if elem != TensorProto.FLOAT:
        raise GraphError(f"input {value_info.name!r} has element type {TensorProto.DataType.Name(elem)}; "
                         f"only float32 models are read")
    return "float32"


def _attrs(node) -> dict:
    from onnx import helper

    return {a.name: helper.get_attribute_value(a) for a in node.attribute}


def _read_node(g: Graph, node, values: dict, initializers: dict) -> None:
    where = f"node {node.name or node.output[0]!r} ({node.op_type})"
    try:
        operands = [values[i] for i in node.input if i]
    except KeyError as exc:
        raise GraphError(f"{where}: input {exc.args[0]!r} is not produced before it") from None
    attrs = _attrs(node)
    op = node.op_type

    def refuse(what: str):
        raise GraphError(f"{where}: {what} is not supported")

    if op == "Gemm":
        if attrs.get("alpha", 1.0) != 1.0 or attrs.get("beta", 1.0) != 1.0 or attrs.get("transA", 0):
            refuse(f"alpha, beta or transA other than 1, 1, 0 ({attrs})")
        a, b = operands[0], operands[1]
        bias = operands[2] if len(operands) > 2 else None
        if bias is not None and len(bias.shape) != 1:
            refuse(f"a bias of shape {bias.shape} (only a vector)")
        out = g.dense(a, b, bias) if attrs.get("transB", 0) else _bias(g, g.matmul(a, b), bias)
    elif op == "MatMul":
        out = g.matmul(*operands)
    elif op == "Add":
        a, b = operands
        out = g.bias_add(a, b) if len(b.shape) == 1 and len(a.shape) > 1 else g.add(a, b)
    elif op == "Relu":
        out = g.relu(operands[0])
    elif op == "Gelu":
        if attrs.get("approximate", b"none") not in (b"none", "none"):
            refuse("the tanh approximation of Gelu")
        out = g.gelu(operands[0])
    elif op == "Softmax":
        if attrs.get("axis", -1) not in (-1, len(operands[0].shape) - 1):
            refuse(f"axis {attrs.get('axis')} (only the last)")
        out = g.softmax(operands[0])
    elif op == "LayerNormalization":
        if attrs.get("axis", -1) not in (-1, len(operands[0].shape) - 1) or len(operands) != 3:
            refuse("an axis other than the last, or a missing scale or bias")
        out = g.layernorm(*operands, eps=float(attrs.get("epsilon", 1e-5)))
    elif op == "Conv":
        if attrs.get("group", 1) != 1:
            refuse(f"group {attrs['group']} (only group 1)")
        if attrs.get("auto_pad", b"NOTSET") not in (b"NOTSET", "NOTSET"):
            refuse(f"auto_pad {attrs['auto_pad']!r} (give explicit pads)")
        if len(operands[0].shape) != 4:
            refuse(f"a {len(operands[0].shape) - 2}-d convolution (only 2-d)")
        pads = [int(p) for p in attrs.get("pads", [0, 0, 0, 0])]  # ONNX: [top, left, bottom, right]
        bias = operands[2] if len(operands) > 2 else None
        out = g.conv2d(operands[0], operands[1], bias, stride=[int(v) for v in attrs.get("strides", [1, 1])],
                       padding=pads, dilation=[int(v) for v in attrs.get("dilations", [1, 1])])
    elif op == "BatchNormalization":
        if attrs.get("training_mode", 0) or len(operands) != 5:
            refuse("training mode, or other than the five inputs of inference")
        out = g.batch_norm(*operands, eps=float(attrs.get("epsilon", 1e-5)))
    else:
        raise GraphError(f"{where}: the op type {op!r} is not supported (supported: Gemm, MatMul, Add, Relu, "
                         f"Gelu, Softmax, LayerNormalization, Conv, BatchNormalization)")
    if len(node.output) != 1:
        refuse(f"{len(node.output)} outputs")
    values[node.output[0]] = out


def _bias(g: Graph, x: Value, bias: Value | None) -> Value:
    return x if bias is None else g.bias_add(x, bias)
