"""The plot of ``autotune log history RUN --plot FILE``: best-so-far GFLOP/s per trial.

The file's suffix picks the format (``.png``, ``.svg``, ``.pdf``; anything else is a
usage error before the database is opened), so the bytes always match the name. The
figure uses constrained layout, the title is wrapped to the figure's width (workload
keys are long), and the legend sits outside the axes so it never hides a point; saving
with a tight bounding box keeps all of it in the file.

A ``matplotlib.figure.Figure`` is made directly (no pyplot): no global figure state,
no GUI backend chosen behind the caller's back.
"""
from __future__ import annotations

import textwrap
from pathlib import Path

import click

PLOT_FORMATS = ("png", "svg", "pdf")
#: Characters per title line at the figure's width and the title's font size.
_TITLE_WIDTH = 80


def plot_format(path: str) -> str:
    """The format named by ``path``'s suffix; ValueError for a suffix matplotlib should not guess."""
    suffix = Path(path).suffix.lower().lstrip(".")
    if suffix not in PLOT_FORMATS:
        raise ValueError(f"{path}: end the file name in {', '.join('.' + f for f in PLOT_FORMATS)} "
                         f"(the suffix picks the format)")
    return suffix


def check_plot_path(ctx, param, value: str | None) -> str | None:
    """A click callback: a ``--plot`` file name with an unknown suffix is a usage error."""
    if value is not None:
        try:
            plot_format(value)
        except ValueError as exc:
            raise click.BadParameter(str(exc)) from None
    return value


def history_figure(run, records, curve):
    """The figure: each ok trial's GFLOP/s as a dot, the best so far as a step line.

    ``run`` is a ``RunInfo``, ``records`` its records in trial order and ``curve`` the
    ``(trial, best)`` pairs of ``Database.best_so_far`` (a resumed run's curve starts at
    the best stored before it).
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(8, 4.5), dpi=100, layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    ok = [(r.trial, r.gflops) for r in records if r.gflops is not None]
    if ok:
        ax.scatter(*zip(*ok), s=8, color="0.6", label="trial", zorder=2)
    steps = [(t, b) for t, b in curve if b is not None]
    if steps:
        label = "best so far (incl. stored before)" if run.baseline_gflops is not None else "best so far"
        ax.step(*zip(*steps), where="post", color="C0", label=label, zorder=3)
    ax.set_xlabel("trial")
    ax.set_ylabel("GFLOP/s")
    title = f"run {run.id}: {run.workload_key} on {run.target.describe()} ({run.tuner})"
    ax.set_title(textwrap.fill(title, _TITLE_WIDTH), fontsize=9)
    ax.grid(alpha=0.3)
    if ok or steps:
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0, fontsize=8)
    return fig


def save_figure(fig, path: str) -> None:
    """Write ``fig`` to ``path`` in the format its suffix names; a one-line error if it cannot."""
    try:
        fig.savefig(path, format=plot_format(path), bbox_inches="tight")
    except OSError as exc:
        raise click.ClickException(f"cannot write {path}: {exc.strerror or exc}") from None
