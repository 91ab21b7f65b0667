"""``autotune log ...``: look into the tuning database. Each command opens the database,
calls one ``tuning_db.Database`` method and prints its answer as a table, or with
``--json`` as one JSON document built from the same rows (keys: the headers in snake_case,
datetimes in ISO 8601, null where the table shows "-"). Every command but ``import`` only
reads: a database that does not exist is an error, never created.

``--workload KEY`` takes the exact key, a unique prefix of it, or an op name that has only
one workload in the database (``matmul``); ``--target KIND`` a target kind (``cpu``).
"""
from __future__ import annotations

import json
import re
import sys
from datetime import datetime

import click

from . import options as opt
from .history_plot import check_plot_path, history_figure, save_figure


def _report(headers: list[str], rows: list[list], as_json: bool) -> None:
    """``rows`` (raw values: numbers, None, datetimes) as a table, or as a JSON list of objects."""
    if as_json:
        _echo_json(_json_rows(headers, rows))
    else:
        _table(headers, rows)


def _json_key(header: str) -> str:
    """A table header as a JSON key: snake_case, GFLOP/s as gflops ("best GFLOP/s" -> "best_gflops")."""
    return re.sub(r"[^a-z0-9]+", "_", header.lower().replace("/s", "s")).strip("_")


def _json_rows(headers: list[str], rows: list[list]) -> list[dict]:
    keys = [_json_key(h) for h in headers]
    return [dict(zip(keys, row)) for row in rows]


def _json_default(value):
    """What json.dumps cannot write itself: datetimes, as ISO 8601."""
    if isinstance(value, datetime):
        return value.isoformat()
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


def _echo_json(doc) -> None:
    """One JSON document on stdout, nothing else."""
    click.echo(json.dumps(doc, default=_json_default, allow_nan=False))


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
    if isinstance(value, datetime):
        return _when(value)
    if isinstance(value, float):
        return f"{value:.4g}" if abs(value) < 1e4 else f"{value:.0f}"
    if isinstance(value, tuple):    # an interval (low, high): "1.08-1.21"
        return "-".join(f"{v:.3g}" for v in value)
    return str(value)


def _first_line(text: str | None, width: int = 100) -> str:
    line = (text or "").strip().splitlines()[0] if (text or "").strip() else "-"
    return line if len(line) <= width else line[: width - 3] + "..."


def _when(dt) -> str:
    return dt.strftime("%Y-%m-%d %H:%M:%S") if dt is not None else "-"


@click.group(name="log", short_help="Inspect the tuning database.")
def log_group():
    """Inspect the tuning database: workloads, runs, best records, history, errors.

    Every command but import only reads; with --json it prints one JSON document.

    \b
    Examples:
        autotune log workloads
        autotune log top --workload matmul -k 5 --json
    """


@log_group.command("workloads")
@opt.db_option
@opt.target_kind_option("Only records of this target kind.")
@opt.json_option
def workloads_cmd(db_url, target, as_json):
    """List workloads: key, op name, records, best GFLOP/s.

    Example: autotune log workloads --target cpu
    """
    with opt.open_db(db_url, create=False) as db:
        _report(["key", "name", "records", "best GFLOP/s"],
                [[w.key, w.name, w.n_records, w.best_gflops] for w in db.list_workloads(target)], as_json)


@log_group.command("targets")
@opt.db_option
@opt.json_option
def targets_cmd(db_url, as_json):
    """List targets with their workload and record counts.

    A target is a kind with the device, compiler, flags and host it was measured on.

    Example: autotune log targets
    """
    with opt.open_db(db_url, create=False) as db:
        _report(["kind", "device", "compiler", "flags", "host", "workloads", "records"],
                [[t.target.kind, t.target.device, t.target.compiler, t.target.flags, t.target.host,
                  t.n_workloads, t.n_records] for t in db.list_targets()], as_json)


@log_group.command("runs")
@opt.db_option
@opt.workload_option("Only runs of this workload.")
@opt.target_kind_option("Only runs on this target kind.")
@opt.json_option
def runs_cmd(db_url, workload, target, as_json):
    """List tuning runs, oldest first, with counts and best GFLOP/s.

    Each run with its workload, target, tuner, seed, status, records stored, trials
    requested, ok records, best GFLOP/s, start and last stored batch. A run of tuner
    "final" holds the final timing of the run before it (its fastest configs timed again,
    interleaved with the anchor) and the anchor's GFLOP/s from those rounds. A final run
    also gives the 90 % interval of its winner's ratio to the anchor, from the rounds'
    ratios ("1.08-1.21"; in JSON [low, high]).

    A run whose process was killed still says "running" in the database; it is listed
    as "stale" (its process is gone from this host, or, run elsewhere, it has stored
    nothing for an hour). Tuning again with --resume closes it as "interrupted" and
    continues from its records.

    Example: autotune log runs --workload matmul --target cpu
    """
    with opt.open_db(db_url, create=False) as db:
        key = opt.resolve_workload(db, workload) if workload else None
        _report(["id", "workload", "target", "tuner", "seed", "status", "records", "requested", "ok",
                 "best GFLOP/s", "started", "last stored", "anchor GFLOP/s", "ratio interval"],
                [[r.id, r.workload_key, r.target.describe(), r.tuner, r.seed, r.state(), r.n_records,
                  r.trials_requested, r.n_ok, r.best_gflops, r.started_at, r.heartbeat_at, r.anchor_gflops,
                  None if r.ratio_low is None else (r.ratio_low, r.ratio_high)]
                 for r in db.list_runs(key, target)], as_json)


@log_group.command("top")
@opt.db_option
@opt.workload_option("Workload whose records to rank; may be left out when the database holds one.")
@opt.target_kind_option("Only records of this target kind.")
@click.option("-k", "k", type=opt.POSITIVE_INT, default=10, show_default=True, help="How many records.")
@opt.json_option
@click.argument("legacy_key", cls=opt.LegacyArgument, required=False, metavar="KEY")
def top_cmd(db_url, workload, target, k, as_json, legacy_key):
    """The k fastest records of a workload, fastest first.

    Records of final timings (runs of tuner "final") rank before the others: they are
    the figures apply_best goes by. The JSON document is {"workload": KEY, "records": [...]}.

    Example: autotune log top --workload matmul -k 5 --target cpu
    """
    text = opt.one_workload_text(workload, legacy_key)   # `log top KEY`, the old form, still works
    with opt.open_db(db_url, create=False) as db:
        key = opt.pick_workload(db, text, target, "rank")
        headers = ["record", "GFLOP/s", "median ms", "spread", "run", "trial", "target", "config"]
        rows = [[r.id, r.gflops, r.median_s * 1e3, r.spread, r.run_id, r.trial, r.target.describe(), r.config_hash]
                for r in db.top_k(key, k, target)]
    if as_json:
        _echo_json({"workload": key, "records": _json_rows(headers, rows)})
        return
    click.echo(f"workload: {key}")
    _table(headers, rows)


@log_group.command("history")
@opt.db_option
@click.argument("run_id", type=int)
@click.option("--plot", "plot", type=click.Path(dir_okay=False, writable=True), default=None,
              callback=check_plot_path,
              help="Also draw best-so-far GFLOP/s per trial into this file; its suffix picks "
                   "the format: .png, .svg or .pdf.")
@opt.json_option
def history_cmd(db_url, run_id, plot, as_json):
    """Each trial of a run: its GFLOP/s and the best so far.

    A resumed run's best so far starts from the best stored before it began. The JSON
    document is the run (id, workload, target, tuner, status, resumed_from,
    baseline_gflops) with its "trials".

    Example: autotune log history 3 --plot history.svg
    """
    with opt.open_db(db_url, create=False) as db:
        run = db.get_run(run_id)
        records = db.history(run_id)
        curve = db.best_so_far(run_id)
    headers = ["trial", "status", "GFLOP/s", "best so far"]
    rows = [[r.trial, r.status.value, r.gflops, best] for r, (_, best) in zip(records, curve)]
    if as_json:
        _echo_json({"run": run.id, "workload": run.workload_key, "target": run.target.describe(),
                    "tuner": run.tuner, "status": run.state(), "resumed_from": run.resumed_from,
                    "baseline_gflops": run.baseline_gflops, "trials": _json_rows(headers, rows)})
    else:
        _print_history(run, headers, rows)
    if plot:
        save_figure(history_figure(run, records, curve), plot)
        click.echo(f"plot: {plot}", err=as_json)   # stdout holds the JSON document alone


def _print_history(run, headers: list[str], rows: list[list]) -> None:
    click.echo(f"run {run.id}: {run.workload_key} on {run.target.describe()}, tuner {run.tuner}, {run.state()}")
    if run.resumed_from is not None:
        before = "nothing ok" if run.baseline_gflops is None else f"best {_cell(run.baseline_gflops)} GFLOP/s"
        click.echo(f"resumed from run {run.resumed_from}; stored before it: {before}")
    _table(headers, rows)


@log_group.command("errors")
@opt.db_option
@opt.workload_option("Only records of this workload.")
@opt.target_kind_option("Only records of this target kind.")
@opt.json_option
def errors_cmd(db_url, workload, target, as_json):
    """Failed trials by status, with the latest message of each.

    The table shows the first line of each message, the JSON document all of it.

    Example: autotune log errors --workload matmul
    """
    with opt.open_db(db_url, create=False) as db:
        key = opt.resolve_workload(db, workload) if workload else None
        found = db.errors_by_status(key, target)
    headers = ["status", "count", "latest message"]
    if as_json:
        _echo_json(_json_rows(headers, [[status, count, message] for status, (count, message) in found.items()]))
    elif not found:
        click.echo("no failed trials")
    else:
        _table(headers, [[status, count, _first_line(message)] for status, (count, message) in found.items()])


@log_group.command("export")
@opt.db_option
@click.argument("file", type=click.Path(dir_okay=False, allow_dash=True))
@opt.workload_option("Only records of this workload.")
@opt.target_kind_option("Only records of this target kind.")
def export_cmd(db_url, file, workload, target):
    """Write records as JSON lines to FILE ("-" for stdout).

    Example: autotune log export records.jsonl --workload matmul --target cpu
    """
    with opt.open_db(db_url, create=False) as db:
        key = opt.resolve_workload(db, workload) if workload else None
        try:
            count = _export(db, file, key, target)
        except OSError as exc:
            raise click.ClickException(f"cannot write {file}: {exc.strerror or exc}") from None
    click.echo(f"exported {count} records from {db.location}", err=file == "-")


def _export(db, file: str, key: str | None, target: str | None) -> int:
    """Export to ``file`` ("-": stdout) the records of ``key`` (None: all), of target kind
    ``target`` only when given. ``Database.export_jsonl`` takes no target, so the lines
    of other kinds are dropped here, on their way out."""
    if target is None:
        return db.export_jsonl(sys.stdout if file == "-" else file, key)
    if file == "-":
        return _export_kind(db, sys.stdout, key, target)
    with open(file, "w", encoding="utf-8", newline="\n") as out:
        return _export_kind(db, out, key, target)


def _export_kind(db, out, key: str | None, kind: str) -> int:
    sink = _KindFilter(out, kind)
    db.export_jsonl(sink, key)
    sink.close()
    return sink.count


class _KindFilter:
    """A text stream passing on only the JSON lines whose record's target is of ``kind``."""

    def __init__(self, out, kind: str):
        self.out, self.kind, self.count = out, kind, 0
        self._pending = ""

    def write(self, text: str) -> int:
        *lines, self._pending = (self._pending + text).split("\n")
        for line in lines:
            self._line(line)
        return len(text)

    def close(self) -> None:
        """Pass on an unterminated last line (export ends every line, so normally none)."""
        if self._pending:
            self._line(self._pending)
            self._pending = ""

    def _line(self, line: str) -> None:
        if line and json.loads(line)["target"]["kind"] == self.kind:
            self.out.write(line + "\n")
            self.count += 1


@log_group.command("import")
@opt.db_option
@click.argument("file", type=click.Path(exists=True, dir_okay=False, allow_dash=True))
def import_cmd(db_url, file):
    """Add the records of a JSON-lines FILE ("-" for stdin).

    Records already present are skipped; the database is created if it does not exist.

    Example: autotune log import records.jsonl --db other.db
    """
    with opt.open_db(db_url) as db:  # the one command here that writes: it creates the database
        try:
            count = db.import_jsonl(sys.stdin if file == "-" else file)
        except OSError as exc:
            raise click.ClickException(f"cannot read {file}: {exc.strerror or exc}") from None
    click.echo(f"imported {count} new records into {db.location}")


@log_group.command("show", short_help="Print one record: fields, decisions, what its code does.")
@opt.db_option
@click.argument("record_id", type=int)
@click.option("--ir", "what", flag_value="ir", help="Also print the loop IR of the record's schedule.")
@click.option("--source", "what", flag_value="source", help="Also print the generated C (or CUDA) source.")
@opt.json_option
def show_cmd(db_url, record_id, what, as_json):
    """Print one record, its schedule decisions and what its lowered code does (which loops
    run in parallel, vectorized, unrolled; the buffers it allocates); with --ir its loop IR,
    with --source its generated code. A workload tuned at several sizes along one
    parameter (a dynamic dimension's buckets) lists the sizes stored.

    Example: autotune log show 42 --source
    """
    from .report import explain_record

    with opt.open_db(db_url, create=False) as db:  # open while a stored DAG may be needed
        record = db.get_record(record_id)
        if record is None:
            raise click.ClickException(f"no record with id {record_id} in {db.location}")
        decisions, lowered = explain_record(record, db)
        sizes = tuned_sizes(db, record.workload_key)
        if as_json:
            _echo_json({**_record_json(record, decisions, lowered, what, db), "sizes": sizes})
            return
        _print_record(record, [("decisions", decisions), ("lowered", lowered),
                               ("sizes", _sizes_lines(record.workload_key, sizes))])
        if what is not None:
            click.echo(_lowered_text(record, what, db))


def tuned_sizes(db, workload_key: str) -> dict[str, list[int]]:
    """Per parameter, the sizes a registered workload is stored at in ``db`` with every other
    parameter as in ``workload_key`` (its own size included): the buckets of a dynamic
    dimension (``autotune.tune_buckets``), or sizes tuned one by one. Only parameters with
    another size stored are listed."""
    from te.workload import split_key

    name, params = split_key(workload_key)
    if params is None:  # keyed by its DAG's hash: no sizes to compare
        return {}
    found: dict[str, set[int]] = {}
    for w in db.list_workloads():
        other_name, other = split_key(w.key)
        if other_name != name or other is None or other.keys() != params.keys():
            continue
        differing = [k for k in params if other[k] != params[k]]
        if len(differing) == 1 and all(type(p[differing[0]]) is int for p in (params, other)):
            found.setdefault(differing[0], {params[differing[0]]}).add(other[differing[0]])
    return {k: sorted(v) for k, v in sorted(found.items())}


def _sizes_lines(workload_key: str, sizes: dict[str, list[int]]) -> list[str]:
    """``tuned_sizes`` a line per parameter, the record's own size in brackets."""
    from te.workload import split_key

    _, params = split_key(workload_key)
    return [f"{k}: " + ", ".join(f"[{v}]" if v == params[k] else str(v) for v in values)
            + " (stored sizes; [this record's])" for k, values in sizes.items()]


def _print_record(r, sections: list[tuple[str, list[str]]] = ()) -> None:
    """The record's fields, one a line, then each non-empty section of several lines
    (the first beside its name, the rest aligned under it)."""
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
    width = max(len(name) for name, _ in [*fields, *sections])
    for name, value in fields:
        click.echo(f"{name.ljust(width)}  {value}")
    for name, lines in sections:
        for n, line in enumerate(lines):
            click.echo(f"{(name if n == 0 else '').ljust(width)}  {line}")


def _record_json(r, decisions: list[str], lowered: list[str], what: str | None, db) -> dict:
    """``log show --json``: the fields ``_print_record`` shows, as numbers and ISO times, with
    the unit in the key where the table writes it after the value; "ir" or "source" when asked."""
    doc = {
        "record": r.id, "run": r.run_id, "trial": r.trial, "workload": r.workload_key,
        "target": r.target.describe(), "compiler": r.target.compiler, "flags": r.target.flags,
        "host": r.target.host or None, "status": r.status.value, "gflops": r.gflops,
        "median_ms": None if r.median_s is None else r.median_s * 1e3, "spread": r.spread,
        "repeats": len(r.costs), "build_s": r.build_s, "run_time_s": r.run_s, "created": r.created_at,
        "tool": r.tool_version, "config_hash": r.config_hash, "config": r.config, "error": r.error,
        "decisions": decisions, "lowered": lowered,
    }
    if what is not None:
        doc[what] = _lowered_text(r, what, db)
    return doc


def _lowered_text(record, what: str, db) -> str:
    """The loop IR or the source of a record's config, rebuilt from the workload and config."""
    from schedule.config import Config

    from ..task import Task

    task = Task.of_record(record, db)
    func = task.lower(Config.from_json(record.config))
    if what == "ir":
        return str(func)
    from backends import backend_for

    return backend_for(task.target).generate_source(func)

