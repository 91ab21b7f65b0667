"""Register tiles at a tensor's edge, and index width: what each lowering rule is worth.

    python bench/edge_tiles.py                          # matmul 1000^3 and 1024x1000x1024
    python bench/edge_tiles.py --shape 127 1023 511 --rows 8 --block 4

One micro-kernel-shaped schedule (the register tile of the space's first starting point,
sized for this machine: 6 x 16 with AVX2, 8 x 32 or so with AVX-512; ``block`` tiles per
cache block of rows and 2 of columns, a reduction block of 256, B in panels, the space's
own decisions), lowered four ways:

- ``guarded``: every overhang past the tensor's edge guarded, tail loops with variable
  trip counts (what lowering did before the two rules below);
- ``+ versioned``: a promoted register tile with a tail runs a constant full-tile copy
  wherever the tile is whole (``promote_accumulators``);
- ``+ overhang``: a tile whose overhang only reads zero-padded panels is computed whole
  (``schedule/lower.py``), which removes the column tail altogether;
- ``int32 indices``: all of the above, printed with the 32-bit indices GPUs keep.

Each variant is checked against NumPy, then all of them and NumPy are timed in
alternating rounds (median of repeats from evicted arrays per round, median over rounds).
The first three variants switch the rules off by replacing the two private helpers
that implement them, for this process only.
"""
from __future__ import annotations

import argparse
import contextlib
import dataclasses
import importlib
import os
import random
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import anchor  # noqa: E402

anchor.reexec_without_blas_overrides(quiet_threads=True)  # OpenBLAS idles its threads after a call

import numpy as np  # noqa: E402

import schedule  # noqa: E402
import te  # noqa: E402
from autotune.timing_protocol import evicting_flush  # noqa: E402
from backends import cpu  # noqa: E402
from schedule.passes.promote_accumulators import _Promote  # noqa: E402
from schedule.space import ConfigSpace  # noqa: E402

lowering = importlib.import_module("schedule.lower")  # the module; ``schedule.lower`` is the function


@contextlib.contextmanager
def rules(versioned: bool, overhang: bool):
    """Lowering with the edge rules on or off (restored on exit)."""
    saved = _Promote._versioned, lowering._overcomputed_axes
    if not versioned:
        _Promote._versioned = lambda self, promote, tile, extents, nbytes: promote(extents)
    if not overhang:
        lowering._overcomputed_axes = lambda *args: set()
    try:
        yield
    finally:
        _Promote._versioned, lowering._overcomputed_axes = saved


def config_for(space: ConfigSpace, rows: int | None, block: int):
    """The schedule the variants share: the space's first starting point's register tile
    (sized for this machine's vectors and registers; ``rows`` overrides its rows), in
    cache blocks of ``block`` tiles by 2, a reduction block of 256, B in panels."""
    base = space.starting_points(random.Random(0))[0]
    decisions = space.decisions(base)
    (c,) = list(decisions)
    tiles = {t.axis: t.sizes for t in c.tiles}
    rows = tiles["i"][-1] if rows is None else rows
    c = c.with_tiles(i=(1, block, rows), j=(1, 2, tiles["j"][-1])).with_reduce_tiles(k=(256,))
    c = dataclasses.replace(c, pack="panels:B", at="b", parallel=2)
    config = decisions.replace(c).to_config()
    problem = space.check(config)
    if problem:
        raise SystemExit(f"the schedule is not in the space: {problem}")
    return config


def build_variant(space, config, versioned: bool, overhang: bool, wide: bool) -> cpu.CPUModule:
    with rules(versioned, overhang):
        s, args = space.apply(config)
        func = schedule.lower(s, args)
    source = cpu.generate_source(func, cpu.CPUDialect(wide_index=wide))
    return cpu.CPUModule(func, source, cpu.compile_source(source))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", type=int, nargs=3, action="append", metavar=("M", "N", "K"))
    parser.add_argument("--rows", type=int, default=None,
                        help="register tile rows (default: the space's first starting point's)")
    parser.add_argument("--block", type=int, default=16, help="register tiles per cache block of rows")
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    print(f"# NumPy: {anchor.blas_description()}")
    print("| shape | tile | guarded | + versioned | + overhang | int32 indices | NumPy |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    variants = [("guarded", False, False, True), ("+ versioned", True, False, True),
                ("+ overhang", True, True, True), ("int32 indices", True, True, False)]
    for m, n, k in args.shape or [(1000, 1000, 1000), (1024, 1000, 1024)]:
        wl = te.create_workload("matmul", M=m, N=n, K=k)
        space = ConfigSpace.from_workload(wl)
        config = config_for(space, args.rows, args.block)
        a, b = wl.random_inputs(0)
        c = np.empty((m, n), np.float32)
        modules = [build_variant(space, config, *flags) for _, *flags in variants]
        for module in modules:
            c.fill(np.nan)
            module(a, b, c)
            np.testing.assert_allclose(c, a.astype(np.float64) @ b, rtol=1e-3, atol=1e-2 * np.sqrt(k))
        pointers = [x.ctypes.data for x in (a, b, c)]
        calls = [lambda mod=mod: mod.call_unchecked(pointers) for mod in modules] + [lambda: np.matmul(a, b, out=c)]
        rounds = anchor.alternating_medians(calls, args.rounds, evicting_flush([a, b, c]))
        gflops = [2.0 * m * n * k / statistics.median(r) / 1e9 for r in rounds]
        tile = "x".join(str(t.sizes[-1]) for t in next(iter(space.decisions(config))).tiles)
        print(f"| {m}x{n}x{k} | {tile} | " + " | ".join(f"{g:.1f}" for g in gflops) + " |", flush=True)


if __name__ == "__main__":
    main()
