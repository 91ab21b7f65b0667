"""Long reductions with few results: the ``rfactor`` algorithm against the DAG as written.

    python bench/rfactor.py                              # softmax of one row of 262144, 150 trials
    python bench/rfactor.py --shape 2 1048576 --trials 200

Runs ``autotune softmax --shape ...`` (the space holds both algorithms, so one run
measures both), then re-times the run's best ``direct`` config and its best ``rfactor``
config alternately with NumPy composed in a fresh process (``bench/algorithms.py``). The
table gives each one's GFLOP/s and ratio to NumPy, and rfactor over direct.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "bench")]

from algorithms import measure, print_table  # noqa: E402
from anchor import blas_description, reexec_without_blas_overrides  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shape", type=int, nargs="+", default=[1, 262144])
    parser.add_argument("--trials", type=int, default=150)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    reexec_without_blas_overrides()
    print(blas_description())
    cli_ratio, best, wall, got = measure("softmax", dict(shape=args.shape), args.trials, args.seed)
    shape = "x".join(map(str, args.shape))
    print(f"softmax {shape}, {args.trials} trials, seed {args.seed}: the CLI printed {best:.2f} GFLOP/s, "
          f"ratio {cli_ratio:.2f}x NumPy composed ({wall:.0f} s)")
    print_table(got, ["direct", "rfactor"])
    if "direct" in got and "rfactor" in got:
        print(f"rfactor over direct, re-timed: {got['rfactor']['gflops'] / got['direct']['gflops']:.2f}x")


if __name__ == "__main__":
    main()
