"""What the convolution decisions are worth, on fixed micro-kernel shapes (no search): each
starting point of a layer's space timed with its padding stored and inlined, with the
register tile vectorized over x and over the output channels, against the measured peak.

    python bench/conv_sketches.py                 # 3x3 64->64 @56^2 and 3x3 512->512 @7^2
    python bench/conv_sketches.py --layer 7x7s2_3to64_224

Each config is built, checked against the te reference, then timed (median of cache-flushed
repeats over at least 0.3 s); the kernel is called with its weights packed beforehand, as
the measuring process does.
"""
from __future__ import annotations

import argparse
import dataclasses
import random
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "bench")]

from anchor import median_seconds  # noqa: E402
from conv_layers import LAYERS  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--layer", nargs="+", default=["3x3_64_56", "3x3_512_7"], choices=sorted(LAYERS))
    parser.add_argument("--points", type=int, default=4, help="starting points per vector axis")
    args = parser.parse_args()

    import numpy as np

    import autotune
    from autotune.peak import measure_cpu_peak
    from autotune.verify import mismatch, reduction_length
    from backends import cpu
    from schedule.decisions import PRODUCERS_INLINE, PRODUCERS_STORED

    peak = measure_cpu_peak(autotune.Task("matmul", dict(M=8, N=8, K=8)).target.facts)
    print(f"# peak {peak.describe()}")
    print("| layer | vectorized | register tile (k x y x x) | padding stored | padding inlined |")
    print("| --- | --- | --- | --- | --- |")
    for name in args.layer:
        task = autotune.Task("conv2d", LAYERS[name], target="cpu")
        space, wl = getattr(task.space, "primary", task.space), task.workload  # the direct convolution's space
        inputs = wl.random_inputs(seed=0)
        (reference,) = wl.reference(*inputs)
        taken: dict[str, int] = {}
        for config in space.starting_points(random.Random(0)):
            d = space.decisions(config)["conv2d"]
            if taken.get(d.vector, 0) >= args.points:
                continue
            taken[d.vector] = taken.get(d.vector, 0) + 1
            cells = []
            for producers in (PRODUCERS_STORED, PRODUCERS_INLINE):
                variant = space.encode(space.decisions(config).replace(dataclasses.replace(d, producers=producers)))
                module = cpu.build(task.lower(variant))
                out = np.full(reference.shape, np.nan, reference.dtype)
                arrays = module.prepare([*inputs, out])
                module.call_unchecked([a.ctypes.data for a in arrays])
                problem = mismatch(out, reference, reduction_length(wl.outputs))
                if problem:
                    raise SystemExit(f"{name} {space.describe_config(variant)}: {problem}")
                pointers = [a.ctypes.data for a in arrays]
                seconds = median_seconds(lambda: module.call_unchecked(pointers), min_time=0.3)
                gflops = task.flops / seconds / 1e9
                cells.append(f"{gflops:.0f} GFLOP/s ({100 * peak.share(gflops):.0f} %)")
            tile = " x ".join(str(d.tile(a)[2]) for a in ("k", "y", "x"))
            print(f"| {name} | {d.vector_tile.axis} | {tile} | {cells[0]} | {cells[1]} |", flush=True)


if __name__ == "__main__":
    main()
