"""How many rows should a register tile have? One micro-kernel-shaped matmul schedule with its
register tile's rows and width varied, timed alternately with NumPy.

    python bench/register_rows.py                          # 1024^3: 4x16, 6x16, 8x8, 5x16
    python bench/register_rows.py --tiles 4x16 6x16 --shape 128 4096 4096 --rounds 9
    python bench/register_rows.py --tiles 6x16 6x16:8 6x16:4 --shape 128 4096 4096

``ROWSxWIDTH:BLOCK`` also sets the cache block of rows to BLOCK register tiles (by default the
starting point's; the space's tile candidates decide which blocks exist).

The schedule is the space's first starting point for the shape (B in panels as wide as the
tile, a reduction block of 256, 16 register tiles per cache block of rows, 2 per cache block
of columns); only the register tile changes, and its cache blocks keep their tile counts.
Rows that do not divide M leave a tail, as any such tile of the space does. Each kernel is
checked against NumPy first; then the kernels and NumPy are timed in alternating rounds
(the median of cache-flushed repeats per round, the median over rounds). The table gives
the vector registers each tile keeps live (``RegisterFile.vectors_needed``: accumulators,
one row of B, one broadcast value) against the target's count.
"""
from __future__ import annotations

import argparse
import dataclasses
import os
import random
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import anchor  # noqa: E402

anchor.reexec_without_blas_overrides(quiet_threads=True)  # OpenBLAS idles its threads after a call

import numpy as np  # noqa: E402

import te  # noqa: E402
from autotune.timing_protocol import evicting_flush  # noqa: E402
from autotune.verify import mismatch, reduction_length  # noqa: E402
from backends import build  # noqa: E402
from schedule.space import ConfigSpace  # noqa: E402


def config_with_tile(space: ConfigSpace, rows: int, width: int, row_block: int | None = None):
    """The space's first starting point with a ``rows`` x ``width`` register tile (and
    ``row_block`` of them per cache block of rows, when given)."""
    decisions = space.decisions(space.starting_points(random.Random(0))[0])
    c = decisions["C"]
    _, default_block, _ = c.tile("i").sizes
    row_block = row_block or default_block
    _, column_block, _ = c.tile("j").sizes
    c = c.with_tiles(i=(1, row_block, rows), j=(1, column_block, width))
    config = decisions.replace(dataclasses.replace(c, pack="panels:B")).to_config()
    problem = space.check(config)
    if problem:
        raise SystemExit(f"{rows}x{width}:{row_block}: not in the space: {problem}")
    return config


def parse_tile(spec: str) -> tuple[int, int, int | None]:
    """"6x16" -> (6, 16, None); "6x16:22" -> (6, 16, 22)."""
    tile, _, block = spec.partition(":")
    rows, width = map(int, tile.split("x"))
    return rows, width, int(block) if block else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", type=int, nargs=3, default=(1024, 1024, 1024), metavar=("M", "N", "K"))
    parser.add_argument("--tiles", nargs="+", default=["4x16", "6x16", "8x8", "5x16"], help="ROWSxWIDTH[:BLOCK]")
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    m, n, k = args.shape
    wl = te.create_workload("matmul", M=m, N=n, K=k)
    space = ConfigSpace.from_workload(wl)
    tiles = [parse_tile(t) for t in args.tiles]
    a, b = wl.random_inputs(0)
    c = np.empty((m, n), np.float32)
    (reference,) = wl.reference(a, b)
    modules = []
    for rows, width, row_block in tiles:
        s, arrays = space.apply(config_with_tile(space, rows, width, row_block))
        module = build(s, arrays, target="cpu")
        c.fill(np.nan)
        module(a, b, c)
        problem = mismatch(c, reference, reduction_length(wl.outputs))
        if problem:
            raise SystemExit(f"{rows}x{width}:{row_block} computes a wrong result: {problem}")
        modules.append(module)
    pointers = [x.ctypes.data for x in (a, b, c)]
    calls = [lambda mod=mod: mod.call_unchecked(pointers) for mod in modules] + [lambda: np.matmul(a, b, out=c)]
    rounds = anchor.alternating_medians(calls, args.rounds, evicting_flush([a, b, c]))
    flops = 2.0 * m * n * k
    numpy_s = statistics.median(rounds[-1])
    print(f"# matmul {m}x{n}x{k}, {args.rounds} rounds; NumPy: {anchor.blas_description()}")
    print(f"# {space.registers.count} vector registers of {space.registers.vector_bytes} bytes")
    print("| register tile | registers live | GFLOP/s | slowest-fastest round | against NumPy |")
    print("| --- | --- | --- | --- | --- |")
    for spec, (rows, width, _), times in zip(args.tiles, tiles, rounds):
        live = space.registers.vectors_needed([rows, width], 4)
        print(f"| {spec} | {live} | {flops / statistics.median(times) / 1e9:.1f} | "
              f"{flops / max(times) / 1e9:.0f}-{flops / min(times) / 1e9:.0f} | "
              f"{numpy_s / statistics.median(times):.3f}x |")
    print(f"| NumPy | - | {flops / numpy_s / 1e9:.1f} | "
          f"{flops / max(rounds[-1]) / 1e9:.0f}-{flops / min(rounds[-1]) / 1e9:.0f} | 1.000x |")


if __name__ == "__main__":
    main()
