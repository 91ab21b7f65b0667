"""What a tuning command shows: the progress bar while it runs, the summary at the end.

The bar (tqdm, on stderr so stdout stays the report) is driven by a ``tune`` callback:
one update per measured batch with trials done, best GFLOP/s so far and errors.
"""
from __future__ import annotations

import statistics
import sys

import click
from tqdm import tqdm


class ProgressBar:
    """A ``tune`` callback drawing trials, best GFLOP/s and errors; also remembers the last state."""

    def __init__(self, total: int, enabled: bool | None, description: str, simulated: bool = False):
        enabled = sys.stderr.isatty() if enabled is None else enabled
        self.bar = tqdm(total=total, desc=description, unit="trial", file=sys.stderr, disable=not enabled,
                        dynamic_ncols=True, leave=True)
        self.trials_done = 0
        self.best_gflops: float | None = None
        self.errors = 0
        self.simulated = simulated  # times from a model: shown as simulated milliseconds, never GFLOP/s

    def __call__(self, progress) -> None:
        self.trials_done, self.best_gflops, self.errors = progress.trials_done, progress.best_gflops, progress.errors
        if self.simulated:
            best = "-" if progress.best_cost is None else f"{progress.best_cost * 1e3:.4g} ms"
            self.bar.set_postfix_str(f"best simulated {best}, errors {progress.errors}", refresh=False)
        else:
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


def explain_config(task, config) -> tuple[list[str], list[str]]:
    """(decisions, lowered): what ``config`` asks of ``task``'s schedule (``describe_config``)
    and what the code lowered from it does (``schedule.describe_lowered``), as lines.

    Only the lowered lines may say what runs in parallel: a decision such as "2 outer
    loops in parallel" has no effect when those loops have one iteration. A config that
    no longer applies (a record of another tool version) gives the reason as its lines."""
    from schedule import describe_lowered

    try:
        decisions = task.space.describe_config(config).splitlines()
    except (ValueError, KeyError, TypeError) as exc:
        decisions = [f"cannot read the decisions of this config: {exc}"]
    try:
        dialect = _dialect(task)
        lowered = describe_lowered(task.lower(config), getattr(dialect, "loop_pragmas", None),
                                   getattr(dialect, "prints_vector_variables", None)).splitlines()
    except (ValueError, KeyError, TypeError) as exc:
        lowered = [f"cannot lower this config: {exc}"]
    return decisions, lowered


def _dialect(task):
    """The C dialect ``task``'s backend prints loops with, so that the description follows
    that backend (None: a backend without one, such as cuda's)."""
    from backends import backend_for

    return getattr(backend_for(task.target), "target_dialect", None)


def explain_record(record, db=None) -> tuple[list[str], list[str]]:
    """``explain_config`` for a stored record (its task as ``Task.of_record`` rebuilds it, from
    ``db``'s stored DAG if need be, and its config); no decisions and the reason as the
    lowered lines when the task or config cannot be rebuilt."""
    from schedule.config import Config

    from ..task import Task

    try:
        task = Task.of_record(record, db)
        config = Config.from_json(record.config)
    except (ValueError, KeyError, TypeError) as exc:
        return [], [f"cannot rebuild this record's task or config: {exc}"]
    return explain_config(task, config)


def peak_lines(peak, best_gflops: float) -> list[str]:
    """The report's lines on the machine's measured peak (an ``autotune.peak.Peak``) and the
    best kernel's share of it, with a warning where the reading cannot be trusted."""
    share = peak.share(best_gflops)
    lines = [f"peak:     {peak.describe()}; the best is {100 * share:.0f} % of it"]
    if peak.busy:
        lines.append(f"          warning: the machine was busy while the peak was read (its threads had "
                     f"{100 * peak.cpu_share:.0f} % of their cores), so it reads low")
    if share > 1.0:  # no kernel outruns the FMA loop at the same FLOP count
        lines.append("          above the peak: the kernel skips work the FLOP count includes (a convolution's "
                     "padding taps; Winograd's products, counted as the direct convolution's), or the machine was "
                     "busy while the peak was read")
    return lines


def _block(label: str, lines: list[str]) -> list[str]:
    """``lines`` under a report label: the first beside it, the rest aligned below."""
    return [(label if n == 0 else "").ljust(10) + line for n, line in enumerate(lines)]


def summary_lines(task, target, result, db, anchor: dict, picked: str | None = None) -> list[str]:
    """The end-of-run report: best config, its speed, its decisions and what its lowered code
    does, the anchor's speed, the database, the time split.

    ``picked``: how ``--target auto`` chose the target (``autotune.targets.resolve``'s note).
    """
    from .. import targets

    history = result.history
    errors = sum(not t.result.ok for t in history)
    simulated = targets.is_simulated(task.target)
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
    final = result.final if result.final is not None and result.final.winner is not None else None
    if best is None:
        lines.append("best:     no trial succeeded (see `autotune log errors`)")
    elif simulated:
        lines.append(f"best:     simulated {_ms(result.best_cost)} per launch, trial {best.index}, config "
                     f"{best.config.hash}")
        lines.append("          SIMULATED: the emulator checked every kernel, an analytic model gave the times; "
                     "they are not a measurement, and no speed is derived from them")
    elif final is not None:
        searched = result.search_best
        lines.append(f"best:     {_gflops(result.best_gflops)} GFLOP/s ({_ms(result.best_cost)}), config "
                     f"{best.config.hash} (trial {best.index}): the final timing's median of {_rounds(final)}")
        lines.append(f"          the search's best reading: {_gflops(searched.result.gflops(task.flops))} GFLOP/s, "
                     f"trial {searched.index}")
        lines += _final_lines(final)
    else:
        lines.append(f"best:     {_gflops(result.best_gflops)} GFLOP/s ({_ms(best.result.median_s)}), "
                     f"trial {best.index}, config {best.config.hash}")
        if result.final_note:
            lines.append(f"          {result.final_note}")
    if best is not None:
        decisions, lowered = explain_config(task, best.config)
        lines.append("          decisions (what the config asks for):")
        lines += ["            " + line for line in decisions]
        lines += _block("lowered:", lowered)
    if simulated:
        pass  # nothing to compare a model's time with
    elif final is not None and final.anchor_cost:
        lines.append(f"anchor:   {final.anchor_name} {_gflops(final.anchor_gflops)} GFLOP/s; ratio "
                     f"{final.ratio(final.winner):.3g}x (the median of the two's ratio in each of the final "
                     f"timing's {_rounds(final)})")
        lines += _interval_lines(final)
        if anchor.get("before") is not None:
            lines.append(f"          before tuning: {_gflops(anchor['before'])} GFLOP/s (its fastest round)")
        if anchor.get("warning"):
            lines.append(f"          warning: {anchor['warning']}")
        if anchor.get("blas"):
            lines.append(f"          BLAS {anchor['blas']}")
    elif anchor.get("gflops") is None:
        lines.append(f"anchor:   {anchor.get('why', 'no anchor')}")
    else:
        ratio = f"; ratio {result.best_gflops / anchor['gflops']:.3g}x" if best is not None else ""
        lines.append(f"anchor:   {anchor['name']} {_gflops(anchor['gflops'])} GFLOP/s{ratio}")
        if anchor.get("before") is not None:
            lines.append(f"          timed like the candidates ({anchor['rounds']} round(s)): before tuning "
                         f"{_gflops(anchor['before'])}, after {_gflops(anchor['after'])} GFLOP/s")
        if anchor.get("warning"):
            lines.append(f"          warning: {anchor['warning']}")
        if anchor.get("blas"):
            lines.append(f"          BLAS {anchor['blas']}")
    if anchor.get("peak") is not None and result.best_gflops:
        lines += peak_lines(anchor["peak"], result.best_gflops)
    t = result.timings
    lines.append(
        "time:     " + ", ".join(f"{name} {t.get(key, 0.0):.1f} s" for name, key in (
            ("build", "build_s"), ("run", "run_s"), ("model", "model_s"), ("search", "search_s"),
            ("database", "db_s"), ("total", "total_s")))
    )
    return lines


def _interval_lines(final) -> list[str]:
    """The winner's ratio interval, and a warning when it is too wide for the ratio to be
    reproduced within ``RATIO_TOLERANCE``."""
    from autotune.final_timing import RATIO_CONFIDENCE, RATIO_TOLERANCE

    winner = final.winner
    interval = final.ratio_interval(winner)
    lines = []
    if interval is not None:
        lines.append(f"          {RATIO_CONFIDENCE:.0%} interval of the ratio: {interval[0]:.3g}-{interval[1]:.3g}x "
                     f"(from the rounds' ratios; a re-timing is expected inside it)")
    if final.ratio_uncertain(winner):
        why = ("too few rounds for an interval" if interval is None else
               f"the rounds disagree by more than {RATIO_TOLERANCE:.0%} to either side")
        lines.append(f"          warning: {why}: a re-timing may differ from this ratio by more than "
                     f"{RATIO_TOLERANCE:.0%} (the machine's speed moved while it was timed; time again "
                     f"on a quieter machine)")
    return lines


def _rounds(final) -> str:
    """How many rounds give the winner's figure, and whether they confirmed it."""
    n = len(final.rounds_of(final.winner)) if final.winner is not None else 0
    again = " (timed again after it led)" if final.winner in final.confirmed else ""
    return f"{n} interleaved round{'s' if n != 1 else ''}{again}"


def _final_lines(final) -> list[str]:
    """One line per config of the final timing: its search reading, its final figure."""
    lines = []
    for i, config in enumerate(final.configs):
        searched = _gflops(final.flops / final.search_costs[i] / 1e9)
        if final.costs[i] is None:
            now = f"failed: {final.errors.get(i, 'no timing')}"
        else:
            ratio = final.ratio(i)
            now = f"{_gflops(final.gflops(i))} GFLOP/s" + (f" ({ratio:.3g}x the anchor)" if ratio else "")
            if i in final.confirmed:
                first = statistics.median(final.round_costs[i]) if final.round_costs[i] else None
                now += f", confirmed (first rounds {_gflops(final.flops / first / 1e9)})" if first else ", confirmed"
        mark = "*" if i == final.winner else " "
        lines.append(("final:    " if i == 0 else "          ") + f"{mark} {config.hash}  searching {searched}, now {now}")
    if final.screened:
        lines.append(f"            (chosen from the search's {final.screened} fastest configs by screening rounds)")
    return lines


def print_summary(task, target, result, db, anchor: dict, picked: str | None = None) -> None:
    click.echo("\n".join(summary_lines(task, target, result, db, anchor, picked)))
