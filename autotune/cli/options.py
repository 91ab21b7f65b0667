"""Shared options and parameter types of the command line.

Options used by more than one command are decorators here (``db_option``,
``workload_option``, ``target_kind_option``, ``json_option``, ``tuning_options``), so each
command lists its own options, no parameter list is copied, and every command spells a
workload ``--workload KEY``, a target ``--target`` and JSON output ``--json``. Values the
library checks itself (workload parameters) are passed through and its one-line errors
shown; values only the command line knows about (``--trials``, ``--target``) are checked
here with click's types, so a bad one is a usage error.
"""
from __future__ import annotations

import functools
from typing import Callable

import click

# ---------------------------------------------------------------- parameter types


class IntList(click.ParamType):
    """A comma-separated list of ints: ``128,1024`` -> [128, 1024]."""

    name = "INT,INT,..."

    def convert(self, value, param, ctx):
        if isinstance(value, (list, tuple)):
            return list(value)
        try:
            items = [int(v) for v in str(value).replace(" ", "").split(",")]
        except ValueError:
            self.fail(f"{value!r} is not a comma-separated list of ints", param, ctx)
        return items


class IntOrPair(click.ParamType):
    """An int, or two comma-separated ints for (height, width): ``2`` or ``2,1``."""

    name = "INT|H,W"
    #: How many ints a list may hold, and what the error says they mean.
    lengths = (2,)
    expected = "one int or two comma-separated ints (H,W)"

    def convert(self, value, param, ctx):
        if isinstance(value, (int, list)):
            return value
        items = IntList().convert(value, param, ctx)
        if len(items) == 1:
            return items[0]
        if len(items) not in self.lengths:
            self.fail(f"{value!r} must be {self.expected}", param, ctx)
        return items


class Padding(IntOrPair):
    """Padding of a 2-d window: an int, ``H,W`` or the four sides ``TOP,LEFT,BOTTOM,RIGHT``."""

    name = "INT|H,W|T,L,B,R"
    lengths = (2, 4)
    expected = "one int, two (H,W) or four (TOP,LEFT,BOTTOM,RIGHT) comma-separated ints"


POSITIVE_INT = click.IntRange(min=1)
POSITIVE_FLOAT = click.FloatRange(min=0.0, min_open=True)

# ---------------------------------------------------------------- the database


def db_option(fn: Callable) -> Callable:
    """``--db URL-or-path``; the library resolves the default ($AUTOTUNE_DB, then the cache dir)."""
    return click.option(
        "--db", "db_url", metavar="URL|PATH", default=None,
        help="Tuning database: a SQLAlchemy URL or a SQLite file path. "
             "Default: $AUTOTUNE_DB, else $XDG_CACHE_HOME/autotune/tuning.db (~/.cache/autotune/tuning.db).",
    )(fn)


def workload_option(help_text: str) -> Callable:
    """``--workload KEY``, the one way every command names a workload (``resolve_workload``'s rules)."""
    return click.option("--workload", "workload", metavar="KEY", default=None, help=help_text)


def target_kind_option(help_text: str) -> Callable:
    """``--target KIND``, the one way every command that reads records narrows them to a target kind."""
    return click.option("--target", "target", type=TargetKindParam(), default=None, help=help_text)


def json_flag(help_text: str) -> Callable:
    """``--json``: print one JSON document on stdout instead of text."""
    return click.option("--json", "as_json", is_flag=True, help=help_text)


#: ``--json`` of the commands that print tables.
json_option = json_flag("Print one JSON document (keys: the table's headers in snake_case) "
                        "instead of the table.")


class LegacyArgument(click.Argument):
    """A positional argument old scripts still pass, left out of the usage line: the option
    that replaced it is the documented form."""

    def get_usage_pieces(self, ctx: click.Context) -> list[str]:
        return []


def one_workload_text(option: str | None, positional: str | None) -> str | None:
    """The workload named by ``--workload`` or by the legacy positional KEY; a usage error
    when both are given and say different things."""
    if option is not None and positional is not None and option != positional:
        raise click.UsageError(f"the workload is given twice, as KEY {positional!r} and as --workload {option!r}; "
                               f"give it once, with --workload")
    return option if option is not None else positional


def open_db(db_url: str | None, create: bool = True):
    """Open the ``tuning_db.Database`` (a ``DatabaseError`` becomes a one-line ``Error:`` in ``main``).

    Commands that only read pass ``create=False``: a database that does not exist is then
    an error naming it, and no file or folder is created.
    """
    import tuning_db  # here, not at the top: SQLAlchemy takes a while to import

    return tuning_db.Database(db_url, create=create)


def resolve_workload(db, text: str) -> str:
    """The workload key ``text`` names: the exact key, else the only workload of op ``text``,
    else the only key starting with ``text``; a click error saying why otherwise."""
    keys = [w.key for w in db.list_workloads()]
    if text in keys:
        return text
    by_name = [k for k in keys if k.split("{", 1)[0] == text]
    matches = by_name or [k for k in keys if k.startswith(text)]
    if len(matches) == 1:
        return matches[0]
    if not matches:
        raise click.ClickException(f"no workload {text!r} in {db.location} (see `autotune log workloads`)")
    raise click.ClickException(f"{text!r} matches several workloads: {short_list(matches)}; give more of the key")


def only_workload(db, target: str | None, doing: str) -> str:
    """The one workload with records (on ``target``), for commands whose ``--workload`` may be
    left out; a click error saying there is none, or listing them, otherwise. ``doing`` ends
    the "no records to ..." message ("replay", "rank")."""
    keys = [w.key for w in db.list_workloads(target) if w.n_records]
    if len(keys) == 1:
        return keys[0]
    if not keys:
        on = f" on {target}" if target else ""
        raise click.ClickException(f"no records{on} to {doing} in {db.location}")
    raise click.ClickException(f"{len(keys)} workloads in {db.location} ({short_list(keys)}); "
                               f"choose one with --workload")


def pick_workload(db, text: str | None, target: str | None, doing: str) -> str:
    """The workload ``text`` names (``resolve_workload``), or with none given the only one there is."""
    return resolve_workload(db, text) if text else only_workload(db, target, doing)


def short_list(keys: list[str], show: int = 5) -> str:
    """The first ``show`` of ``keys``, comma-separated, with the total when some are left out."""
    return ", ".join(keys[:show]) + (f", ... ({len(keys)} in all)" if len(keys) > show else "")


# ---------------------------------------------------------------- targets


def gpu_available() -> bool:
    """Whether CuPy finds a CUDA device (``backends.cuda``'s check, imported only when asked)."""
    from backends.cuda import gpu_available as cuda_gpu_available

    return cuda_gpu_available()


class TargetSpec(click.ParamType):
    """``auto`` or a target spec of the registry (``cpu``, ``cpu:avx2``, ``cuda:sm_80``, ...)."""

    name = "auto|KIND[:PRESET]"

    def convert(self, value, param, ctx):
        from schedule.targets import TargetError, parse_target

        if str(value).strip().lower() == "auto":
            return "auto"
        try:
            return str(parse_target(value))
        except TargetError as exc:
            self.fail(f"{exc} (or auto)", param, ctx)


class TargetKindParam(click.ParamType):
    """A target kind as the database stores it (``cpu``); a full spec names its kind."""

    name = "KIND"

    def convert(self, value, param, ctx):
        from tuning_db import check_target_kind

        try:
            return check_target_kind(str(value).partition(":")[0])
        except ValueError as exc:
            self.fail(str(exc), param, ctx)


#: What ``--target auto`` picks, as ``autotune.targets.resolve("auto")`` does it: the
#: highest-ranked kind the tuning loop can measure on here.
AUTO_TARGET_HELP = "auto picks cuda where CuPy sees a GPU, else cpu."


def target_spec_option(doing: str) -> Callable:
    """``--target auto|KIND[:PRESET]`` of the commands that measure, checked by ``choose_target``."""
    return click.option(
        "--target", "target", type=TargetSpec(), default="auto", show_default=True, callback=choose_target,
        help=f"Target to {doing}: a kind with an optional preset (cpu, cpu:avx2, cuda:sm_80, ...); "
             f"{AUTO_TARGET_HELP}")


def choose_target(ctx: click.Context, param: click.Parameter, value: str) -> str:
    """Refuse a target the tuning loop cannot measure on here (``autotune.targets``);
    ``auto`` is resolved when the run starts, which then says what it picked. Printing
    the lowering passes measures nothing, so any target may be printed."""
    from ..targets import measure_problem, simulated_counterpart

    if ctx.params.get("simulate"):
        try:
            value = str(simulated_counterpart("cuda" if value == "auto" else value))
        except ValueError as exc:
            raise click.BadParameter(str(exc), ctx, param) from None
    if value == "auto" or ctx.params.get("print_passes") or ctx.params.get("cluster"):
        return value  # the cluster's CPUs run the kernels; each node's runner refuses what it cannot run

    try:
        problem = measure_problem(value)
    except ValueError as exc:  # a kind without tuning parts
        raise click.BadParameter(str(exc), ctx, param) from None
    if problem is not None:
        raise click.BadParameter(problem, ctx, param)
    return value


# ---------------------------------------------------------------- tuning options

TUNERS = ("xgb", "ga", "random", "grid")


def tuning_options(fn: Callable) -> Callable:
    """The options every op command shares: how long and how to tune, where to store it."""
    decorators = [
        click.option("--trials", type=POSITIVE_INT, default=1000, show_default=True,
                     help="Measurements to make (with --resume: in total, stored ones included)."),
        target_spec_option("tune for"),
        click.option("--tuner", type=click.Choice(TUNERS), default="xgb", show_default=True,
                     help="Search: XGBoost cost model, genetic, random or grid."),
        db_option,
        click.option("--seed", type=int, default=0, show_default=True, help="Seed of the search and the inputs."),
        click.option("--timeout", type=POSITIVE_FLOAT, default=10.0, show_default=True,
                     help="Seconds one candidate may run before it counts as a timeout."),
        click.option("--rounds", type=POSITIVE_INT, default=1, show_default=True,
                     help="Measuring rounds per batch; with more than 1, each candidate near the best "
                          "keeps its fastest round (where a neighbour's slow-downs outlast one "
                          "measurement: 3 on a busy shared machine). The final timing re-times the "
                          "leaders either way."),
        click.option("--final", "final", type=click.IntRange(min=0), default=5, show_default=True, metavar="N",
                     help="At the end, time the N fastest configs again, in interleaved rounds with the "
                          "anchor (the N fastest of the search's 3N fastest, by two screening rounds); the "
                          "winner by that timing is reported and stored, and apply_best uses it. 0: report "
                          "the best reading of the search."),
        click.option("--resume", is_flag=True,
                     help="Continue from the records stored for this workload and target."),
        click.option("--share/--no-share", default=True, show_default=True,
                     help="Skip configs other runs measured on this device (stored before, or by other "
                          "processes meanwhile); the tuner learns from them instead."),
        click.option("--cluster", metavar="ADDRESS", default=None, is_eager=True,  # read before --target's check
                     help="Build and measure on a Ray cluster: auto (the one this machine joined), "
                          "HOST:PORT of its head, or ray://HOST:PORT. Needs the distributed extra."),
        click.option("--early-stopping", type=POSITIVE_INT, default=None, metavar="N",
                     help="Stop after N trials without improvement."),
        click.option("--batch-size", type=POSITIVE_INT, default=64, show_default=True,
                     help="Candidates proposed, built and measured per step (the xgb tuner uses at most "
                          "32 for its first 256 trials, so its model retrains more often early on)."),
        click.option("--transfer", is_flag=True,
                     help="xgb: warm-start the cost model from stored records of other shapes of this op "
                          "on this target; the first batch then follows the model instead of being random."),
        click.option("--anchor/--no-anchor", default=True, show_default=True,
                     help="Measure NumPy (cuBLAS on cuda) on the same workload for comparison."),
        click.option("--progress/--no-progress", default=None,
                     help="Progress bar on stderr [default: when stderr is a terminal]."),
        click.option("--simulate", is_flag=True, is_eager=True,  # read before --target's check
                     help="No GPU: run the cuda target's loop with the emulator as the device. Every "
                          "candidate is compiled by NVRTC and checked on the CPU emulator (keep shapes "
                          "small); its time comes from an analytic model, stored as simulated (target "
                          "kind cuda_sim) and never reported as GFLOP/s."),
        click.option("--print-passes", is_flag=True, is_eager=True,  # read before --target's check
                     help="Print the loop IR as built and after each lowering pass of the target's pipeline, "
                          "for the schedule a build would use (the best stored, else the default), and exit "
                          "without tuning."),
    ]
    return functools.reduce(lambda f, d: d(f), reversed(decorators), fn)
