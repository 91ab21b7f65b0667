"""``autotune log ...``: look into the tuning database. Each command opens the database,
calls one ``tuning_db.Database`` method and prints its answer as a table. Every command
but ``import`` only reads: a database that does not exist is an error, never created.

Workload KEY arguments take the exact key, a unique prefix of it, or an op name that
has only one workload in the database (``matmul``).
"""
from __future__ import annotations

import json
import sys

import click

from . import options as opt
from .history_plot import check_plot_path, history_figure, save_figure


def _table(headers: list[str], rows: list[list]) -> None:
    """Left-aligned columns, numbers right-aligned; nothing but a header when empty."""
    cells = [[_cell(v) for v in row] for row in rows]
    widths = [max([len(h)] + [len(r[n]) for r in cells]) for n, h in enumerate(headers)]
    numeric = [all(isinstance(row[n], (int, float)) or row[n] is None for row in rows) for n in range(len(headers))]

    def line(values):
        parts = [v.rjust(w) if num else v.ljust(w) for v, w, num in zip(values, widths, numeric)]
        return "  ".join(parts).rstrip()

    click.echo(line(headers))
    for row in cells:
        click.echo(line(row))


def _cell(value) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.4g}" if abs(value) < 1e4 else f"{value:.0f}"
    return str(value)


def _first_line(text: str | None, width: int = 100) -> str:
    line = (text or "").strip().splitlines()[0] if (text or "").strip() else "-"
    return line if len(line) <= width else line[: width - 3] + "..."


def _when(dt) -> str:
    return dt.strftime("%Y-%m-%d %H:%M:%S") if dt is not None else "-"


@click.group(name="log")
def log_group():
    """Inspect the tuning database: workloads, runs, best records, history, errors.

    \b
    Example:
        autotune log workloads
        autotune log top matmul -k 5
    """


@log_group.command("workloads")
@opt.db_option
@click.option("--target", type=opt.TargetKindParam(), default=None, help="Only records of this target kind.")
def workloads_cmd(db_url, target):
    """List workloads: key, op name, records, best GFLOP/s.

    Example: autotune log workloads --target cpu
    """
    with opt.open_db(db_url, create=False) as db:
        _table(["key", "name", "records", "best GFLOP/s"],
               [[w.key, w.name, w.n_records, w.best_gflops] for w in db.list_workloads(target)])


@log_group.command("targets")
@opt.db_option
def targets_cmd(db_url):
    """List targets (device, compiler, flags, host) with their workload and record counts.

    Example: autotune log targets
    """
    with opt.open_db(db_url, create=False) as db:
        _table(["kind", "device", "compiler", "flags", "host", "workloads", "records"],
               [[t.target.kind, t.target.device, t.target.compiler, t.target.flags, t.target.host,
                 t.n_workloads, t.n_records] for t in db.list_targets()])


@log_group.command("runs")
@opt.db_option
@click.option("--workload", "workload", metavar="KEY", default=None, help="Only runs of this workload.")
def runs_cmd(db_url, workload):
    """List tuning runs, oldest first, with their record counts and best GFLOP/s.

    A run whose process was killed still says "running" in the database; it is listed
    as "stale" (its process is gone from this host, or, run elsewhere, it has stored
    nothing for an hour). Tuning again with --resume closes it as "interrupted" and
    continues from its records.

    Example: autotune log runs --workload matmul
    """
    with opt.open_db(db_url, create=False) as db:
        key = opt.resolve_workload(db, workload) if workload else None
        _table(["id", "workload", "target", "tuner", "seed", "status", "records", "requested", "ok",
                "best GFLOP/s", "started", "last stored"],
               [[r.id, r.workload_key, r.target.describe(), r.tuner, r.seed, r.state(), r.n_records,
                 r.trials_requested, r.n_ok, r.best_gflops, _when(r.started_at), _when(r.heartbeat_at)]
                for r in db.list_runs(key)])


@log_group.command("top")
@opt.db_option
@click.argument("workload", metavar="KEY")
@click.option("-k", "k", type=opt.POSITIVE_INT, default=10, show_default=True, help="How many records.")
@click.option("--target", type=opt.TargetKindParam(), default=None, help="Only records of this target kind.")
def top_cmd(db_url, workload, k, target):
    """The k fastest records of a workload, fastest first.

    Example: autotune log top matmul -k 5 --target cpu
    """
    with opt.open_db(db_url, create=False) as db:
        key = opt.resolve_workload(db, workload)
        click.echo(f"workload: {key}")
        _table(["record", "GFLOP/s", "median ms", "spread", "run", "trial", "target", "config"],
               [[r.id, r.gflops, r.median_s * 1e3, r.spread, r.run_id, r.trial, r.target.describe(), r.config_hash]
                for r in db.top_k(key, k, target)])


@log_group.command("history")
@opt.db_option
@click.argument("run_id", type=int)
@click.option("--plot", "plot", type=click.Path(dir_okay=False, writable=True), default=None,
              callback=check_plot_path,
              help="Also draw best-so-far GFLOP/s per trial into this file; its suffix picks "
                   "the format: .png, .svg or .pdf.")
def history_cmd(db_url, run_id, plot):
    """Best GFLOP/s so far after each trial of a run (and each trial's own result).

    A resumed run's best so far starts from the best stored before it began.

    Example: autotune log history 3 --plot history.svg
    """
    with opt.open_db(db_url, create=False) as db:
        run = db.get_run(run_id)
        records = db.history(run_id)
        curve = db.best_so_far(run_id)
    click.echo(f"run {run.id}: {run.workload_key} on {run.target.describe()}, tuner {run.tuner}, {run.state()}")
    if run.resumed_from is not None:
        before = "nothing ok" if run.baseline_gflops is None else f"best {_cell(run.baseline_gflops)} GFLOP/s"
        click.echo(f"resumed from run {run.resumed_from}; stored before it: {before}")
    _table(["trial", "status", "GFLOP/s", "best so far"],
           [[r.trial, r.status, r.gflops, best] for r, (_, best) in zip(records, curve)])
    if plot:
        save_figure(history_figure(run, records, curve), plot)
        click.echo(f"plot: {plot}")


@log_group.command("errors")
@opt.db_option
@click.option("--workload", "workload", metavar="KEY", default=None, help="Only records of this workload.")
@click.option("--target", type=opt.TargetKindParam(), default=None, help="Only records of this target kind.")
def errors_cmd(db_url, workload, target):
    """Failed trials by status, with the latest message of each.

    Example: autotune log errors --workload matmul
    """
    with opt.open_db(db_url, create=False) as db:
        key = opt.resolve_workload(db, workload) if workload else None
        found = db.errors_by_status(key, target)
    if not found:
        click.echo("no failed trials")
        return
    _table(["status", "count", "latest message"],
           [[status, count, _first_line(message)] for status, (count, message) in found.items()])


@log_group.command("export")
@opt.db_option
@click.argument("file", type=click.Path(dir_okay=False, allow_dash=True))
@click.option("--workload", "workload", metavar="KEY", default=None, help="Only records of this workload.")
def export_cmd(db_url, file, workload):
    """Write records as JSON lines to FILE ("-" for stdout).

    Example: autotune log export records.jsonl --workload matmul
    """
    with opt.open_db(db_url, create=False) as db:
        key = opt.resolve_workload(db, workload) if workload else None
        try:
            count = db.export_jsonl(sys.stdout if file == "-" else file, key)
        except OSError as exc:
            raise click.ClickException(f"cannot write {file}: {exc.strerror or exc}") from None
    click.echo(f"exported {count} records from {db.location}", err=file == "-")


@log_group.command("import")
@opt.db_option
@click.argument("file", type=click.Path(exists=True, dir_okay=False, allow_dash=True))
def import_cmd(db_url, file):
    """Add the records of a JSON-lines FILE ("-" for stdin), skipping ones already present.

    Example: autotune log import records.jsonl --db other.db
    """
    with opt.open_db(db_url) as db:  # the one command here that writes: it creates the database
        try:
            count = db.import_jsonl(sys.stdin if file == "-" else file)
        except OSError as exc:
            raise click.ClickException(f"cannot read {file}: {exc.strerror or exc}") from None
    click.echo(f"imported {count} new records into {db.location}")


@log_group.command("show")
@opt.db_option
@click.argument("record_id", type=int)
@click.option("--ir", "what", flag_value="ir", help="Also print the loop IR of the record's schedule.")
@click.option("--source", "what", flag_value="source", help="Also print the generated C (or CUDA) source.")
def show_cmd(db_url, record_id, what):
    """Print one record; with --ir its loop IR, with --source its generated code.

    Example: autotune log show 42 --source
    """
    with opt.open_db(db_url, create=False) as db:
        record = db.get_record(record_id)
        if record is None:
            raise click.ClickException(f"no record with id {record_id} in {db.location}")
    _print_record(record)
    if what is not None:
        click.echo(_lowered_text(record, what))


def _print_record(r) -> None:
    fields = [
        ("record", r.id), ("run", r.run_id), ("trial", r.trial), ("workload", r.workload_key),
        ("target", f"{r.target.describe()}; {r.target.compiler} {r.target.flags}".rstrip()),
        ("host", r.target.host or "-"), ("status", r.status),
        ("GFLOP/s", _cell(r.gflops)), ("median", "-" if r.median_s is None else f"{r.median_s * 1e3:.4g} ms"),
        ("spread", _cell(r.spread)), ("repeats", len(r.costs)),
        ("build", f"{r.build_s:.3f} s"), ("run time", f"{r.run_s:.3f} s"),
        ("created", _when(r.created_at)), ("tool", r.tool_version), ("config hash", r.config_hash),
        ("config", json.dumps(r.config, sort_keys=True)),
    ]
    if r.error:
        fields.append(("error", r.error))
    width = max(len(name) for name, _ in fields)
    for name, value in fields:
        click.echo(f"{name.ljust(width)}  {value}")


def _lowered_text(record, what: str) -> str:
    """The loop IR or the source of a record's config, rebuilt from the workload and config."""
    from schedule.config import Config

    from ..task import Task

    task = Task(record.workload_name, record.params, record.target.kind)
    func = task.lower(Config.from_json(record.config))
    if what == "ir":
        return str(func)
    from backends import backend_for

    return backend_for(task.target).generate_source(func)

