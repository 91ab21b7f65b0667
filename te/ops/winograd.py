"""3x3 stride-1 convolution by Winograd's minimal filtering F(m x m, 3 x 3) (Lavin and Gray, 2016).

The output is computed in m x m tiles. Per tile and channel pair, the direct convolution
multiplies ``9 m^2`` times; Winograd transforms the kernel (``U = G g G^T``) and each
``alpha x alpha`` input tile (``V = B^T d B``, ``alpha = m + 2``) so that the tile's output is
``A^T (U * V) A`` with ``alpha^2`` products: 2.25x fewer for m = 2, 4x fewer for m = 4. Summed
over input channels, the products become ``alpha^2`` independent matrix products (K x C times
C x tiles), which is where the time goes and what the schedule space tiles::

    U[a, b, k, c]  = sum_ij G[a, i] G[b, j] kernel[k, c, i, j]          kernel_transform(_rows)
    V[a, b, c, p]  = sum_ij BT[a, i] BT[b, j] pad[n, c, ty*m + i, tx*m + j]   input_transform(_rows)
    M[a, b, k, p]  = sum_c U[a, b, k, c] V[a, b, c, p]                    winograd_gemm
    out[n, k, y, x] = sum_ij AT[y % m, i] AT[x % m, j] M[i, j, k, tile(n, y // m, x // m)]
                                                        output_transform_cols, conv2d

``p`` numbers the tiles ``(n, ty, tx)`` row-major. Each 2-d transform is two stages, one per
side. The transform matrices are constants: each sum is written out with its coefficients
(zeros left out, ones as plain adds) and chosen by ``te.if_then_else`` on the transform's
row; lowering specializes a loop over that row (``passes.specialize_rows``), so each copy
holds only the additions its row needs.

The price is rounding: the transforms multiply by constants up to 8 (m = 4) and cancel
large terms, so the result carries more rounding error than the direct sum.
``rounding_bound`` gives a first-order bound per output element that tests check.
"""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

import te

from . import _checks
from .conv import _conv_setup, _out_hw, _pad2d, _same, _weights

_H = Fraction(1, 2)

#: Output tile size -> (B^T, G, A^T), the matrices of F(m x m, 3 x 3) for interpolation points
#: 0, 1, -1 (m = 2) and 0, 1, -1, 2, -2 (m = 4), each with the point at infinity.
TRANSFORMS = {
    2: (
        ((1, 0, -1, 0), (0, 1, 1, 0), (0, -1, 1, 0), (0, 1, 0, -1)),
        ((1, 0, 0), (_H, _H, _H), (_H, -_H, _H), (0, 0, 1)),
        ((1, 1, 1, 0), (0, 1, -1, -1)),
    ),
    4: (
        ((4, 0, -5, 0, 1, 0), (0, -4, -4, 1, 1, 0), (0, 4, -4, -1, 1, 0),
         (0, -2, -1, 2, 1, 0), (0, 2, -1, -2, 1, 0), (0, 4, 0, -5, 0, 1)),
        ((Fraction(1, 4), 0, 0), (Fraction(-1, 6), Fraction(-1, 6), Fraction(-1, 6)),
         (Fraction(-1, 6), Fraction(1, 6), Fraction(-1, 6)), (Fraction(1, 24), Fraction(1, 12), Fraction(1, 6)),
         (Fraction(1, 24), Fraction(-1, 12), Fraction(1, 6)), (0, 0, 1)),
        ((1, 1, 1, 1, 1, 0), (0, 1, -1, 2, -2, 0), (0, 1, 1, 4, 4, 0), (0, 1, -1, 8, -8, 1)),
    ),
}

TILES = tuple(TRANSFORMS)


def transform_matrices(tile: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(B^T, G, A^T) of F(tile x tile, 3 x 3) as float64 arrays."""
    return tuple(np.array([[float(v) for v in row] for row in mat]) for mat in TRANSFORMS[tile])


def _combination(coefs, term, dtype: str):
    """``sum_i coefs[i] * term(i)`` with zero coefficients left out and +-1 as adds/subtracts."""
    out = None
    for i, c in enumerate(coefs):
        if c == 0:
            continue
        t = term(i)
        if abs(c) != 1:
            t = te.const(float(abs(c)), dtype) * t
        if out is None:
            out = t if c > 0 else te.const(0.0, dtype) - t
        else:
            out = out + t if c > 0 else out - t
    return out


def _by_row(matrix, row, term, dtype: str):
    """``sum_i matrix[row, i] * term(i)`` for an index expression ``row``: one combination
    per row of the constant matrix, chosen by comparing ``row`` with the row number."""
    cases = [_combination(coefs, term, dtype) for coefs in matrix]
    out = cases[-1]
    for r in range(len(cases) - 2, -1, -1):
        out = te.if_then_else(te.equal(row, r), cases[r], out)
    return out


def conv2d_winograd_nchw(data, kernel, padding=1, tile: int = 4, name: str = "conv2d"):
    """3x3 stride-1 convolution of NCHW data with a KCRS kernel by Winograd F(tile, 3);
    the same result as ``conv2d_nchw(data, kernel, 1, padding)`` up to rounding
    (``rounding_bound``). ``tile`` is 2 or 4; float32 and float64 only."""
    op = "conv2d_winograd"
    acc, _stride, pads, _dilation = _conv_setup(op, data, kernel, 1, padding, 1, None)
    if acc not in ("float32", "float64"):
        raise te.DTypeError(f"{op}: float32 or float64 data only (float16 loses too much in the transforms), "
                            f"got {data.dtype}")
    if tile not in TRANSFORMS:
        raise te.ShapeError(f"{op}: tile must be one of {list(TILES)}, got {tile!r}")
    (N, C, H, W), (K, Ck, R, S) = data.shape, kernel.shape
    _same(op, "input channels", data, kernel, C, Ck)
    if (R, S) != (3, 3):
        raise te.ShapeError(f"{op}: the kernel must be 3x3, got {R}x{S} (use conv2d)")
    OH, OW = _out_hw(op, (H, W), (R, S), pads, (1, 1), (1, 1))
    m, (BT, G, AT) = tile, TRANSFORMS[tile]
    alpha = m + 2
    TH, TW = math.ceil(OH / m), math.ceil(OW / m)
    top, left = pads[0], pads[1]
    # Padded far enough that every tile reads alpha rows and columns; outputs past OH, OW are dropped.
    Dp = _pad2d(data, 2, (top, left, TH * m + 2 - H - top, TW * m + 2 - W - left))

    # Each 2-d transform runs as two passes of its 1-d one (rows, then columns), each a stage:
    # one pass reads ~alpha/2 elements per result where the 2-d form would read ~alpha^2/4.
    G_rows = te.compute((alpha, 3, K, C), lambda a, j, k, c: _by_row(G, a, lambda i: kernel[k, c, i, j], acc),
                        name="kernel_transform_rows", tag="winograd_kernel_transform", attrs=_weights(kernel))
    U = te.compute((alpha, alpha, K, C), lambda a, b, k, c: _by_row(G, b, lambda j: G_rows[a, j, k, c], acc),
                   name="kernel_transform", tag="winograd_kernel_transform")

    def input_rows_body(a, j, c, p):
        n, ty, tx = p // (TH * TW), p // TW % TH, p % TW
        return _by_row(BT, a, lambda i: Dp[n, c, ty * m + i, tx * m + j], acc)

    B_rows = te.compute((alpha, alpha, C, N * TH * TW), input_rows_body, name="input_transform_rows",
                        tag="winograd_input_transform")
    V = te.compute((alpha, alpha, C, N * TH * TW), lambda a, b, c, p: _by_row(BT, b, lambda j: B_rows[a, j, c, p], acc),
                   name="input_transform", tag="winograd_input_transform")
    rc = te.reduce_axis((0, C), "rc")
    Mw = te.compute((alpha, alpha, K, N * TH * TW), lambda a, b, k, p: te.sum(U[a, b, k, rc] * V[a, b, rc, p], axis=rc),
                    name="winograd_gemm", tag="winograd_gemm")
    A_cols = te.compute((alpha, m, K, N * TH * TW), lambda a, x, k, p: _by_row(AT, x, lambda j: Mw[a, j, k, p], acc),
                        name="output_transform_cols", tag="winograd_output_transform")

    def output_body(n, k, y, x):
        tile_index = (n * TH + y // m) * TW + x // m
        return _by_row(AT, y % m, lambda i: A_cols[i, x % m, k, tile_index], acc)

    # FLOPs counted as the direct convolution's (te.flop_count): the rate compares with direct kernels'.
    return te.compute((N, K, OH, OW), output_body, name=name, tag="conv2d_winograd_nchw",
                      attrs={"flops": 2 * N * K * OH * OW * C * 9})


def rounding_bound(data: np.ndarray, kernel: np.ndarray, padding, tile: int, dtype: str = "float32") -> np.ndarray:
    """A first-order bound, per output element, on ``|winograd - exact|`` when every step
    rounds in ``dtype``: the magnitudes of each step computed with absolute values
    (``|A^T| (sum_c |G||g||G^T| * |B^T||d||B|) |A|``) times ``u`` (the unit roundoff) times
    the number of roundings along the longest chain of one result (each transform's two
    passes, the channel sum, the product). Exact sums of absolute values bound every
    partial sum, so each rounding adds at most ``u`` times that magnitude."""
    BT, G, AT = (np.abs(x) for x in transform_matrices(tile))
    top, left, bottom, right = _checks.padding("conv2d_winograd", padding)
    N, C, H, W = data.shape
    K = kernel.shape[0]
    m, alpha = tile, tile + 2
    OH, OW = H + top + bottom - 2, W + left + right - 2
    TH, TW = math.ceil(OH / m), math.ceil(OW / m)
    d = np.zeros((N, C, TH * m + 2, TW * m + 2))
    d[:, :, top:top + H, left:left + W] = np.abs(data)
    U = np.einsum("ai,kcij,bj->abkc", G, np.abs(kernel.astype(np.float64)), G)
    out = np.zeros((N, K, TH * m, TW * m))
    for ty in range(TH):
        for tx in range(TW):
            tile_in = d[:, :, ty * m:ty * m + alpha, tx * m:tx * m + alpha]
            V = np.einsum("ai,ncij,bj->ncab", BT, tile_in, BT)
            M = np.einsum("abkc,ncab->nkab", U, V)
            out[:, :, ty * m:(ty + 1) * m, tx * m:(tx + 1) * m] = np.einsum("ya,nkab,xb->nkyx", AT, M, AT)
    u = float(np.finfo(dtype).eps) / 2
    roundings = 2 * (alpha + 1) + C + 2 * (alpha + 1) + 3 * alpha
    return out[:, :, :OH, :OW] * roundings * u


@te.register_workload("conv2d_winograd")
def conv2d_winograd_workload(N, C, H, W, K, padding=1, tile=4, dtype="float32"):
    """[data, kernel, out]: NCHW data, KCRS 3x3 kernel, stride 1, by Winograd F(tile, 3)."""
    dims = dict(N=N, C=C, H=H, W=W, K=K)
    N, C, H, W, K = (_checks.positive_int("conv2d_winograd", n, v) for n, v in dims.items())
    dtype = _checks.float_dtype("conv2d_winograd", "dtype", dtype)
    data = te.placeholder((N, C, H, W), dtype, "data")
    kernel = te.placeholder((K, C, 3, 3), dtype, "kernel")
    return [data, kernel, conv2d_winograd_nchw(data, kernel, padding, tile)]
