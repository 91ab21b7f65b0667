"""Workloads as canonical JSON (te.serialize): round trips, stable bytes and hashes, refusals."""
from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass

import numpy as np
import pytest

import te
from te.serialize import SerializeError, workload_from_json, workload_to_json

# Small parameters for every library workload, and variants that reach more node kinds and
# attributes (casts of int8 inputs, selects of padding, -inf identities of max pooling, calls).
SMALL = {
    "attention": dict(heads=2, seq=5, dim=3, causal=True),
    "batch_matmul": dict(B=2, M=3, N=4, K=5),
    "conv2d": dict(N=1, C=2, H=6, W=6, K=3, R=3, S=3, padding=1),
    "conv2d_bn_relu": dict(N=1, C=2, H=6, W=6, K=3, R=3, S=3, padding=1),
    "conv2d_winograd": dict(N=1, C=2, H=6, W=5, K=3, padding=1, tile=2),
    "dense": dict(M=3, N=4, K=5, bias=True, relu=True),
    "depthwise_conv2d": dict(N=1, C=2, H=6, W=6, R=3, S=3, padding=1),
    "elementwise": dict(op="sigmoid", shape=[4, 3]),
    "elementwise_chain": dict(shape=[5]),
    "layernorm": dict(M=3, N=7),
    "matmul": dict(M=4, N=3, K=5),
    "mlp": dict(M=3, D=4, H=6),
    "pool2d": dict(N=1, C=2, H=6, W=6, kernel=2, padding=1),
    "qkv": dict(M=3, D=4, N=5),
    "softmax": dict(shape=[3, 5]),
}
VARIANTS = [
    ("matmul", dict(M=4, N=3, K=5, dtype="int8", transpose_b=True)),
    ("conv2d", dict(N=1, C=2, H=6, W=6, K=3, R=3, S=3, stride=2, padding=1, layout="NHWC")),
    ("pool2d", dict(N=1, C=2, H=6, W=6, kernel=[2, 3], pool_type="avg")),
    ("elementwise", dict(op="relu", shape=[4, 4], dtype="int32")),
    ("softmax", dict(shape=[3, 5], axis=0, dtype="float64")),
]
CASES = sorted(SMALL.items()) + VARIANTS


def test_every_library_workload_has_a_small_case():
    assert set(SMALL) == set(te.library_workloads())


def _outputs(wl, seed=3):
    inputs = wl.random_inputs(seed)
    return wl.reference(*inputs)


@pytest.mark.parametrize("name,params", CASES, ids=[f"{n}-{i}" for i, (n, _) in enumerate(CASES)])
def test_a_library_workload_round_trips_to_the_same_bytes_and_outputs(name, params):
    wl = te.create_workload(name, **params)
    text = workload_to_json(wl)
    back = workload_from_json(text)
    assert workload_to_json(back) == text
    assert (back.name, back.key, back.num_inputs, back.registered) == (wl.name, wl.key, wl.num_inputs, True)
    assert [(t.name, t.shape, t.dtype) for t in back.args] == [(t.name, t.shape, t.dtype) for t in wl.args]
    assert all(a is not b for a, b in zip(back.args, wl.args))  # rebuilt, not shared
    assert back.flops == wl.flops
    for got, want in zip(_outputs(back), _outputs(wl)):
        np.testing.assert_array_equal(got, want)


def test_the_json_is_canonical_and_strict():
    wl = te.create_workload("pool2d", **SMALL["pool2d"])  # max pooling: a -inf identity
    text = workload_to_json(wl)
    data = json.loads(text, parse_constant=lambda c: pytest.fail(f"non-strict JSON constant {c}"))
    assert text == json.dumps(data, sort_keys=True, separators=(",", ":"))
    assert any(n.get("identity") == "-inf" for n in data["nodes"])
    assert [op["kind"] for op in data["ops"]][: wl.num_inputs] == ["placeholder"] * wl.num_inputs


def test_compute_tags_attrs_conditions_and_every_node_kind_round_trip():
    A = te.placeholder((4, 6), dtype="float32", name="A")
    M = te.placeholder((4,), dtype="int32", name="M")
    k = te.reduce_axis((1, 6), name="k")
    S = te.compute((4,), lambda i: te.sum(A[i, k] * 2.0, axis=k, where=~te.equal(k, 3) & (k < 5)),
                   name="S", tag="masked_sum", attrs={"note": "x", "sizes": [1, 2]})
    B = te.compute((4,), lambda i: te.if_then_else(te.any_of(M[i] > 0, i == 1),
                                                   te.exp(S[i]) - te.cast("float32", M[i] // 2),
                                                   te.sqrt(te.abs(S[i]))),
                   name="B")
    wl = te.Workload.from_tensors([A, M, B], "every_kind")
    text = workload_to_json(wl)
    kinds = {n["k"] for n in json.loads(text)["nodes"]}
    assert kinds == {"itervar", "const", "binary", "compare", "logical", "not", "select", "cast", "call",
                     "read", "reduce"}
    back = workload_from_json(text)
    s_op = back.outputs[0].op.input_tensors[-1].op
    assert (s_op.tag, s_op.attrs) == ("masked_sum", {"note": "x", "sizes": [1, 2]})
    assert s_op.reduce_axis[0].dom == (1, 5) and s_op.body.condition is not None
    assert workload_to_json(back) == text and back.key == wl.key and not back.registered
    for got, want in zip(_outputs(back), _outputs(wl)):
        np.testing.assert_array_equal(got, want)


def _gemv(N=8, K=4, dtype="float32", scale=1.0):
    A = te.placeholder((N, K), dtype=dtype, name="A")
    x = te.placeholder((K,), dtype=dtype, name="x")
    k = te.reduce_axis((0, K), name="k")
    y = te.compute((N,), lambda i: te.sum(A[i, k] * x[k] * scale, axis=k), name="y")
    return [A, x, y]


def test_two_builds_of_one_dag_give_one_hash_and_key():
    one, two = te.Workload.from_tensors(_gemv(), "gemv"), te.Workload.from_tensors(_gemv(), "gemv")
    assert workload_to_json(one) == workload_to_json(two)
    assert one.dag_hash == two.dag_hash and len(one.dag_hash) == 16
    assert one.key == two.key == 'gemv{"dag":"%s"}' % one.dag_hash


def test_the_hash_is_the_same_in_another_process():
    code = ("import te, sys; sys.path.insert(0, 'tests/te'); from test_serialize import _gemv; "
            "print(te.Workload.from_tensors(_gemv(), 'gemv').dag_hash)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == te.Workload.from_tensors(_gemv(), "gemv").dag_hash


@pytest.mark.parametrize("change", [dict(N=9), dict(dtype="float64"), dict(scale=2.0)],
                         ids=["shape", "dtype", "expression"])
def test_a_changed_shape_dtype_or_expression_changes_the_hash(change):
    base = te.Workload.from_tensors(_gemv(), "gemv")
    changed = te.Workload.from_tensors(_gemv(**change), "gemv")
    assert changed.dag_hash != base.dag_hash and changed.key != base.key


def test_the_name_is_part_of_the_hash():
    assert te.Workload.from_tensors(_gemv(), "a").dag_hash != te.Workload.from_tensors(_gemv(), "b").dag_hash


@dataclass(frozen=True, eq=False)
class Twice(te.Expr):
    """An expression node kind te.serialize does not know."""

    a: te.Expr
    dtype: str = "float32"
    _child_fields = ("a",)


def test_an_unknown_node_kind_is_refused_by_name():
    A = te.placeholder((4,), name="A")
    B = te.compute((4,), lambda i: Twice(A[i]) + 1.0, name="B")
    with pytest.raises(SerializeError, match="Twice"):
        workload_to_json(te.Workload.from_tensors([A, B], "twice"))


def test_an_unknown_node_kind_in_json_is_refused_by_name():
    data = json.loads(workload_to_json(te.Workload.from_tensors(_gemv(), "gemv")))
    data["nodes"][-1]["k"] = "warp_shuffle"
    with pytest.raises(SerializeError, match="warp_shuffle"):
        workload_from_json(json.dumps(data))


@pytest.mark.parametrize("text,match", [("{", "does not parse"), ('{"format": 99}', "format"),
                                        ('{"format": 1, "ops": []}', "malformed")])
def test_broken_json_is_refused_clearly(text, match):
    with pytest.raises(SerializeError, match=match):
        workload_from_json(text)


def test_from_tensors_refuses_what_is_not_a_workload():
    A, x, y = _gemv()
    with pytest.raises(te.WorkloadError, match="placeholders first"):
        te.Workload.from_tensors([y, A, x], "bad")
    with pytest.raises(te.WorkloadError, match="list of tensors"):
        te.Workload.from_tensors([], "empty")
    with pytest.raises(te.WorkloadError, match=r"placeholder\(s\) x"):
        te.Workload.from_tensors([A, y], "missing")


def test_a_deep_expression_serializes_without_recursion():
    A = te.placeholder((3,), name="A")

    def body(i):
        e = A[i]
        for n in range(3000):
            e = e + float(n % 7)
        return e

    wl = te.Workload.from_tensors([A, te.compute((3,), body, name="B")], "deep")
    back = workload_from_json(workload_to_json(wl))
    assert workload_to_json(back) == workload_to_json(wl)
