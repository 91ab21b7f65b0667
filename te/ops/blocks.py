"""Multi-operator blocks of a network, each several stages in one workload (for fusion).

- ``layer_norm(X, gamma, beta, eps)``: over the last axis of X, two-pass:
  ``layernorm_sum`` (row sums), ``layernorm_mean``, ``layernorm_sqdev`` (sums of squared
  deviations from the mean) and ``layernorm`` ((X - mean) * rsqrt(var + eps) * gamma + beta).
- ``mlp(X, W1, b1, W2, b2)``: ``gelu(X W1^T + b1) W2^T + b2``; stages ``mlp_fc1``,
  ``mlp_gelu`` (bias and gelu), ``mlp_fc2`` and ``mlp`` (bias). gelu is the exact form
  ``0.5 x (1 + erf(x / sqrt(2)))`` (te has erf), not the tanh approximation.
- ``qkv(X, Wq, Wk, Wv, bq, bk, bv)``: the query, key and value projections of one
  activation, ``X W^T + b`` each; stages ``q_proj``/``q_proj_epilogue`` and likewise for
  k and v: three siblings reading X, which a schedule may run in one loop nest
  (horizontal fusion, ``Stage.compute_with``).
- ``attention(Q, K, V, causal)``: per head, ``softmax(Q K^T / sqrt(dim)) V`` with the
  max-subtracted softmax of ``nn.softmax``; stages ``attention_score`` (Q K^T),
  ``attention_logits`` (the scale, and -inf above the diagonal when causal), the four
  softmax stages and ``attention`` (the product with V).
- ``flash_attention(Q, K, V, causal, block)``: the same result over blocks of keys,
  combined by ``te.softmax_sum`` (online softmax), so a block's scores can be computed
  inside the loop over blocks.
- ``conv2d_bn_relu(data, kernel, scale, shift, ...)``: ``conv.conv2d_nchw``/``conv2d_nhwc``,
  then inference batch-norm folded into a per-output-channel ``scale`` and ``shift``, then
  relu, as one element-wise stage ``bn_relu``.

All take float dtypes only (they divide, or call exp/erf/rsqrt, or fold a float batch-norm).
"""
from __future__ import annotations

import math

import te

from . import _checks
from .conv import _conv_params, _out_hw, conv2d_nchw, conv2d_nhwc
from .linalg import dense
from .nn import softmax

_SQRT1_2 = 1 / math.sqrt(2)


def _float_inputs(op: str, *specs) -> str:
    """The common float dtype of the tensors of ``specs``, (name, tensor, rank) triples,
    after checking each is a te.Tensor of that rank."""
    for name, t, ndim in specs:
        _checks.tensor(op, name, t, ndim)
    dtype = _checks.same_dtype(op, **{name: t for name, t, _ in specs})
    return _checks.float_dtype(op, "the dtype of the inputs", dtype)


def _vector(op: str, name: str, t, length: int, what: str) -> None:
    """``t`` is a 1-d tensor of ``length`` elements (one per ``what``)."""
    _checks.tensor(op, name, t, 1)
    if t.shape != (length,):
        raise te.ShapeError(f"{op}: {name} must have shape ({length},), one per {what}, got {t.shape}")


# ---------------------------------------------------------------- layer norm


def layer_norm(X, gamma, beta, eps: float = 1e-5):
    """Normalise X (rank >= 2) over its last axis: mean 0 and variance 1, then ``* gamma + beta``.

    The variance is the mean of squared deviations from the mean (two passes), the
    numerically safe form; ``eps`` (a positive number) is added to it before the root.
    """
    op = "layernorm"
    _checks.tensor(op, "X", X)
    if X.ndim < 2:
        raise te.ShapeError(f"{op}: X must have at least 2 dimensions (rows, then the normalised axis), got {X.shape}")
    _float_inputs(op, ("X", X, None), ("gamma", gamma, 1), ("beta", beta, 1))
    eps = _checks.positive_real(op, "eps", eps)
    rows, N = X.shape[:-1], X.shape[-1]
    _vector(op, "gamma", gamma, N, "element of the last axis of X")
    _vector(op, "beta", beta, N, "element of the last axis of X")
    k1 = te.reduce_axis((0, N), "k")
    S = te.compute(rows, lambda *r: te.sum(X[r + (k1,)], axis=k1), name="layernorm_sum")
    mean = te.compute(rows, lambda *r: S[r] / float(N), name="layernorm_mean", tag="elementwise")
    k2 = te.reduce_axis((0, N), "k")

    def sqdev(*r):
        d = X[r + (k2,)] - mean[r]
        return te.sum(d * d, axis=k2)

    V = te.compute(rows, sqdev, name="layernorm_sqdev")

    def normalised(*i):
        r, j = i[:-1], i[-1]
        return (X[i] - mean[r]) * te.rsqrt(V[r] / float(N) + eps) * gamma[j] + beta[j]

    return te.compute(X.shape, normalised, name="layernorm", tag="layernorm")


# ---------------------------------------------------------------- MLP


def gelu(x):
    """The exact gelu of expression ``x``: ``0.5 x (1 + erf(x / sqrt(2)))``."""
    return 0.5 * x * (1.0 + te.erf(x * _SQRT1_2))


def mlp(X, W1, b1, W2, b2):
    """``Y = gelu(X W1^T + b1) W2^T + b2``: X (M, D), W1 (H, D), b1 (H,), W2 (D, H), b2 (D,)."""
    op = "mlp"
    _float_inputs(op, ("X", X, 2), ("W1", W1, 2), ("b1", b1, 1), ("W2", W2, 2), ("b2", b2, 1))
    (M, D), (H, D1) = X.shape, W1.shape
    if D1 != D:
        raise te.ShapeError(f"{op}: X is {X.shape} but W1 is {W1.shape}: W1 must be (H, {D})")
    if W2.shape != (D, H):
        raise te.ShapeError(f"{op}: W2 must have shape ({D}, {H}) to map H={H} back to D={D}, got {W2.shape}")
    _vector(op, "b1", b1, H, "hidden unit")
    _vector(op, "b2", b2, D, "output feature")
    k1 = te.reduce_axis((0, D), "k")
    F1 = te.compute((M, H), lambda i, j: te.sum(X[i, k1] * W1[j, k1], axis=k1), name="mlp_fc1", tag="dense")
    G = te.compute((M, H), lambda i, j: gelu(F1[i, j] + b1[j]), name="mlp_gelu", tag="elementwise")
    k2 = te.reduce_axis((0, H), "k")
    F2 = te.compute((M, D), lambda i, j: te.sum(G[i, k2] * W2[j, k2], axis=k2), name="mlp_fc2", tag="dense")
    return te.compute((M, D), lambda i, j: F2[i, j] + b2[j], name="mlp", tag="elementwise")


# ---------------------------------------------------------------- q, k, v projections


def qkv(X, Wq, Wk, Wv, bq, bk, bv):
    """``(X Wq^T + bq, X Wk^T + bk, X Wv^T + bv)``: X (M, D), each W (N, D), each b (N,).

    Three ``dense`` layers of one input, their stages named q_proj, k_proj and v_proj (each
    with its ``_epilogue``); the weights are layout-free, as in ``dense``.
    """
    op = "qkv"
    _float_inputs(op, ("X", X, 2), ("Wq", Wq, 2), ("Wk", Wk, 2), ("Wv", Wv, 2), ("bq", bq, 1), ("bk", bk, 1),
                  ("bv", bv, 1))
    (M, D), (N, Dq) = X.shape, Wq.shape
    for name, W in (("Wq", Wq), ("Wk", Wk), ("Wv", Wv)):
        if W.shape != (N, D):
            raise te.ShapeError(f"{op}: {name} must have shape ({N}, {D}) (like Wq, reading X {X.shape}), "
                                f"got {W.shape}")
    for name, b in (("bq", bq), ("bk", bk), ("bv", bv)):
        _vector(op, name, b, N, "output feature")
    return tuple(dense(X, W, b, name=f"{n}_proj") for n, W, b in (("q", Wq, bq), ("k", Wk, bk), ("v", Wv, bv)))


# ---------------------------------------------------------------- attention


def _attention_shape(op: str, Q, K, V, causal) -> tuple[int, int, int]:
    """(heads, seq, dim) of ``op``'s Q, K and V, after checking them and ``causal``."""
    _float_inputs(op, ("Q", Q, 3), ("K", K, 3), ("V", V, 3))
    _checks.flag(op, "causal", causal)
    if not Q.shape == K.shape == V.shape:
        raise te.ShapeError(f"{op}: Q, K and V must have the same shape (heads, seq, dim), "
                            f"got {Q.shape}, {K.shape} and {V.shape}")
    return Q.shape


def attention(Q, K, V, causal: bool = False):
    """``O[h] = softmax(Q[h] K[h]^T / sqrt(dim)) V[h]``; Q, K, V and O are (heads, seq, dim).

    With ``causal`` a query attends only to keys at or before its position (the logits
    above the diagonal are -inf, so their weights are exactly 0).
    """
    heads, seq, dim = _attention_shape("attention", Q, K, V, causal)
    scale = 1 / math.sqrt(dim)
    kd = te.reduce_axis((0, dim), "k")
    S = te.compute((heads, seq, seq), lambda h, i, j: te.sum(Q[h, i, kd] * K[h, j, kd], axis=kd),
                   name="attention_score", tag="batch_matmul")

    def logits(h, i, j):
        scaled = S[h, i, j] * scale
        return te.if_then_else(j <= i, scaled, te.dtypes.min_value(Q.dtype)) if causal else scaled

    L = te.compute((heads, seq, seq), logits, name="attention_logits", tag="elementwise")
    P = softmax(L, axis=-1)
    kj = te.reduce_axis((0, seq), "j")
    return te.compute((heads, seq, dim), lambda h, i, d: te.sum(P[h, i, kj] * V[h, kj, d], axis=kj),
                      name="attention", tag="batch_matmul")


def flash_attention(Q, K, V, causal: bool = False, block: int = 128):
    """``attention(Q, K, V, causal)`` computed over blocks of ``block`` keys (FlashAttention).

    Per head, query row ``i`` and key block ``j``: the scores ``flash_score`` (h, i, key; a
    plain key axis, so K can be packed into panels along it), their maximum
    ``flash_block_max``, the exponentials ``flash_block_exp`` relative to it, their sum
    ``flash_block_sum`` and their product with the block's values ``flash_block_out``. ``flash_combine`` then sums the blocks' products and sums with
    ``te.softmax_sum`` weighted by ``exp(block max - row max)``: in one pass over the blocks,
    rescaling what it holds when a block raises the row's maximum (online softmax). Its axis
    ``t`` holds the numerator (0) and the normalizer (1, repeated along the columns so that
    both vectorize alike), and ``attention`` divides one by the other.

    Nothing in the DAG spans every key of a row but the combine's loop, so a schedule may
    compute one key block's stages inside it: the score matrix then exists one tile at a
    time. ``block`` must divide the sequence length. With ``causal`` the keys after the
    query are left out of every block (and blocks of them only, of the combine).
    """
    op = "flash_attention"
    heads, seq, dim = _attention_shape(op, Q, K, V, causal)
    block = _checks.positive_int(op, "block", block)
    if seq % block:
        raise te.ShapeError(f"{op}: block {block} must divide the sequence length {seq}")
    blocks, scale = seq // block, 1 / math.sqrt(dim)

    def visible(i, key):
        return key <= i if causal else None

    kd = te.reduce_axis((0, dim), "k")
    S = te.compute((heads, seq, seq), lambda h, i, key: te.sum(Q[h, i, kd] * K[h, key, kd], axis=kd),
                   name="flash_score", tag="batch_matmul")
    L = te.compute(S.shape, lambda *p: S[p] * scale, name="flash_logits", tag="elementwise")
    k1 = te.reduce_axis((0, block), "kk")
    Mx = te.compute((heads, seq, blocks),
                    lambda h, i, j: te.max(L[h, i, j * block + k1], axis=k1, where=visible(i, j * block + k1)),
                    name="flash_block_max")
    P = te.compute((heads, seq, blocks, block), lambda h, i, j, kk: te.exp(L[h, i, j * block + kk] - Mx[h, i, j]),
                   name="flash_block_exp")
    k2 = te.reduce_axis((0, block), "kk")
    Sm = te.compute((heads, seq, blocks),
                    lambda h, i, j: te.sum(P[h, i, j, k2], axis=k2, where=visible(i, j * block + k2)),
                    name="flash_block_sum")
    k3 = te.reduce_axis((0, block), "kk")
    Bo = te.compute((heads, seq, blocks, dim),
                    lambda h, i, j, d: te.sum(P[h, i, j, k3] * V[h, j * block + k3, d], axis=k3,
                                              where=visible(i, j * block + k3)),
                    name="flash_block_out", tag="batch_matmul")
    jb = te.reduce_axis((0, blocks), "j")

    def combine(h, i, t, d):  # t = 0: the numerator; t = 1: the normalizer, alike in every column
        part = te.if_then_else(t == 0, Bo[h, i, jb, d], Sm[h, i, jb])
        return te.softmax_sum(part, Mx[h, i, jb], axis=jb, where=visible(i, jb * block))

    C = te.compute((heads, seq, 2, dim), combine, name="flash_combine")
    return te.compute((heads, seq, dim), lambda h, i, d: C[h, i, 0, d] / C[h, i, 1, d], name="attention")


# ---------------------------------------------------------------- conv2d + batch norm + relu


def conv2d_bn_relu(data, kernel, scale, shift, stride=1, padding=0, layout: str = "NCHW"):
    """``relu(conv2d(data, kernel) * scale[k] + shift[k])`` per output channel k.

    ``scale`` and ``shift`` are inference batch-norm folded: ``gamma / sqrt(var + eps)``
    and ``beta - mean * scale``. Layouts as ``conv2d_nchw`` (kernel KCRS) and
    ``conv2d_nhwc`` (kernel RSCK).
    """
    op = "conv2d_bn_relu"
    _checks.choice(op, "layout", layout, ("NCHW", "NHWC"))
    _float_inputs(op, ("data", data, 4), ("kernel", kernel, 4), ("scale", scale, 1), ("shift", shift, 1))
    nchw = layout == "NCHW"
    (_, C, H, W), (K, Ck, R, S) = (data.shape, kernel.shape) if nchw else _as_nchw(data.shape, kernel.shape)
    if C != Ck:
        raise te.ShapeError(
            f"{op}: data is {data.shape} but kernel is {kernel.shape}: input channels {C} and {Ck} differ"
        )
    # checked here too so that errors name this op rather than the conv2d it builds on
    (sh, sw), pads, _ = _conv_params(op, stride, padding, 1)
    _out_hw(op, (H, W), (R, S), pads, (sh, sw), (1, 1))
    _vector(op, "scale", scale, K, "output channel")
    _vector(op, "shift", shift, K, "output channel")
    Y = (conv2d_nchw if nchw else conv2d_nhwc)(data, kernel, stride, padding)
    k_dim = 1 if nchw else 3

    def body(*i):
        return te.max(Y[i] * scale[i[k_dim]] + shift[i[k_dim]], 0.0)

    return te.compute(Y.shape, body, name="bn_relu", tag="elementwise")


def _as_nchw(data_shape, kernel_shape):
    """NHWC data and RSCK kernel shapes in NCHW / KCRS order."""
    (N, H, W, C), (R, S, Ck, K) = data_shape, kernel_shape
    return (N, C, H, W), (K, Ck, R, S)


# ---------------------------------------------------------------- workloads


def _extents(op: str, **dims) -> list[int]:
    return [_checks.positive_int(op, name, v) for name, v in dims.items()]


@te.register_workload("layernorm")
def layernorm_workload(M, N, eps=1e-5, dtype="float32"):
    """[X, gamma, beta, Y]: layer norm of the M rows of X (M, N), then gamma and beta."""
    M, N = _extents("layernorm", M=M, N=N)
    dtype = _checks.float_dtype("layernorm", "dtype", dtype)
    X = te.placeholder((M, N), dtype, "X")
    gamma = te.placeholder((N,), dtype, "gamma")
    beta = te.placeholder((N,), dtype, "beta")
    return [X, gamma, beta, layer_norm(X, gamma, beta, eps)]


@te.register_workload("mlp")
def mlp_workload(M, D, H, dtype="float32"):
    """[X, W1, b1, W2, b2, Y]: Y = gelu(X W1^T + b1) W2^T + b2, exact (erf) gelu."""
    M, D, H = _extents("mlp", M=M, D=D, H=H)
    dtype = _checks.float_dtype("mlp", "dtype", dtype)
    X = te.placeholder((M, D), dtype, "X")
    W1 = te.placeholder((H, D), dtype, "W1")
    b1 = te.placeholder((H,), dtype, "b1")
    W2 = te.placeholder((D, H), dtype, "W2")
    b2 = te.placeholder((D,), dtype, "b2")
    return [X, W1, b1, W2, b2, mlp(X, W1, b1, W2, b2)]


@te.register_workload("qkv")
def qkv_workload(M, D, N=None, dtype="float32"):
    """[X, Wq, Wk, Wv, bq, bk, bv, Q, K, V]: X (M, D) projected thrice to N features (N = D if not given)."""
    M, D = _extents("qkv", M=M, D=D)
    N = D if N is None else _extents("qkv", N=N)[0]
    dtype = _checks.float_dtype("qkv", "dtype", dtype)
    X = te.placeholder((M, D), dtype, "X")
    Ws = [te.placeholder((N, D), dtype, name) for name in ("Wq", "Wk", "Wv")]
    bs = [te.placeholder((N,), dtype, name) for name in ("bq", "bk", "bv")]
    return [X, *Ws, *bs, *qkv(X, *Ws, *bs)]


@te.register_workload("attention")
def attention_workload(heads, seq, dim, causal=False, dtype="float32"):
    """[Q, K, V, O]: O = softmax(Q K^T / sqrt(dim)) V per head, optionally causal."""
    heads, seq, dim = _extents("attention", heads=heads, seq=seq, dim=dim)
    dtype = _checks.float_dtype("attention", "dtype", dtype)
    Q, K, V = (te.placeholder((heads, seq, dim), dtype, n) for n in ("Q", "K", "V"))
    return [Q, K, V, attention(Q, K, V, causal)]


@te.register_workload("conv2d_bn_relu")
def conv2d_bn_relu_workload(N, C, H, W, K, R, S, stride=1, padding=0, dtype="float32", layout="NCHW"):
    """[data, kernel, scale, shift, out]: relu(conv2d * scale + shift), batch-norm folded."""
    op = "conv2d_bn_relu"
    N, C, H, W, K, R, S = _extents(op, N=N, C=C, H=H, W=W, K=K, R=R, S=S)
    _checks.choice(op, "layout", layout, ("NCHW", "NHWC"))
    dtype = _checks.float_dtype(op, "dtype", dtype)
    nchw = layout == "NCHW"
    data = te.placeholder((N, C, H, W) if nchw else (N, H, W, C), dtype, "data")
    kernel = te.placeholder((K, C, R, S) if nchw else (R, S, C, K), dtype, "kernel")
    scale = te.placeholder((K,), dtype, "scale")
    shift = te.placeholder((K,), dtype, "shift")
    return [data, kernel, scale, shift, conv2d_bn_relu(data, kernel, scale, shift, stride, padding, layout)]
