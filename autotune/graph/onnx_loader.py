"""ONNX models as graphs: ``from_onnx("net.onnx")`` -> ``Graph`` (needs the ``onnx`` package).

The nodes this reads, and what each becomes:

    Gemm (alpha = beta = 1, transA = 0)   dense (transB = 1: B is (N, K)) or matmul (+ bias_add)
    MatMul                                matmul (2-d operands)
    Add                                   bias_add (a 1-d initializer on the last axis) or add
    Relu, Gelu (erf form), Softmax (last axis), LayerNormalization (last axis)
    Conv (2-d, group 1, explicit pads)    conv2d (+ its bias per channel); asymmetric pads kept
    BatchNormalization (inference)        batch_norm, folded into a per-channel scale and shift
    MaxPool, AveragePool (2-d,            pool2d (average: the padding counted, or none)
      symmetric pads, no ceil_mode)
    GlobalAveragePool                     pool2d over the whole image
    Attention (opset 23: batch 1, 3-d     attention over (seq, heads * dim): as many key/value
      Q, K, V, no mask or cache)          heads as query heads, the default scale, is_causal
    Reshape (a constant shape that only   nothing: the same value (a batch of one is how
      adds or drops leading 1s)           Attention's 3-d operands are written)

Float32 initializers become the graph's parameters (their values kept); int64 ones are
constants, read where a node takes a shape (Reshape). The other graph inputs become its
inputs, the graph outputs its outputs, all float32. Any other node, attribute or dtype
is refused with a ``GraphError`` naming the node, its op type and what is unsupported, so
a model either loads whole or says why not.
"""
from __future__ import annotations

import math
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
        if str(array.dtype) == "float32":
            values[tensor_name] = g.param(_safe(tensor_name), value=array)
        elif str(array.dtype) != "int64":
            raise GraphError(f"initializer {tensor_name!r} is {array.dtype}; only float32 models are read")
    for inp in proto.input:
        if inp.name in values or inp.name in initializers:
            continue
        values[inp.name] = g.input(inp.name, _static_shape(inp), _dtype(inp))
    shapes = {name: v.shape for name, v in values.items()}  # as the model has them (reshapes add 1s)
    for node in proto.node:
        _read_node(g, node, values, initializers, shapes)
    for out in proto.output:
        if out.name not in values:
            raise GraphError(f"graph output {out.name!r} is produced by no node")
        if shapes[out.name] != values[out.name].shape:
            raise GraphError(f"graph output {out.name!r} is reshaped to {shapes[out.name]}; reshape it back to "
                             f"{values[out.name].shape} (a batch of one is read only inside the graph)")
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


def _read_node(g: Graph, node, values: dict, initializers: dict, shapes: dict) -> None:
    where = f"node {node.name or node.output[0]!r} ({node.op_type})"
    attrs = _attrs(node)
    op = node.op_type

    def refuse(what: str):
        raise GraphError(f"{where}: {what} is not supported")

    if op == "Reshape":
        _read_reshape(node, values, initializers, shapes, refuse)
        return
    for i in node.input:
        if i and i not in values and i in initializers:
            raise GraphError(f"{where}: input {i!r} is an {initializers[i].dtype} constant; only float32 is read")
    try:
        operands = [values[i] for i in node.input if i]
    except KeyError as exc:
        raise GraphError(f"{where}: input {exc.args[0]!r} is not produced before it") from None
    if op != "Attention" and any(shapes[i] != values[i].shape for i in node.input if i):
        refuse("an operand reshaped to a batch of one (only Attention reads those)")

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
    elif op == "Attention":
        out = _read_attention(g, node, attrs, operands, shapes, refuse)
    elif op in ("MaxPool", "AveragePool"):
        out = _read_pool(g, op, attrs, operands[0], refuse)
    elif op == "GlobalAveragePool":
        if len(operands[0].shape) != 4:
            refuse(f"a {len(operands[0].shape) - 2}-d input (only 2-d)")
        out = g.pool2d(operands[0], list(operands[0].shape[2:]), pool_type="avg")
    else:
        raise GraphError(f"{where}: the op type {op!r} is not supported (supported: Gemm, MatMul, Add, Relu, "
                         f"Gelu, Softmax, LayerNormalization, Conv, BatchNormalization, Attention, Reshape, MaxPool, "
                         f"AveragePool, GlobalAveragePool)")
    if len([o for o in node.output if o]) != 1 or not node.output[0]:
        refuse(f"outputs {list(node.output)} (only the first)")
    values[node.output[0]] = out
    shapes[node.output[0]] = (1, *out.shape) if op == "Attention" else out.shape


def _read_pool(g: Graph, op: str, attrs: dict, x: Value, refuse) -> Value:
    """MaxPool or AveragePool, 2-d, as ``pool2d`` takes them."""
    kernel = [int(k) for k in attrs.get("kernel_shape", [])]
    if len(kernel) != 2 or len(x.shape) != 4:
        refuse(f"a kernel of {kernel} on an input of shape {x.shape} (only 2-d)")
    top, left, bottom, right = [int(p) for p in attrs.get("pads", [0, 0, 0, 0])]
    if (top, left) != (bottom, right):
        refuse(f"pads {[top, left, bottom, right]} (only the same on both sides)")
    if attrs.get("ceil_mode", 0) or any(int(d) != 1 for d in attrs.get("dilations", [1, 1])):
        refuse("ceil_mode or dilations")
    if attrs.get("auto_pad", b"NOTSET") not in (b"NOTSET", "NOTSET"):
        refuse(f"auto_pad {attrs['auto_pad']!r} (give explicit pads)")
    if op == "AveragePool" and (top or left) and not attrs.get("count_include_pad", 0):
        refuse("average pooling that leaves the padding out of its count (count_include_pad 0 with pads)")
    stride = [int(v) for v in attrs.get("strides", [1, 1])]
    return g.pool2d(x, kernel, stride, [top, left], "max" if op == "MaxPool" else "avg")


def _read_reshape(node, values: dict, initializers: dict, shapes: dict, refuse) -> None:
    """A reshape that only adds or drops leading 1s: its output is its input's value."""
    data, shape = (list(node.input) + ["", ""])[:2]
    if data not in values:
        refuse(f"reshaping {data!r}, which is no float32 value produced before it")
    if shape not in initializers:
        refuse(f"a shape computed at run time ({shape!r}; only a constant)")
    before = shapes[data]
    target = [int(d) for d in initializers[shape]]
    target = [before[n] if d == 0 and n < len(before) else d for n, d in enumerate(target)]  # 0: keep that dim
    if target.count(-1) == 1:  # -1: what the other dims leave of the element count
        known = math.prod(d for d in target if d != -1)
        target[target.index(-1)] = math.prod(before) // known if known else 0
    core = values[data].shape
    after = tuple(target)
    if after[len(after) - len(core):] != core or any(d != 1 for d in after[:len(after) - len(core)]):
        refuse(f"reshaping {before} to {after} (only adding or dropping leading 1s)")
    values[node.output[0]] = values[data]
    shapes[node.output[0]] = after


def _read_attention(g: Graph, node, attrs: dict, operands: list, shapes: dict, refuse) -> Value:
    """ONNX Attention (opset 23) on 3-d Q, K, V of a batch of one: our multi-head attention."""
    if len([i for i in node.input if i]) != 3 or len(node.input) > 3 and any(node.input[3:]):
        refuse("a mask, a key/value cache or padding lengths (only Q, K and V)")
    q_shape = shapes[node.input[0]]
    if any(len(shapes[i]) != 3 or shapes[i][0] != 1 for i in node.input[:3]):
        refuse(f"operands of shape {q_shape} (only 3-d, a batch of one)")
    heads = int(attrs.get("q_num_heads", 0))
    if not heads or int(attrs.get("kv_num_heads", heads)) != heads:
        refuse(f"{attrs.get('kv_num_heads')} key/value heads for {heads or 'unstated'} query heads "
               f"(give q_num_heads and as many kv heads)")
    dim = q_shape[2] // heads
    if "scale" in attrs and abs(float(attrs["scale"]) - dim ** -0.5) > 1e-6 * dim ** -0.5:
        refuse(f"scale {attrs['scale']} (only the default 1/sqrt(head size))")
    for name, default in (("softcap", 0.0), ("qk_matmul_output_mode", 0), ("left_window_size", -1),
                          ("right_window_size", -1)):
        if attrs.get(name, default) != default:
            refuse(f"{name} {attrs[name]}")
    return g.attention(*operands, heads=heads, causal=bool(attrs.get("is_causal", 0)))


def _bias(g: Graph, x: Value, bias: Value | None) -> Value:
    return x if bias is None else g.bias_add(x, bias)
