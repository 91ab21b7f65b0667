"""The GPU suite: the device tests, then tuning through the command line against cuBLAS.

    bash bench/gpu_suite.sh                 # on a GPU machine: <= 9 minutes
    bash bench/gpu_suite.sh --quick         # fewer trials: <= 4 minutes
    bash bench/gpu_suite.sh --dry-run       # no GPU: the same rows on the simulated device
    bash bench/gpu_suite.sh --out results/  # where the table, the logs and the database go
    bash bench/gpu_suite.sh --only matmul_fp32 dense_fp32

What one run does:

1. ``pytest -m gpu tests/gpu`` (kernels, the CUDA runner, the command line on the device);
2. for each row, ``autotune <op> ... --target cuda --trials N --db OUT/gpu_suite.db``, the
   real command, whose final timing times the fastest configs in interleaved rounds with
   cuBLAS (``cupy.matmul``, CUDA events, L2 flushed) in the same measuring process;
3. a table of the final figures (read back from the database: the "final" run's best
   GFLOP/s and its anchor's), written to OUT/gpu_suite.md, each command's output to
   OUT/<row>.log;
4. the cost model's held-out pairwise ranking accuracy on the run's records
   (``bench/model_quality.py --target cuda``), appended to the table.

With ``--dry-run`` (no GPU) each row runs on the simulated device (``--simulate``) at a
small shape: the same commands and database, times from a model, no GFLOP/s.
The float16 rows run on CUDA cores: the space has no tensor-core (wmma) sketch yet, while
cuBLAS uses tensor cores, so those ratios show how far that gap is. conv2d (N=32, vs
cuDNN) is not a row yet: CuPy's cuDNN path is not an anchor here.
A row that fails (no trial succeeded, say) is listed as such, not hidden.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Row:
    name: str
    what: str
    args: tuple[str, ...]          # the op and its shape options on the GPU
    small: tuple[str, ...]         # the same op at a shape the emulator runs (--dry-run)
    trials: int
    quick_trials: int


#: float16 inputs and result, summed in float32: what cuBLAS computes for float16 products.
FP16_SUM32 = ("--dtype", "float16", "--acc-dtype", "float32")

ROWS = (
    Row("matmul_fp32", "matmul 4096^3 fp32 (SIMT)",
        ("matmul", "-M", "4096", "-N", "4096", "-K", "4096"), ("matmul", "-M", "64", "-N", "64", "-K", "64"),
        256, 96),
    Row("matmul_fp16", "matmul 4096^3 fp16 -> fp32",
        ("matmul", "-M", "4096", "-N", "4096", "-K", "4096", "--dtype", "float16", "--out-dtype", "float32"),
        ("matmul", "-M", "64", "-N", "64", "-K", "64", "--dtype", "float16", "--out-dtype", "float32"), 128, 48),
    Row("dense_fp16", "dense 4096x4096x4096 + bias + relu fp16, fp32 sum (cuBLAS + CuPy epilogue)",
        ("dense", "-M", "4096", "-N", "4096", "-K", "4096", "--bias", "--relu", *FP16_SUM32),
        ("dense", "-M", "64", "-N", "64", "-K", "64", "--bias", "--relu", *FP16_SUM32), 96, 32),
    Row("batch_matmul_fp16", "batch_matmul 32x512x512x64 fp16, fp32 sum",
        ("batch_matmul", "-B", "32", "-M", "512", "-N", "512", "-K", "64", *FP16_SUM32),
        ("batch_matmul", "-B", "2", "-M", "32", "-N", "32", "-K", "16", *FP16_SUM32), 96, 32),
    Row("skinny_fp16", "matmul 16x8192x8192 fp16, fp32 sum",
        ("matmul", "-M", "16", "-N", "8192", "-K", "8192", *FP16_SUM32),
        ("matmul", "-M", "4", "-N", "128", "-K", "128", *FP16_SUM32), 96, 32),
    Row("dense_fp32", "dense 4096x4096x4096 + bias + relu fp32 (cuBLAS + CuPy epilogue)",
        ("dense", "-M", "4096", "-N", "4096", "-K", "4096", "--bias", "--relu"),
        ("dense", "-M", "64", "-N", "64", "-K", "64", "--bias", "--relu"), 96, 32),
)
def run_tests(out: Path) -> str:
    print("== pytest -m gpu tests/gpu", flush=True)
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-m", "gpu", "tests/gpu", "-p", "no:cacheprovider"],
                          cwd=ROOT, capture_output=True, text=True)
    (out / "gpu_tests.log").write_text(proc.stdout + proc.stderr)
    summary = (proc.stdout.strip().splitlines() or ["(no output)"])[-1]
    print(proc.stdout[-3000:] if proc.returncode else summary, flush=True)
    return summary


def tune_row(row: Row, out: Path, db: Path, trials: int, dry_run: bool) -> dict:
    args = list(row.small if dry_run else row.args)
    target = ["--target", "cuda", "--simulate"] if dry_run else ["--target", "cuda"]
    cmd = [sys.executable, "-m", "autotune.cli", *args, *target, "--trials", str(trials), "--db", str(db),
           "--final", "3", "--no-progress"]
    print(f"== {row.name}: autotune {' '.join(cmd[3:])}", flush=True)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=out, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    (out / f"{row.name}.log").write_text(f"$ {' '.join(cmd)}\n{proc.stdout}\n{proc.stderr}")
    result = {"row": row.name, "what": row.what, "trials": trials, "wall_s": round(wall, 1), "rc": proc.returncode}
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or proc.stdout.strip().splitlines() or ["?"])[-1]
        result["failed"] = last[:300]
        print(f"   failed ({wall:.0f} s): {last[:300]}", flush=True)
        return result
    result.update(_final_figures(db, args[0]))
    for line in proc.stdout.splitlines():
        if line.startswith(("best:", "anchor:", "trials:")):
            print("   " + line, flush=True)
    return result


def _final_figures(db: Path, op: str) -> dict:
    """The newest final-timing run's best GFLOP/s and cuBLAS's, from the database."""
    proc = subprocess.run([sys.executable, "-m", "autotune.cli", "log", "runs", "--json", "--db", str(db)],
                          cwd=ROOT, capture_output=True, text=True)
    runs = [r for r in json.loads(proc.stdout or "[]") if r["tuner"] == "final"]
    if not runs:
        return {}
    final = runs[-1]
    ours, anchor = final.get("best_gflops"), final.get("anchor_gflops")
    return {"gflops": ours, "cublas_gflops": anchor,
            "ratio": (ours / anchor) if ours and anchor else None}


def table(results: list[dict], tests: str, dry_run: bool) -> str:
    lines = ["| workload | trials | ours GFLOP/s | cuBLAS GFLOP/s | ratio | wall |",
             "| --- | --- | --- | --- | --- | --- |"]
    for r in results:
        if "failed" in r:
            lines.append(f"| {r['what']} | {r['trials']} | failed: {r['failed']} | | | {r['wall_s']} s |")
            continue
        fmt = lambda v: "-" if v is None else f"{v:,.0f}"  # noqa: E731
        ratio = "-" if r.get("ratio") is None else f"{r['ratio']:.2f}x"
        lines.append(f"| {r['what']} | {r['trials']} | {fmt(r.get('gflops'))} | {fmt(r.get('cublas_gflops'))} | "
                     f"{ratio} | {r['wall_s']} s |")
    head = "SIMULATED (--dry-run): no speed is measured\n\n" if dry_run else ""
    return f"{head}gpu tests: {tests}\n\n" + "\n".join(lines) + "\n"


def model_quality(db: Path, kind: str) -> str:
    """The cost model's held-out ranking accuracy on this run's records (bench/model_quality.py)."""
    proc = subprocess.run([sys.executable, "bench/model_quality.py", "--db", str(db), "--target", kind],
                          cwd=ROOT, capture_output=True, text=True)
    return f"cost model on these records (bench/model_quality.py --target {kind}):\n\n" + \
        "\n".join("    " + line for line in (proc.stdout + proc.stderr[-500:]).splitlines()) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="fewer trials per row (about 4 minutes on an H200)")
    ap.add_argument("--dry-run", action="store_true", help="no GPU: small shapes on the simulated device")
    ap.add_argument("--out", type=Path, default=Path("gpu_suite_out"), help="folder for the table, logs, database")
    ap.add_argument("--only", nargs="+", metavar="ROW", choices=[r.name for r in ROWS], help="run these rows only")
    ap.add_argument("--skip-tests", action="store_true")
    ap.add_argument("--trials", type=int, default=None, help="trials per row (overrides the row's)")
    args = ap.parse_args()
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    db = out / "gpu_suite.db"
    os.environ.setdefault("AUTOTUNE_CACHE_DIR", str(out / "kernel-cache"))
    tests = "skipped" if args.skip_tests or args.dry_run else run_tests(out)
    results = []
    for row in ROWS:
        if args.only and row.name not in args.only:
            continue
        trials = args.trials or (row.quick_trials if args.quick or args.dry_run else row.trials)
        results.append(tune_row(row, out, db, trials, args.dry_run))
    text = table(results, tests, args.dry_run) + "\n" + model_quality(db, "cuda_sim" if args.dry_run else "cuda")
    (out / "gpu_suite.md").write_text(text)
    (out / "gpu_suite.json").write_text(json.dumps(results, indent=1))
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
