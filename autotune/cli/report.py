"""What a tuning command shows: the progress bar while it runs, the summary at the end.

The bar (tqdm, on stderr so stdout stays the report) is driven by a ``tune`` callback:
one update per measured batch with trials done, best GFLOP/s so far and errors.
"""
from __future__ import annotations

import sys

import click
from tqdm import tqdm


class ProgressBar:
    """A ``tune`` callback drawing trials, best GFLOP/s and errors; also remembers the last state."""

    def __init__(self, total: int, enabled: bool | None, description: str):
        enabled = sys.stderr.isatty() if enabled is None else enabled
        self.bar = tqdm(total=total, desc=description, unit="trial", file=sys.stderr, disable=not enabled,
                        dynamic_ncols=True, leave=True)
        self.trials_done = 0
        self.best_gflops: float | None = None
        self.errors = 0

    def __call__(self, progress) -> None:
        self.trials_done, self.best_gflops, self.errors = progress.trials_done, progress.best_gflops, progress.errors
        best = "-" if progress.best_gflops is None else _gflops(progress.best_gflops)
        self.bar.set_postfix_str(f"best {best} GFLOP/s, errors {progress.errors}", refresh=False)
        self.bar.update(progress.trials_done - self.bar.n)

    def close(self) -> None:
        self.bar.close()


def _gflops(value: float) -> str:
    return f"{value:.3g}" if value < 1000 else f"{value:.0f}"


def _ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1e3:.4g} ms"


def _run_part(result, db) -> str:
    """", run 3", and with --resume how many trials this run measured."""
    if result.run_id is None:
        return ""
    new = db.get_run(result.run_id).n_records
    earlier = len(result.history) - new
    return f", run {result.run_id}" + (f": {new} new, {earlier} stored before" if earlier else "")


def summary_lines(task, target, result, db, anchor: dict, picked: str | None = None) -> list[str]:
    """The end-of-run report: best config, its speed, the anchor's, the database, the time split.

    ``picked``: how ``--target auto`` chose the target (``autotune.targets.resolve``'s note).
    """
    history = result.history
    errors = sum(not t.result.ok for t in history)
    lines = [
        f"workload: {task.key}",
        f"target:   {task.target}: {target.describe()}" + (f", {target.compiler}" if target.compiler else ""),
        *([f"          {picked}"] if picked else []),
        f"trials:   {len(history)} ({errors} failed)" + _run_part(result, db),
        f"database: {db.location}",
    ]
    if result.transfer_records:
        lines.append(f"model:    warm-started from {result.transfer_records} records of other {task.workload_name} shapes")
    best = result.best
    if best is None:
        lines.append("best:     no trial succeeded (see `autotune log errors`)")
    else:
        lines.append(f"best:     {_gflops(result.best_gflops)} GFLOP/s ({_ms(best.result.median_s)}), "
                     f"trial {best.index}, config {best.config.hash}")
        lines += ["          " + line for line in task.space.describe_config(best.config).splitlines()]
    if anchor.get("gflops") is None:
        lines.append(f"anchor:   {anchor.get('why', 'no anchor')}")
    else:
        ratio = f"; ratio {result.best_gflops / anchor['gflops']:.3g}x" if best is not None else ""
        lines.append(f"anchor:   {anchor['name']} {_gflops(anchor['gflops'])} GFLOP/s{ratio}")
        if anchor.get("blas"):
            lines.append(f"          BLAS {anchor['blas']}")
    t = result.timings
    lines.append(
        "time:     " + ", ".join(f"{name} {t.get(key, 0.0):.1f} s" for name, key in (
            ("build", "build_s"), ("run", "run_s"), ("model", "model_s"), ("search", "search_s"),
            ("database", "db_s"), ("total", "total_s")))
    )
    return lines


def print_summary(task, target, result, db, anchor: dict, picked: str | None = None) -> None:
    click.echo("\n".join(summary_lines(task, target, result, db, anchor, picked)))
