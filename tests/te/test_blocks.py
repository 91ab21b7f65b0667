"""The multi-stage blocks (layernorm, mlp, qkv, attention, conv2d_bn_relu) against NumPy, their
errors, and that each tunes end to end with every trial verified against its reference.

The NumPy implementations here are written out independently of the te reference
evaluator (which is what the runner checks kernels against), so a wrong DAG cannot
agree with itself.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

import autotune
import te
from autotune.runner import TimingOptions

TOL = {"float32": dict(rtol=2e-5, atol=2e-5), "float64": dict(rtol=1e-11, atol=1e-11)}
FAST = TimingOptions(min_time=0.001, min_repeats=1, max_repeats=3, rounds=1)


def _run(name, seed=0, spread=1.0, **params):
    """(inputs, te reference outputs) of workload ``name`` on random inputs times ``spread``."""
    wl = te.create_workload(name, **params)
    inputs = [x * np.asarray(spread, x.dtype) for x in wl.random_inputs(seed)]
    return wl, inputs, wl.reference(*inputs)


# ---------------------------------------------------------------- independent NumPy versions


def layernorm_np(x, gamma, beta, eps):
    x = x.astype(np.float64)
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * gamma + beta


def gelu_np(x):
    erf = np.vectorize(math.erf)
    return 0.5 * x * (1 + erf(x / math.sqrt(2)))


def mlp_np(x, w1, b1, w2, b2):
    x, w1, b1, w2, b2 = (a.astype(np.float64) for a in (x, w1, b1, w2, b2))
    return gelu_np(x @ w1.T + b1) @ w2.T + b2


def qkv_np(x, wq, wk, wv, bq, bk, bv):
    x = x.astype(np.float64)
    return [x @ w.astype(np.float64).T + b for w, b in ((wq, bq), (wk, bk), (wv, bv))]


def attention_np(q, k, v, causal):
    q, k, v = (a.astype(np.float64) for a in (q, k, v))
    out = np.empty_like(q)
    seq, dim = q.shape[1:]
    for h in range(q.shape[0]):
        logits = q[h] @ k[h].T / math.sqrt(dim)
        if causal:
            logits[np.triu_indices(seq, 1)] = -np.inf
        w = np.exp(logits - logits.max(axis=1, keepdims=True))
        out[h] = (w / w.sum(axis=1, keepdims=True)) @ v[h]
    return out


def conv_bn_relu_nchw_np(data, kernel, scale, shift, stride, padding):
    """Direct loops over output positions of the zero-padded input."""
    data, kernel = data.astype(np.float64), kernel.astype(np.float64)
    xp = np.pad(data, ((0, 0), (0, 0), (padding, padding), (padding, padding)))
    K, _, R, S = kernel.shape
    OH, OW = (xp.shape[2] - R) // stride + 1, (xp.shape[3] - S) // stride + 1
    out = np.empty((data.shape[0], K, OH, OW))
    for y in range(OH):
        for x in range(OW):
            win = xp[:, :, y * stride: y * stride + R, x * stride: x * stride + S]
            out[:, :, y, x] = np.einsum("ncrs,kcrs->nk", win, kernel)
    return np.maximum(out * scale[:, None, None] + shift[:, None, None], 0)


# ---------------------------------------------------------------- values


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("M,N,eps", [(4, 16, 1e-5), (3, 7, 1e-5), (1, 1, 0.5), (5, 33, 1e-3)])
def test_layernorm_matches_numpy(M, N, eps, dtype):
    wl, (x, gamma, beta), (y,) = _run("layernorm", M=M, N=N, eps=eps, dtype=dtype, spread=3.0)
    assert y.dtype == np.dtype(dtype) and y.shape == (M, N)
    np.testing.assert_allclose(y, layernorm_np(x, gamma, beta, eps), **TOL[dtype])


def test_layernorm_normalises_each_row_to_mean_zero_and_variance_one():
    wl = te.create_workload("layernorm", M=3, N=64, dtype="float64")
    x = wl.random_inputs(1)[0] * 10 + 4
    (y,) = wl.reference(x, np.ones(64), np.zeros(64))
    np.testing.assert_allclose(y.mean(axis=1), 0, atol=1e-12)
    np.testing.assert_allclose(y.var(axis=1), 1, rtol=1e-4)  # eps = 1e-5 against variances ~ 33


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("M,D,H", [(4, 8, 16), (3, 5, 7), (1, 1, 1)])
def test_mlp_matches_numpy(M, D, H, dtype):
    wl, inputs, (y,) = _run("mlp", M=M, D=D, H=H, dtype=dtype, spread=2.0)
    assert y.dtype == np.dtype(dtype) and y.shape == (M, D)
    np.testing.assert_allclose(y, mlp_np(*inputs), **TOL[dtype])


@pytest.mark.parametrize("M,D,N", [(5, 7, None), (3, 4, 9)])
def test_qkv_matches_numpy_and_names_its_three_projections(M, D, N):
    wl, inputs, outs = _run("qkv", M=M, D=D, N=N)
    for got, want in zip(outs, qkv_np(*inputs)):
        np.testing.assert_allclose(got, want, **TOL["float32"])
    assert [t.shape for t in wl.outputs] == [(M, N or D)] * 3
    assert [t.op.name for t in wl.outputs] == ["q_proj_epilogue", "k_proj_epilogue", "v_proj_epilogue"]


def test_qkv_refuses_weights_of_another_shape():
    X = te.placeholder((4, 6), "float32", "X")
    W, b = te.placeholder((5, 6), "float32", "W"), te.placeholder((5,), "float32", "b")
    with pytest.raises(te.ShapeError, match=r"qkv: Wv must have shape \(5, 6\)"):
        te.ops.qkv(X, W, W, te.placeholder((5, 7), "float32", "Wv"), b, b, b)
    with pytest.raises(te.ShapeError, match=r"qkv: bk must have shape \(5,\)"):
        te.ops.qkv(X, W, W, W, b, te.placeholder((6,), "float32", "bk"), b)


def test_mlp_gelu_is_the_exact_erf_form_not_the_tanh_approximation():
    """The two differ by up to ~1e-3 around |x| ~ 2; the erf form is what the docstring says."""
    x = np.linspace(-4, 4, 81)
    X = te.placeholder((81,), "float64", "x")
    G = te.compute((81,), lambda i: te.ops.gelu(X[i]), name="g")
    got = te.evaluate(G, [x])
    tanh_form = 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))
    np.testing.assert_allclose(got, gelu_np(x), rtol=1e-12, atol=1e-15)
    assert np.max(np.abs(got - tanh_form)) > 1e-4


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("heads,seq,dim", [(2, 8, 4), (3, 5, 3), (1, 1, 1), (1, 7, 16)])
def test_attention_matches_numpy(heads, seq, dim, causal, dtype):
    # large inputs: logits of tens, so only the max-subtracted softmax stays accurate
    wl, (q, k, v), (o,) = _run("attention", heads=heads, seq=seq, dim=dim, causal=causal, dtype=dtype, spread=8.0)
    assert o.dtype == np.dtype(dtype) and o.shape == (heads, seq, dim)
    np.testing.assert_allclose(o, attention_np(q, k, v, causal), **TOL[dtype])


def test_causal_attention_first_query_sees_only_the_first_key():
    wl, (q, k, v), (o,) = _run("attention", heads=2, seq=6, dim=3, causal=True)
    np.testing.assert_allclose(o[:, 0, :], v[:, 0, :], rtol=1e-6)
    _, _, (full,) = _run("attention", heads=2, seq=6, dim=3, causal=False)
    assert not np.allclose(full[:, 0, :], v[:, 0, :])


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape,stride,padding", [
    (dict(N=1, C=3, H=6, W=6, K=4, R=3, S=3), 1, 1),
    (dict(N=2, C=2, H=7, W=5, K=3, R=3, S=1), 2, 0),
    (dict(N=1, C=1, H=1, W=1, K=1, R=1, S=1), 1, 0),
])
def test_conv2d_bn_relu_matches_numpy_in_both_layouts(shape, stride, padding, dtype):
    _, (data, kernel, scale, shift), (out,) = _run("conv2d_bn_relu", **shape, stride=stride, padding=padding,
                                                   dtype=dtype)
    want = conv_bn_relu_nchw_np(data, kernel, scale, shift, stride, padding)
    np.testing.assert_allclose(out, want, **TOL[dtype])
    assert (want == 0).any() or want.size < 8  # relu actually clamps something
    # the same values in NHWC data and an RSCK kernel give the transposed result
    wl = te.create_workload("conv2d_bn_relu", **shape, stride=stride, padding=padding, dtype=dtype, layout="NHWC")
    (nhwc,) = wl.reference(np.ascontiguousarray(data.transpose(0, 2, 3, 1)),
                           np.ascontiguousarray(kernel.transpose(2, 3, 1, 0)), scale, shift)
    np.testing.assert_allclose(nhwc, want.transpose(0, 2, 3, 1), **TOL[dtype])


def test_stage_names_are_unique_within_each_block():
    """Schedules address stages by name: each block's stages must not share one."""
    for name, params in SMALL_BLOCKS.items():
        wl = te.create_workload(name, **params)
        names = [op.name for op in te.dag.topological_order(wl.outputs)]
        assert len(names) == len(set(names)), (name, names)


# ---------------------------------------------------------------- errors


@pytest.mark.parametrize("name,params,error,match", [
    ("layernorm", dict(M=0, N=4), te.ShapeError, "layernorm: M must be a positive int"),
    ("layernorm", dict(M=2, N=4, eps=0), te.WorkloadError, "layernorm: eps must be a positive number"),
    ("layernorm", dict(M=2, N=4, eps=True), te.WorkloadError, "layernorm: eps must be a positive number"),
    ("layernorm", dict(M=2, N=4, dtype="int32"), te.DTypeError, "layernorm: dtype"),
    ("mlp", dict(M=2, D=3, H=-1), te.ShapeError, "mlp: H must be a positive int"),
    ("mlp", dict(M=2, D=3, H=4, dtype="int8"), te.DTypeError, "mlp: dtype"),
    ("attention", dict(heads=2, seq=0, dim=4), te.ShapeError, "attention: seq must be a positive int"),
    ("attention", dict(heads=2, seq=3, dim=4, causal=1), te.WorkloadError, "attention: causal must be True"),
    ("attention", dict(heads=2, seq=3, dim=4, dtype="bool"), te.DTypeError, "attention: dtype"),
    ("conv2d_bn_relu", dict(N=1, C=2, H=4, W=4, K=3, R=5, S=3), te.ShapeError, "conv2d_bn_relu: output height"),
    ("conv2d_bn_relu", dict(N=1, C=2, H=4, W=4, K=3, R=3, S=3, stride=0), te.ShapeError,
     "conv2d_bn_relu: stride"),
    ("conv2d_bn_relu", dict(N=1, C=2, H=4, W=4, K=3, R=3, S=3, layout="CHWN"), te.WorkloadError,
     "conv2d_bn_relu: unknown layout"),
    ("conv2d_bn_relu", dict(N=1, C=2, H=4, W=4, K=3, R=3, S=3, dtype="int32"), te.DTypeError,
     "conv2d_bn_relu: dtype"),
])
def test_bad_workload_parameters_raise_te_errors_naming_the_op(name, params, error, match):
    with pytest.raises(error, match=match):
        te.create_workload(name, **params)


def test_bad_tensors_raise_te_errors_naming_the_op():
    f32 = lambda shape, n: te.placeholder(shape, "float32", n)  # noqa: E731
    X = f32((3, 4), "X")
    with pytest.raises(te.ShapeError, match=r"layernorm: gamma must have shape \(4,\)"):
        te.ops.layer_norm(X, f32((5,), "g"), f32((4,), "b"))
    with pytest.raises(te.DTypeError, match="layernorm: X is float32 but beta is float64"):
        te.ops.layer_norm(X, f32((4,), "g"), te.placeholder((4,), "float64", "b"))
    with pytest.raises(te.ShapeError, match=r"mlp: W2 must have shape \(4, 6\)"):
        te.ops.mlp(X, f32((6, 4), "W1"), f32((6,), "b1"), f32((6, 4), "W2"), f32((4,), "b2"))
    with pytest.raises(te.ShapeError, match="mlp: X is .* but W1 is"):
        te.ops.mlp(X, f32((6, 5), "W1"), f32((6,), "b1"), f32((4, 6), "W2"), f32((4,), "b2"))
    Q = f32((2, 3, 4), "Q")
    with pytest.raises(te.ShapeError, match="attention: Q, K and V must have the same shape"):
        te.ops.attention(Q, f32((2, 5, 4), "K"), f32((2, 5, 4), "V"))
    with pytest.raises(te.ShapeError, match="attention: K must be 3-d"):
        te.ops.attention(Q, f32((3, 4), "K"), Q)
    data, kernel = f32((1, 2, 5, 5), "data"), f32((3, 2, 3, 3), "kernel")
    with pytest.raises(te.ShapeError, match=r"conv2d_bn_relu: scale must have shape \(3,\)"):
        te.ops.conv2d_bn_relu(data, kernel, f32((2,), "scale"), f32((3,), "shift"))
    with pytest.raises(te.ShapeError, match="conv2d_bn_relu: .* input channels 2 and 4 differ"):
        te.ops.conv2d_bn_relu(data, f32((3, 4, 3, 3), "kernel"), f32((3,), "scale"), f32((3,), "shift"))


# ---------------------------------------------------------------- end to end


SMALL_BLOCKS = {
    "layernorm": dict(M=5, N=12),
    "mlp": dict(M=4, D=6, H=10),
    "qkv": dict(M=5, D=6, N=7),
    "attention": dict(heads=2, seq=6, dim=4, causal=True),
    "conv2d_bn_relu": dict(N=1, C=3, H=6, W=6, K=4, R=3, S=3, padding=1),
}


@pytest.mark.parametrize("name", sorted(SMALL_BLOCKS))
def test_each_block_tunes_end_to_end_with_verified_trials(name):
    task = autotune.Task(name, SMALL_BLOCKS[name])
    result = autotune.tune(task, trials=4, tuner="random", timing=FAST)
    bad = [(t.result.status.value, t.result.error) for t in result.history if not t.result.ok]
    assert len(result.history) == 4 and not bad, bad


# ---------------------------------------------------------------- NumPy anchors


@pytest.mark.parametrize("name,params", [
    ("mlp", dict(M=5, D=6, H=9)),
    ("mlp", dict(M=3, D=4, H=2, dtype="float64")),
    ("attention", dict(heads=2, seq=7, dim=4)),
    ("attention", dict(heads=3, seq=5, dim=8, causal=True, dtype="float64")),
    ("layernorm", dict(M=5, N=37)),
    ("layernorm", dict(M=3, N=8, eps=0.5, dtype="float64")),
    ("softmax", dict(shape=[5, 37])),
    ("softmax", dict(shape=[3, 4, 6], axis=1, dtype="float64")),
])
def test_the_numpy_anchor_of_a_block_computes_the_workload_every_run(name, params):
    """The anchor reuses its buffers in place: a second run must give the same values."""
    from autotune import anchor

    task = autotune.Task(name, params)
    fn, why = anchor.numpy_equivalent(task)
    assert why == ""
    (ref,) = task.workload.reference(*task.workload.random_inputs(seed=0))
    tol = TOL[params.get("dtype", "float32")]
    np.testing.assert_allclose(fn(), ref, **tol)
    np.testing.assert_allclose(fn(), ref, **tol)


def test_the_numpy_anchor_of_qkv_computes_the_three_projections():
    from autotune import anchor

    task = autotune.Task("qkv", dict(M=5, D=6, N=7))
    fn, why = anchor.numpy_equivalent(task)
    assert why == ""
    refs = task.workload.reference(*task.workload.random_inputs(seed=0))
    for _ in range(2):
        got = fn()
        assert len(got) == 3
        for out, ref in zip(got, refs):
            np.testing.assert_allclose(out, ref, **TOL["float32"])


def test_the_anchor_workspace_counts_the_hidden_and_score_buffers():
    from autotune import anchor

    mlp = autotune.Task("mlp", dict(M=5, D=6, H=9))
    arrays = 5 * 6 + 9 * 6 + 9 + 6 * 9 + 6 + 5 * 6           # inputs and output
    assert anchor.numpy_workspace_bytes(mlp) == (arrays + 2 * 5 * 9) * 4
    att = autotune.Task("attention", dict(heads=2, seq=7, dim=4, causal=True))
    arrays = 4 * 2 * 7 * 4                                   # Q, K, V and O
    assert anchor.numpy_workspace_bytes(att) == (arrays + 2 * 7 * 7 + 2 * 7) * 4 + 7 * 7


def test_the_anchor_workspace_of_softmax_and_layernorm_counts_the_second_array_and_the_row_statistic():
    from autotune import anchor

    softmax = autotune.Task("softmax", dict(shape=[5, 6]))
    assert anchor.numpy_workspace_bytes(softmax) == (3 * 5 * 6 + 5) * 4
    layernorm = autotune.Task("layernorm", dict(M=5, N=6))
    assert anchor.numpy_workspace_bytes(layernorm) == (3 * 5 * 6 + 2 * 6 + 5) * 4


def test_conv2d_bn_relu_has_no_anchor():
    from autotune import anchor

    assert not anchor.has_numpy_anchor(autotune.Task("conv2d_bn_relu", SMALL_BLOCKS["conv2d_bn_relu"]))
