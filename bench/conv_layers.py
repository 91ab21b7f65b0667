"""ResNet-50's convolutions (N=1, fp32, NCHW), tuned through the command line, then re-timed
in a fresh process against the best reference installed and the machine's measured peak.

    python bench/conv_layers.py                       # the six layers, 500 trials each
    python bench/conv_layers.py --trials 200 --only 3x3_64_56
    python bench/conv_layers.py --algorithm conv2d winograd4 --only 3x3_128_28 3x3_256_14
    AUTOTUNE_CONV2D_ANCHOR=numpy python bench/conv_layers.py   # NumPy's im2col as the anchor

Each layer runs ``autotune conv2d ... --trials N --seed S`` into a database of its own. A new
process then opens that database, builds the layer through ``apply_best``
(``autotune.build``) and times it alternately with the anchor (``bench/final_figures.py``'s
protocol: five rounds, the arrays placed anew each round). The anchor is PyTorch's
convolution (oneDNN) where PyTorch is installed (``pip install torch``), else NumPy's
im2col + matmul, a weak baseline. The peak is the FMA throughput of every core, measured in
this process before the first layer and after each one (``autotune.peak``); the highest
reading is the peak (load on the machine only ever lowers a reading), and each row's share
is of the highest so far, the summary's of the highest of all.

``--algorithm`` tunes each layer once per entry: ``conv2d`` (``autotune conv2d``, whose space
chooses between the direct convolution and, for 3x3 stride-1 layers, Winograd's; the
"algorithm" column says which won) or Winograd's F(2, 3) or F(4, 3) alone (``autotune
conv2d_winograd --tile 2|4``; 3x3 stride-1 layers only, the others are skipped). A Winograd
figure counts the direct convolution's FLOPs.

Goals (issue: convolutions at the speed of the best): median >= 70 % of peak over the six,
none below 50 %; >= 0.8x oneDNN median.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "bench")]

from anchor import blas_description, reexec_without_blas_overrides  # noqa: E402
from final_figures import fresh_process_env, retime_in_fresh_process, tune  # noqa: E402

#: name -> conv2d parameters: ResNet-50's distinct convolution shapes at batch 1.
LAYERS = {
    "3x3_64_56": dict(N=1, C=64, H=56, W=56, K=64, R=3, S=3, padding=1),
    "1x1_64to256_56": dict(N=1, C=64, H=56, W=56, K=256, R=1, S=1),
    "3x3_128_28": dict(N=1, C=128, H=28, W=28, K=128, R=3, S=3, padding=1),
    "3x3_256_14": dict(N=1, C=256, H=14, W=14, K=256, R=3, S=3, padding=1),
    "3x3_512_7": dict(N=1, C=512, H=7, W=7, K=512, R=3, S=3, padding=1),
    "7x7s2_3to64_224": dict(N=1, C=3, H=224, W=224, K=64, R=7, S=7, padding=3, stride=2),
}


#: algorithm -> (workload, its parameters from a conv2d layer's, or None where it does not apply).
ALGORITHMS = {
    "conv2d": lambda p: ("conv2d", p),
    "winograd2": lambda p: _winograd(p, 2),
    "winograd4": lambda p: _winograd(p, 4),
}


def _winograd(params: dict, tile: int):
    if (params["R"], params["S"], params.get("stride", 1)) != (3, 3, 1):
        return None
    kept = {k: params[k] for k in ("N", "C", "H", "W", "K", "padding")}
    return "conv2d_winograd", dict(kept, tile=tile)


def winning_algorithm(op: str, params: dict, db: Path) -> str:
    """How the stored best of ``op`` computes it (``schedule.alternatives``)."""
    import autotune
    import tuning_db
    from autotune.dispatch import best_config

    task = autotune.Task(op, params, target="cpu")
    with tuning_db.Database(db, create=False) as opened:
        config, _ = best_config(task, opened)
    if op == "conv2d_winograd":
        return f"winograd{params['tile']}"
    return task.space.algorithm(config) if hasattr(task.space, "algorithm") else "direct"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=500)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--only", nargs="+", choices=sorted(LAYERS), help="these layers only")
    parser.add_argument("--keep", type=Path, help="keep each layer's database in this folder")
    parser.add_argument("--algorithm", nargs="+", choices=sorted(ALGORITHMS), default=["conv2d"],
                        help="how each layer is computed (several: one row per layer and algorithm)")
    args = parser.parse_args()
    reexec_without_blas_overrides()

    from autotune.anchor import conv2d_anchor_name
    from autotune.peak import measure_cpu_peak
    from schedule.targets.cpu import host_cpu_facts

    facts = host_cpu_facts()
    peak = measure_cpu_peak(facts)
    print(f"# ResNet-50 conv2d layers, N=1 fp32 NCHW, {args.trials} trials each, seed {args.seed}")
    print(f"# CPU: {facts.model}, {facts.isa}, {facts.cores} cores; peak {peak.describe()}")
    print(f"# anchor: {conv2d_anchor_name()}; NumPy: {blas_description()}")
    env = fresh_process_env()
    print("| layer | algorithm | CLI GFLOP/s (ours / anchor) | re-timed GFLOP/s (ours / anchor) | ours, "
          "slowest-fastest round | % of peak | vs anchor | tuning wall |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    figures, ratios = [], []
    names = args.only or list(LAYERS)
    with tempfile.TemporaryDirectory() as tmp:
        folder = args.keep or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        for name, algorithm in [(n, a) for n in names for a in args.algorithm]:
            workload = ALGORITHMS[algorithm](LAYERS[name])
            if workload is None:
                print(f"| {name} | {algorithm}: not a 3x3 stride-1 layer | | | | | | |")
                continue
            op, params = workload
            if len(args.algorithm) > 1:
                name = f"{name} {algorithm}"
            db = folder / f"{name.replace(' ', '_')}.db"
            _, cli_ours, cli_anchor, wall, _ = tune(op, params, args.trials, args.seed, 5, db, env)
            ours, theirs, ratio, slowest, fastest, *_ = retime_in_fresh_process(op, params, db, env)
            won = winning_algorithm(op, params, db)
            again = measure_cpu_peak(facts)
            peak = again if again.gflops > peak.gflops else peak
            share = ours / peak.gflops
            figures.append(ours)
            ratios.append(ratio)
            print(f"| {name} | {won} | {cli_ours:.1f} / {cli_anchor:.1f} | {ours:.1f} / {theirs:.1f} | "
                  f"{slowest:.0f}-{fastest:.0f} | {100 * share:.0f} % | {ratio:.2f}x | {wall:.0f} s |", flush=True)
    shares = [ours / peak.gflops for ours in figures]
    print(f"peak (highest reading): {peak.describe()}")
    print(f"% of peak: median {100 * statistics.median(shares):.0f} %, lowest {100 * min(shares):.0f} % "
          f"(goal: median >= 70 %, none below 50 %)")
    print(f"vs {conv2d_anchor_name()}: median {statistics.median(ratios):.2f}x (goal >= 0.8x oneDNN)")


if __name__ == "__main__":
    main()
