"""The workload registry: create_workload, keys (stable across processes), user workloads."""
import json
import os
import subprocess
import sys
import uuid

import numpy as np
import pytest

import te
from te import workload as te_workload

LIBRARY = ["batch_matmul", "conv2d", "dense", "depthwise_conv2d", "elementwise", "elementwise_chain",
           "matmul", "pool2d", "softmax"]

# (name, params) used by the key tests; params are JSON so a subprocess can rebuild them.
KEY_CASES = [
    ("matmul", dict(M=64, N=32, K=16)),
    ("matmul", dict(M=8, N=8, K=8, dtype="int8", transpose_b=True)),
    ("batch_matmul", dict(B=2, M=3, N=4, K=5, dtype="float16")),
    ("dense", dict(M=4, N=5, K=6, bias=False)),
    ("conv2d", dict(N=1, C=3, H=8, W=8, K=4, R=3, S=3, stride=[2, 1], padding=1, layout="NHWC")),
    ("depthwise_conv2d", dict(N=1, C=3, H=8, W=8, R=3, S=3, multiplier=2)),
    ("softmax", dict(shape=[3, 5], axis=0)),
    ("pool2d", dict(N=1, C=2, H=6, W=6, kernel=[2, 3], pool_type="avg")),
    ("elementwise", dict(op="relu", shape=[4, 4])),
    ("elementwise_chain", dict(shape=[7])),
]


def test_library_workloads_are_registered():
    assert set(LIBRARY) <= set(te.list_workloads())


def test_create_workload_args_flops_key():
    wl = te.create_workload("matmul", M=6, N=5, K=4)
    assert [t.name for t in wl.args] == ["A", "B", "C"]
    assert wl.inputs == wl.args[:2] and wl.outputs == wl.args[2:]
    assert all(isinstance(t.op, te.PlaceholderOp) for t in wl.inputs)
    assert isinstance(wl.outputs[0].op, te.ComputeOp)
    assert wl.flops == 2 * 6 * 5 * 4
    assert wl.key == 'matmul{"K":4,"M":6,"N":5,"dtype":"float32","out_dtype":null,"transpose_a":false,"transpose_b":false}'
    assert wl.params == dict(M=6, N=5, K=4, dtype="float32", transpose_a=False, transpose_b=False, out_dtype=None)


@pytest.mark.parametrize("name,params", KEY_CASES)
def test_every_library_workload_builds_and_has_positive_flops(name, params):
    wl = te.create_workload(name, **params)
    assert wl.key.startswith(name + "{") and json.loads(wl.key[len(name):]) == wl.params
    assert wl.flops > 0
    ins = wl.random_inputs(0)
    assert [a.shape for a in ins] == [t.shape for t in wl.inputs]
    assert [a.dtype for a in ins] == [np.dtype(t.dtype) for t in wl.inputs]
    assert all(np.array_equal(a, b) for a, b in zip(ins, wl.random_inputs(0)))


def test_key_equal_for_explicit_and_omitted_defaults():
    implicit = te.create_workload("conv2d", N=1, C=3, H=8, W=8, K=4, R=3, S=3)
    explicit = te.create_workload("conv2d", N=1, C=3, H=8, W=8, K=4, R=3, S=3, stride=1, padding=0,
                                  dilation=1, layout="NCHW", dtype="float32", out_dtype=None)
    assert implicit.key == explicit.key
    assert te.create_workload("softmax", shape=[2, 3]).key == te.create_workload("softmax", shape=(2, 3), axis=-1).key
    assert te.create_workload("matmul", M=2, N=2, K=2).key != te.create_workload("matmul", M=2, N=2, K=3).key


def test_keys_are_stable_across_processes():
    script = (
        "import json, sys, te\n"
        "cases = json.loads(sys.argv[1])\n"
        "print(json.dumps([te.create_workload(n, **p).key for n, p in cases]))\n"
    )
    expected = [te.create_workload(n, **p).key for n, p in KEY_CASES]
    for seed in ("0", "12345"):  # different hash seeds: nothing may depend on set/dict hashing
        run = subprocess.run([sys.executable, "-c", script, json.dumps(KEY_CASES)], capture_output=True, text=True,
                             timeout=60, env={**os.environ, "PYTHONHASHSEED": seed}, check=True)
        assert json.loads(run.stdout) == expected


@pytest.fixture
def user_workload_name():
    name = f"test_user_gemv_{uuid.uuid4().hex[:8]}"
    yield name
    te_workload._REGISTRY.pop(name, None)


def test_user_registered_workload(user_workload_name):
    @te.register_workload(user_workload_name)
    def gemv(N, K, dtype="float32"):
        A = te.placeholder((N, K), dtype, "A")
        x = te.placeholder((K,), dtype, "x")
        k = te.reduce_axis((0, K), "k")
        y = te.compute((N,), lambda i: te.sum(A[i, k] * x[k], axis=k), name="y")
        return [A, x, y]

    assert user_workload_name in te.list_workloads()
    wl = te.create_workload(user_workload_name, N=7, K=3)
    a, x = wl.random_inputs(1)
    (y,) = wl.reference(a, x)
    np.testing.assert_allclose(y, a.astype(np.float64) @ x, rtol=1e-6)
    assert wl.flops == 2 * 7 * 3
    assert wl.key == user_workload_name + '{"K":3,"N":7,"dtype":"float32"}'


def test_duplicate_registration_raises(user_workload_name):
    with pytest.raises(te.WorkloadError, match="'matmul' is already registered"):
        te.register_workload("matmul")(lambda M: [])

    @te.register_workload(user_workload_name)
    def first(N):
        A = te.placeholder((N,), name="A")
        return [A, te.compute((N,), lambda i: A[i] + 1.0, name="B")]

    with pytest.raises(te.WorkloadError, match="already registered"):
        te.register_workload(user_workload_name)(lambda N: [])
    te.register_workload(user_workload_name, override=True)(first)  # explicit override is allowed


def test_workload_must_return_inputs_then_outputs(user_workload_name):
    @te.register_workload(user_workload_name)
    def bad(N):
        A = te.placeholder((N,), name="A")
        B = te.compute((N,), lambda i: A[i] + 1.0, name="B")
        return [B, A]

    with pytest.raises(te.WorkloadError, match="placeholders first"):
        te.create_workload(user_workload_name, N=3)


def test_flop_counting_rules():
    A = te.placeholder((4, 6), name="A")
    # Select / comparisons / index arithmetic are free; every Binary and Call counts once per point.
    sel = te.compute((4, 6), lambda i, j: te.if_then_else(i * 2 + 1 < j, A[i, (j + 1) % 6], 0.0), name="sel")
    assert te.flop_count(sel) == 0
    arith = te.compute((4, 6), lambda i, j: te.exp(A[i, j] * 2.0 + 1.0), name="arith")
    assert te.flop_count(arith) == 3 * 24
    k = te.reduce_axis((0, 6), "k")
    red = te.compute((4,), lambda i: te.max(A[i, k], axis=k), name="red")
    assert te.flop_count(red) == 24
    assert te.flop_count([arith, red]) == 3 * 24 + 24
