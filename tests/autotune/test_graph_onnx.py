"""ONNX models as graphs (``autotune.graph.from_onnx``) and ``autotune model``: models made
here with onnx's helper API, loaded, checked against NumPy written from the ONNX spec."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from autotune.graph import GraphError, from_onnx, partition  # noqa: E402

REPO = Path(__file__).resolve().parents[2]


def _model(nodes, inputs, outputs, initializers, opset: int = 20):
    graph = helper.make_graph(nodes, "net", inputs, outputs,
                              [numpy_helper.from_array(a, name) for name, a in initializers.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def mlp_model(batch=8, d=32, hidden=64, layers=4, seed=0):
    """Gemm (transB) + Relu layers, alternating d -> hidden -> d, as a PyTorch export has them."""
    rng = np.random.default_rng(seed)
    nodes, inits, prev = [], {}, "x"
    for n in range(layers):
        n_in, n_out = (d, hidden) if n % 2 == 0 else (hidden, d)
        inits[f"fc{n}.weight"] = rng.uniform(-0.2, 0.2, (n_out, n_in)).astype(np.float32)
        inits[f"fc{n}.bias"] = rng.uniform(-0.2, 0.2, (n_out,)).astype(np.float32)
        out = "y" if n == layers - 1 else f"h{n}"
        nodes.append(helper.make_node("Gemm", [prev, f"fc{n}.weight", f"fc{n}.bias"], [f"g{n}" if out != "y" else "y"],
                                      transB=1))
        if out != "y":
            nodes.append(helper.make_node("Relu", [f"g{n}"], [out]))
        prev = out
    model = _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, d])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, d])], inits)
    return model, inits


def block_model(seq=16, d=32, seed=0):
    """MatMul + Add(bias) + LayerNormalization, residual Add, Gelu and Softmax."""
    rng = np.random.default_rng(seed)
    inits = {"w": rng.uniform(-0.2, 0.2, (d, d)).astype(np.float32),
             "b": rng.uniform(-0.2, 0.2, (d,)).astype(np.float32),
             "gamma": rng.uniform(0.5, 1.5, (d,)).astype(np.float32),
             "beta": rng.uniform(-0.1, 0.1, (d,)).astype(np.float32)}
    nodes = [helper.make_node("MatMul", ["x", "w"], ["m"]),
             helper.make_node("Add", ["m", "b"], ["mb"]),
             helper.make_node("Gelu", ["mb"], ["g"]),
             helper.make_node("Add", ["g", "x"], ["r"]),
             helper.make_node("LayerNormalization", ["r", "gamma", "beta"], ["n"], epsilon=1e-5, axis=-1),
             helper.make_node("Softmax", ["n"], ["p"], axis=-1)]
    model = _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [seq, d])],
                   [helper.make_tensor_value_info("p", TensorProto.FLOAT, [seq, d])], inits)
    return model, inits


def test_an_mlp_loads_as_dense_layers_that_dedupe():
    model, inits = mlp_model()
    g = from_onnx(model)
    groups, tasks = partition(g)
    assert [grp.kinds for grp in groups] == ["dense_relu", "dense_relu", "dense_relu", "dense"]
    assert sorted(t.weight for t in tasks) == [1, 1, 2]
    x = np.random.default_rng(1).uniform(-1, 1, (8, 32)).astype(np.float32)
    h = x.astype(np.float64)
    for n in range(4):  # ONNX Gemm with transB: x @ W.T + b
        h = h @ inits[f"fc{n}.weight"].T + inits[f"fc{n}.bias"]
        h = np.maximum(h, 0) if n < 3 else h
    np.testing.assert_allclose(g.run_numpy(x=x)["y"], h, rtol=1e-5, atol=1e-6)


def test_a_block_with_matmul_layernorm_gelu_and_softmax_loads():
    from scipy.special import erf

    model, inits = block_model()
    g = from_onnx(model)
    x = np.random.default_rng(2).uniform(-1, 1, (16, 32)).astype(np.float32)
    m = x.astype(np.float64) @ inits["w"] + inits["b"]
    r = 0.5 * m * (1 + erf(m / np.sqrt(2))) + x
    n = (r - r.mean(-1, keepdims=True)) / np.sqrt(r.var(-1, keepdims=True) + 1e-5) * inits["gamma"] + inits["beta"]
    p = np.exp(n - n.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    np.testing.assert_allclose(g.run_numpy(x=x)["p"], p, rtol=1e-4, atol=1e-6)


def test_an_unsupported_node_is_named():
    model = _model([helper.make_node("LRN", ["x"], ["y"], name="norm1", size=3)],
                   [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3, 8, 8])], {})
    with pytest.raises(GraphError, match=r"node 'norm1' \(LRN\): the op type 'LRN' is not supported"):
        from_onnx(model)
    grouped = _model([helper.make_node("Conv", ["x", "w"], ["y"], name="dw", group=3)],
                     [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
                     [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3, 6, 6])],
                     {"w": np.zeros((3, 1, 3, 3), np.float32)})
    with pytest.raises(GraphError, match=r"node 'dw' \(Conv\): group 3 \(only group 1\) is not supported"):
        from_onnx(grouped)


def resnet_model(channels=8, size=10, seed=0):
    """A ResNet basic block as a PyTorch export has it: Conv (with bias) -> BatchNormalization
    -> Relu -> Conv -> BatchNormalization -> Add(residual) -> Relu, NCHW; the second conv's
    pads asymmetric ([top, left, bottom, right] = [1, 0, 1, 1] around a 3x2 window)."""
    rng = np.random.default_rng(seed)
    c = channels
    inits = {"w1": rng.uniform(-0.3, 0.3, (c, c, 3, 3)).astype(np.float32),
             "b1": rng.uniform(-0.1, 0.1, (c,)).astype(np.float32),
             "w2": rng.uniform(-0.3, 0.3, (c, c, 3, 2)).astype(np.float32)}
    for n in (1, 2):
        inits.update({f"bn{n}.gamma": rng.uniform(0.5, 1.5, (c,)).astype(np.float32),
                      f"bn{n}.beta": rng.uniform(-0.1, 0.1, (c,)).astype(np.float32),
                      f"bn{n}.mean": rng.uniform(-0.1, 0.1, (c,)).astype(np.float32),
                      f"bn{n}.var": rng.uniform(0.5, 1.5, (c,)).astype(np.float32)})
    bn = lambda n, i, o: helper.make_node("BatchNormalization", [i, f"bn{n}.gamma", f"bn{n}.beta", f"bn{n}.mean",  # noqa: E731
                                                                 f"bn{n}.var"], [o], epsilon=1e-5)
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1], kernel_shape=[3, 3]),
             bn(1, "c1", "n1"), helper.make_node("Relu", ["n1"], ["r1"]),
             helper.make_node("Conv", ["r1", "w2"], ["c2"], pads=[1, 0, 1, 1], kernel_shape=[3, 2]),
             bn(2, "c2", "n2"), helper.make_node("Add", ["n2", "x"], ["s"]), helper.make_node("Relu", ["s"], ["y"])]
    model = _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, c, size, size])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, c, size, size])], inits)
    return model, inits


def _numpy_resnet(x, inits, eps=1e-5):
    """The block from the ONNX operator definitions, independently of the graph's ops."""
    def conv(x, w, pads, b=None):
        top, left, bottom, right = pads
        xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (top, bottom), (left, right)))
        K, C, R, S = w.shape
        OH, OW = xp.shape[2] - R + 1, xp.shape[3] - S + 1
        out = np.zeros((x.shape[0], K, OH, OW))
        for r in range(R):
            for s in range(S):
                out += np.einsum("nchw,kc->nkhw", xp[:, :, r:r + OH, s:s + OW], w[:, :, r, s])
        return out if b is None else out + b.reshape(1, -1, 1, 1)

    def bn(x, n):
        p = {k: inits[f"bn{n}.{k}"].reshape(1, -1, 1, 1) for k in ("gamma", "beta", "mean", "var")}
        return (x - p["mean"]) / np.sqrt(p["var"] + eps) * p["gamma"] + p["beta"]

    h = np.maximum(bn(conv(x, inits["w1"], (1, 1, 1, 1), inits["b1"]), 1), 0)
    return np.maximum(bn(conv(h, inits["w2"], (1, 0, 1, 1)), 2) + x, 0)


def test_a_resnet_block_loads_with_folded_batch_norm_and_asymmetric_pads():
    model, inits = resnet_model()
    g = from_onnx(model)
    groups, tasks = partition(g)
    assert [grp.kinds for grp in groups] == ["conv2d_channel_bias_channel_affine_relu",
                                             "conv2d_channel_affine_add_relu"]
    x = np.random.default_rng(1).uniform(-1, 1, (1, 8, 10, 10)).astype(np.float32)
    np.testing.assert_allclose(g.run_numpy(x=x)["y"], _numpy_resnet(x, inits), rtol=1e-5, atol=1e-5)


def _autotune_model(tmp_path, model, *options: str) -> subprocess.CompletedProcess:
    """``autotune model`` on ``model`` (a ModelProto, saved first, or a file), in a clean environment."""
    path = model if isinstance(model, Path) else tmp_path / "model.onnx"
    if not isinstance(model, Path):
        onnx.save(model, str(path))
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "PYTHONPATH": str(REPO),
           "AUTOTUNE_CACHE_DIR": str(tmp_path / "cache")}
    return subprocess.run([sys.executable, "-m", "autotune.cli", "model", str(path), *options,
                           "--db", str(tmp_path / "net.db")],
                          env=env, cwd=tmp_path, capture_output=True, text=True, timeout=600)


def test_autotune_model_tunes_builds_and_checks(tmp_path):
    model, _ = mlp_model()
    proc = _autotune_model(tmp_path, model, "--trials", "24", "--tuner", "random", "--batch-size", "8")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "3 tasks, 24 trials" in proc.stdout
    assert "check: the built network matches NumPy" in proc.stdout
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"not a model")
    proc = _autotune_model(tmp_path, bad)
    assert proc.returncode == 1 and "cannot read the ONNX model" in proc.stderr


def test_autotune_model_tunes_a_resnet_block_from_onnx(tmp_path):
    model, _ = resnet_model(channels=8, size=8)
    proc = _autotune_model(tmp_path, model, "--trials", "16", "--batch-size", "8")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "2 tasks, 16 trials" in proc.stdout
    assert "check: the built network matches NumPy" in proc.stdout


def transformer_model(seq=16, d=32, heads=4, hidden=64, causal=True, seed=0):
    """A pre-norm encoder block as opset 23 writes it: LayerNormalization, the q, k and v
    projections (MatMul + Add), each reshaped to a batch of one for Attention, its result
    reshaped back, the output projection with the residual, then LayerNormalization, Gemm,
    Gelu, Gemm and the second residual."""
    rng = np.random.default_rng(seed)

    def uniform(*shape, lo=-0.2, hi=0.2):
        return rng.uniform(lo, hi, shape).astype(np.float32)

    inits = {"ln1.g": uniform(d, lo=0.5, hi=1.5), "ln1.b": uniform(d), "ln2.g": uniform(d, lo=0.5, hi=1.5),
             "ln2.b": uniform(d), "fc1.w": uniform(hidden, d), "fc1.b": uniform(hidden), "fc2.w": uniform(d, hidden),
             "fc2.b": uniform(d), "batch1": np.array([1, seq, d], np.int64), "flat": np.array([seq, d], np.int64)}
    nodes = [helper.make_node("LayerNormalization", ["x", "ln1.g", "ln1.b"], ["n1"], epsilon=1e-5)]
    for p in "qkvo":
        inits[f"{p}.w"], inits[f"{p}.b"] = uniform(d, d), uniform(d)
    for p in "qkv":
        nodes += [helper.make_node("MatMul", ["n1", f"{p}.w"], [f"{p}m"]),
                  helper.make_node("Add", [f"{p}m", f"{p}.b"], [p]),
                  helper.make_node("Reshape", [p, "batch1"], [f"{p}3"])]
    nodes += [helper.make_node("Attention", ["q3", "k3", "v3"], ["a3"], q_num_heads=heads, kv_num_heads=heads,
                               is_causal=int(causal)),
              helper.make_node("Reshape", ["a3", "flat"], ["a"]),
              helper.make_node("MatMul", ["a", "o.w"], ["om"]),
              helper.make_node("Add", ["om", "o.b"], ["ob"]),
              helper.make_node("Add", ["ob", "x"], ["h"]),
              helper.make_node("LayerNormalization", ["h", "ln2.g", "ln2.b"], ["n2"], epsilon=1e-5),
              helper.make_node("Gemm", ["n2", "fc1.w", "fc1.b"], ["f1"], transB=1),
              helper.make_node("Gelu", ["f1"], ["g"]),
              helper.make_node("Gemm", ["g", "fc2.w", "fc2.b"], ["f2"], transB=1),
              helper.make_node("Add", ["f2", "h"], ["y"])]
    model = _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [seq, d])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, [seq, d])], inits, opset=23)
    return model, inits


def test_a_transformer_block_loads_with_attention_and_matches_onnx_reference():
    from onnx.reference import ReferenceEvaluator

    model, _ = transformer_model()
    g = from_onnx(model)
    groups, tasks = partition(g)
    assert [grp.kinds for grp in groups] == ["layernorm", "matmul_bias_add_x3", "attention", "matmul_bias_add_add",
                                            "layernorm", "dense_gelu", "dense_add"]
    x = np.random.default_rng(3).uniform(-1, 1, (16, 32)).astype(np.float32)
    (want,) = ReferenceEvaluator(model).run(None, {"x": x})
    np.testing.assert_allclose(g.run_numpy(x=x)["y"], want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("change,message", [
    (dict(kv_num_heads=2), "2 key/value heads for 4 query heads"),
    (dict(scale=0.5), "scale 0.5 .only the default"),
    (dict(softcap=1.0), "softcap 1.0"),
    ("mask", "a mask, a key/value cache"),
    ("reshape", r"reshaping \(16, 32\) to \(4, 4, 32\) .only adding or dropping leading 1s."),
    ("output", r"graph output 'a3' is reshaped to \(1, 16, 32\)"),
])
def test_attention_and_reshape_beyond_what_is_read_are_refused(change, message):
    model, _ = transformer_model()
    graph = model.graph
    attention = next(n for n in graph.node if n.op_type == "Attention")
    if isinstance(change, dict):
        attention.attribute.extend(helper.make_attribute(k, v) for k, v in change.items() if k != "kv_num_heads")
        if "kv_num_heads" in change:
            next(a for a in attention.attribute if a.name == "kv_num_heads").i = change["kv_num_heads"]
    elif change == "mask":
        attention.input.append("x")
    elif change == "reshape":
        next(t for t in graph.initializer if t.name == "batch1").CopyFrom(
            numpy_helper.from_array(np.array([4, 4, 32], np.int64), "batch1"))
    else:
        graph.output.append(helper.make_tensor_value_info("a3", TensorProto.FLOAT, [1, 16, 32]))
    with pytest.raises(GraphError, match=message):
        from_onnx(model)


def test_autotune_model_tunes_a_transformer_block_from_onnx(tmp_path):
    model, _ = transformer_model(seq=8, d=16, heads=2, hidden=32)
    proc = _autotune_model(tmp_path, model, "--trials", "24", "--tuner", "random", "--batch-size", "4")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "6 tasks, 24 trials" in proc.stdout
    assert "check: the built network matches NumPy" in proc.stdout


def pooled_model(channels=4, size=9, seed=0):
    """A stem as image models start: Conv, Relu, MaxPool 3x3 stride 2 pad 1, Conv,
    AveragePool 2x2 (stride 1, padding counted), GlobalAveragePool."""
    rng = np.random.default_rng(seed)
    inits = {"w1": rng.uniform(-0.3, 0.3, (channels, 3, 3, 3)).astype(np.float32),
             "w2": rng.uniform(-0.3, 0.3, (channels, channels, 3, 3)).astype(np.float32)}
    nodes = [helper.make_node("Conv", ["x", "w1"], ["c1"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c1"], ["r1"]),
             helper.make_node("MaxPool", ["r1"], ["p1"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
             helper.make_node("Conv", ["p1", "w2"], ["c2"], pads=[1, 1, 1, 1]),
             helper.make_node("AveragePool", ["c2"], ["p2"], kernel_shape=[2, 2], pads=[1, 1, 1, 1],
                              count_include_pad=1),
             helper.make_node("GlobalAveragePool", ["p2"], ["y"])]
    model = _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, size, size])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, channels, 1, 1])], inits)
    return model, inits


def test_pooling_loads_and_matches_onnx_reference_and_tunes(tmp_path):
    from onnx.reference import ReferenceEvaluator

    import tuning_db
    from autotune.graph import build_graph, tune_graph

    model, _ = pooled_model()
    g = from_onnx(model)
    groups, _ = partition(g)
    assert [grp.kinds for grp in groups] == ["conv2d_relu", "pool2d", "conv2d", "pool2d", "pool2d"]
    x = np.random.default_rng(4).uniform(-1, 1, (1, 3, 9, 9)).astype(np.float32)
    (want,) = ReferenceEvaluator(model).run(None, {"x": x})
    np.testing.assert_allclose(g.run_numpy(x=x)["y"], want, rtol=1e-5, atol=1e-6)
    with tuning_db.Database(tmp_path / "pool.db") as db:
        tune_graph(g, trials=10, db=db, tuner="random", batch=2)
        net = build_graph(g, db=db)
    np.testing.assert_allclose(net(x=x)["y"], want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("attrs,message", [
    (dict(ceil_mode=1), "ceil_mode or dilations"),
    (dict(pads=[1, 1, 0, 0]), r"pads \[1, 1, 0, 0\] .only the same on both sides."),
    (dict(count_include_pad=0), "leaves the padding out of its count"),
])
def test_pooling_beyond_what_is_read_is_refused(attrs, message):
    model, _ = pooled_model()
    node = next(n for n in model.graph.node if n.op_type == "AveragePool")
    for name, value in attrs.items():
        old = [a for a in node.attribute if a.name == name]
        for a in old:
            node.attribute.remove(a)
        node.attribute.append(helper.make_attribute(name, value))
    with pytest.raises(GraphError, match=message):
        from_onnx(model)
