"""A hand-written CPU schedule for float32 matmul, against NumPy in the same run.

    python bench/matmul_handwritten.py [--size 1024]

Schedule: C is tiled into MR x NR register tiles accumulated in a local buffer
(cache_write), the reduction is split and reordered so the tile stays in registers,
the NR loop is vectorized, the MR loop unrolled, and the tile loops fused and run in
parallel. Prints GFLOP/s (median), NumPy's GFLOP/s and the ratio.
"""
from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import anchor  # noqa: E402

anchor.reexec_without_blas_overrides()

import numpy as np  # noqa: E402

import backends  # noqa: E402
import schedule  # noqa: E402
import te  # noqa: E402


def handwritten_schedule(M: int, N: int, K: int, mr: int = 8, nr: int = 32, kc: int = 256):
    wl = te.create_workload("matmul", M=M, N=N, K=K)
    A, B, C = wl.args
    s = schedule.create_schedule(C)
    CL = s.cache_write(C, "local")
    i, j = C.op.axis
    io, jo, ii, ji = s[C].tile(i, j, mr, nr)
    s[C].vectorize(ji)
    fused = s[C].fuse(io, jo)
    s[C].parallel(fused)
    s[CL].compute_at(s[C], fused)
    ci, cj = s[CL].op.axis
    (k,) = s[CL].op.reduce_axis
    ko, ki = s[CL].split(k, factor=kc)
    s[CL].reorder(ko, ki, ci, cj)
    s[CL].unroll(ci)
    s[CL].vectorize(cj)
    return s, [A, B, C], wl


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--mr", type=int, default=8)
    parser.add_argument("--nr", type=int, default=32)
    parser.add_argument("--kc", type=int, default=256)
    parser.add_argument("--show-source", action="store_true")
    args = parser.parse_args()
    n = args.size
    s, tensors, wl = handwritten_schedule(n, n, n, args.mr, args.nr, args.kc)
    f = backends.build(s, tensors)
    if args.show_source:
        print(f.source)
    a, b = wl.random_inputs(seed=0)
    c = np.zeros((n, n), dtype=np.float32)
    f(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-3, atol=1e-3 * np.sqrt(n))
    ptrs = [x.ctypes.data for x in (a, b, c)]
    t = anchor.median_seconds(lambda: f.call_unchecked(ptrs))
    ours = wl.flops / t / 1e9
    ref = anchor.numpy_matmul_gflops(n, n, n)
    print(f"BLAS: {anchor.blas_description()}")
    print(f"matmul {n}x{n}x{n} float32  mr={args.mr} nr={args.nr} kc={args.kc}")
    print(f"handwritten schedule: {ours:8.1f} GFLOP/s (median {t * 1e3:.2f} ms)")
    print(f"numpy:                {ref:8.1f} GFLOP/s")
    print(f"ratio:                {ours / ref:8.2f}x")


if __name__ == "__main__":
    main()
