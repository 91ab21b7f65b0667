"""One vocabulary across the command line, help that fits 80 columns, --json that scripts can read.

The rules walk the click group recursively, so a command added later is checked too:
every help text fits an 80-column terminal and shows no reST literals; every command
that only reads the database takes --db and --json; a workload is always named with
--workload KEY and a target with --target; offered dtypes are the ones the op accepts.
The --json tests run in-process over a database written with the library and compare
each document with the rows read back with plain sqlite3.
"""
from __future__ import annotations

import json
import re
import sqlite3
from contextlib import closing
from datetime import datetime, timezone

import click
import pytest
from click.testing import CliRunner

import te
import tuning_db
from autotune.cli import cli
from autotune.cli.options import LegacyArgument, TargetKindParam, TargetSpec
from autotune.cli.tune_cmd import command_defaults
from autotune.task import Task
from autotune.tuners import RandomTuner

WIDTH = 80


def _walk(command: click.Command, path: tuple[str, ...] = ()):
    """(word path, command) of ``command`` and of every command below it."""
    yield path, command
    if isinstance(command, click.Group):
        for name, sub in command.commands.items():
            yield from _walk(sub, (*path, name))


COMMANDS = dict(_walk(cli))
LEAVES = {path: cmd for path, cmd in COMMANDS.items() if not isinstance(cmd, click.Group)}
GROUPS = {path: cmd for path, cmd in COMMANDS.items() if isinstance(cmd, click.Group)}
OPS = [name for name in cli.commands if name in te.list_workloads()]


def _name(path: tuple[str, ...]) -> str:
    return " ".join(("autotune", *path))


def render_help(path: tuple[str, ...]) -> str:
    """``autotune PATH --help`` as an 80-column terminal shows it."""
    result = CliRunner().invoke(cli, [*path, "--help"], terminal_width=WIDTH, prog_name="autotune")
    assert result.exit_code == 0, result.output
    return result.output


def _options(command: click.Command) -> dict[str, click.Parameter]:
    return {o: p for p in command.params for o in (*p.opts, *p.secondary_opts) if o.startswith("-")}


# ---------------------------------------------------------------- help text


@pytest.mark.parametrize("path", list(COMMANDS), ids=_name)
def test_help_fits_80_columns(path):
    wide = [line for line in render_help(path).splitlines() if len(line) > WIDTH]
    assert not wide, f"{_name(path)} --help has lines over {WIDTH} columns:\n" + "\n".join(wide)


@pytest.mark.parametrize("path", list(COMMANDS), ids=_name)
def test_help_shows_no_rest_literals(path):
    text = render_help(path)
    assert "``" not in text, f"{_name(path)} --help shows reST double backticks:\n{text}"


@pytest.mark.parametrize("path", list(COMMANDS), ids=_name)
def test_usage_fits_one_line(path):
    """A usage line that wraps breaks choice lists and metavars in the middle of a word."""
    usage = render_help(path).split("\n\n", 1)[0]
    assert "\n" not in usage, f"{_name(path)}: the usage wraps:\n{usage}"


@pytest.mark.parametrize("path", list(GROUPS), ids=_name)
def test_command_listings_show_whole_sentences(path):
    """click cuts a short help longer than its column with "..."; each must fit whole."""
    group = GROUPS[path]
    limit = WIDTH - 6 - max(len(name) for name in group.commands)   # click's own rule
    for name, command in group.commands.items():
        short = command.get_short_help_str(limit)
        assert len(short) <= limit and not short.endswith("..."), f"{_name((*path, name))}: {short!r} is cut"
        assert short.endswith("."), f"{_name((*path, name))}: {short!r} is not a sentence"
    listing = render_help(path).split("Commands:\n", 1)[1]
    assert "..." not in listing, listing


def test_target_auto_help_says_what_auto_picks():
    """The help of every measuring --target states the rule resolve("auto") really follows."""
    from autotune.targets import resolve
    from backends.cuda import gpu_available

    assert resolve("auto")[0].kind == ("cuda" if gpu_available() else "cpu")
    helps = {_name(path): p.help for path, cmd in LEAVES.items() for p in cmd.params
             if isinstance(p.type, TargetSpec)}
    assert helps, "no command takes a target to measure on"
    for name, text in helps.items():
        assert "auto picks cuda where CuPy sees a GPU, else cpu" in text, f"{name}: {text}"


# ---------------------------------------------------------------- one vocabulary


def _writes(command: click.Command) -> bool:
    """Whether ``command`` writes rather than only reads: it measures on a target (an op
    command, sample) or moves records between the database and a FILE (import, export)."""
    return any(isinstance(p.type, TargetSpec) for p in command.params) or \
        any(isinstance(p, click.Argument) and p.name == "file" for p in command.params)


READERS = {path: cmd for path, cmd in LEAVES.items() if "--db" in _options(cmd) and not _writes(cmd)}


def test_the_read_commands_are_found():
    assert ("log", "top") in READERS and ("replay",) in READERS and ("log", "workloads") in READERS
    assert ("matmul",) not in READERS and ("log", "import") not in READERS


@pytest.mark.parametrize("path", list(READERS), ids=_name)
def test_every_read_command_has_json_and_db(path):
    options = _options(READERS[path])
    assert "--db" in options
    assert "--json" in options, f"{_name(path)} has no --json"
    flag = options["--json"]
    assert flag.is_flag and flag.name == "as_json" and flag.opts == ["--json"]


@pytest.mark.parametrize("path", list(LEAVES), ids=_name)
def test_workloads_are_named_with_workload_and_targets_with_target(path):
    command = LEAVES[path]
    for p in command.params:
        if isinstance(p, LegacyArgument):   # an old positional form, kept out of the usage line
            continue
        if p.name == "workload" or p.metavar == "KEY":
            assert isinstance(p, click.Option) and p.opts == ["--workload"], \
                f"{_name(path)} takes a workload as {p.opts or p.name}, not --workload"
        if isinstance(p.type, (TargetKindParam, TargetSpec)):
            assert isinstance(p, click.Option) and p.opts == ["--target"], f"{_name(path)}: {p.opts}"
    options = _options(command)
    if "--workload" in options:
        assert isinstance(options.get("--target", click.Option(["--x"])).type, TargetKindParam), \
            f"{_name(path)} filters by workload but not by --target KIND"


def test_legacy_key_of_log_top_is_hidden_from_usage():
    usage = render_help(("log", "top")).splitlines()[0]
    assert usage == "Usage: autotune log top [OPTIONS]"


# ---------------------------------------------------------------- dtypes


def _offered(op: str, option: str) -> list[str]:
    """The choices ``autotune OP --help`` shows for ``option`` (--dtype, --out-dtype)."""
    found = re.search(rf"^\s*{option} \[([^\]]+)\]", render_help((op,)), re.M)
    return found.group(1).split("|") if found else []


@pytest.mark.parametrize("op", OPS)
def test_offered_dtypes_are_the_ones_the_op_accepts(op):
    params = command_defaults(op)
    offered = _offered(op, "--dtype")
    assert offered, f"autotune {op} offers no --dtype"
    assert "bool" not in offered
    for dtype in offered:
        te.create_workload(op, **{**params, "dtype": dtype})       # raises if the op refuses it
    for dtype in set(te.dtypes.SUPPORTED_DTYPES) - set(offered):
        with pytest.raises(te.DTypeError):
            te.create_workload(op, **{**params, "dtype": dtype})
    for out_dtype in _offered(op, "--out-dtype"):
        te.create_workload(op, **{**params, "dtype": out_dtype, "out_dtype": out_dtype})


def test_softmax_offers_floats_only():
    assert _offered("softmax", "--dtype") == list(te.dtypes.FLOAT_DTYPES)


def test_a_refused_dtype_is_a_usage_error(tmp_path):
    db = tmp_path / "t.db"
    result = CliRunner().invoke(cli, ["matmul", "--dtype", "bool", "--trials", "1", "--db", str(db)])
    assert result.exit_code == 2, result.output
    assert "Invalid value for '--dtype': 'bool' is not one of" in result.stderr
    assert not db.exists()


# ---------------------------------------------------------------- a seeded database

SMALL, LARGE = dict(M=16, N=16, K=16), dict(M=32, N=32, K=32)
#: (status, error) of the trials of each run, after its ok ones.
FAILURES = [("compile_error", "gcc failed:\nkernel.c:3: error"), ("timeout", "no result within 10 s"),
            ("compile_error", "gcc failed again:\nkernel.c:9: error")]


def _seed_run(db, shape: dict, kind: str, n_ok: int) -> Task:
    """A finished run of matmul ``shape`` on ``kind``: ``n_ok`` ok records of made-up speed
    (real configs of the space), then FAILURES."""
    task = Task("matmul", shape, kind)
    target = tuning_db.TargetInfo(kind, device=f"test {kind}", compiler="cc 1", flags="-O2", host="box")
    configs = RandomTuner(task.space, seed=0).next_batch(n_ok + len(FAILURES))
    run = db.start_run(task.key, task.workload_name, task.params, target, "random", 0, len(configs))
    records = []
    for trial, config in enumerate(configs):
        common = dict(workload_key=task.key, workload_name="matmul", params=task.params, target=target,
                      config=config.to_dict(), trial=trial, build_s=0.25, run_s=0.5)
        if trial < n_ok:
            median = 1e-4 * (1 + (trial * 7) % 5)
            records.append(tuning_db.MeasureRecord(**common, status="ok", costs=[median, median * 1.5],
                                                   median_s=median, spread=0.5, gflops=task.flops / median / 1e9))
        else:
            status, error = FAILURES[trial - n_ok]
            records.append(tuning_db.MeasureRecord(**common, status=status, error=error))
    db.add_records(run, records)
    db.finish_run(run)
    return task


@pytest.fixture(scope="module")
def seeded(tmp_path_factory):
    """Two workloads: matmul 16 on cpu (run 1) and matmul 32 on cuda (run 2), each with
    ok and failed records."""
    path = tmp_path_factory.mktemp("seeded") / "tuning.db"
    with tuning_db.Database(path) as db:
        _seed_run(db, SMALL, "cpu", n_ok=5)
        _seed_run(db, LARGE, "cuda", n_ok=3)
    return path


def run_cli(db, *args: str, expect: int = 0):
    result = CliRunner().invoke(cli, [*args, "--db", str(db)])
    assert result.exit_code == expect, f"exit {result.exit_code}: {result.output}\n{result.exception!r}"
    return result


def read_json(db, *args: str):
    """The command's stdout, which must be one JSON document and nothing else."""
    return json.loads(run_cli(db, *args, "--json").stdout)


def query(db, sql: str, *params) -> list[sqlite3.Row]:
    with closing(sqlite3.connect(db)) as con:
        con.row_factory = sqlite3.Row
        return con.execute(sql, params).fetchall()


def stored_time(text: str | None) -> datetime | None:
    """A datetime as SQLite holds it (naive UTC)."""
    return None if text is None else datetime.fromisoformat(text).replace(tzinfo=timezone.utc)


def iso(text: str | None) -> datetime | None:
    return None if text is None else datetime.fromisoformat(text)


def key_of(shape: dict) -> str:
    return Task("matmul", shape, "cpu").key


def test_workloads_json(seeded):
    doc = read_json(seeded, "log", "workloads")
    rows = query(seeded, "SELECT w.key, w.name, count(r.id) AS n, "
                         "max(CASE WHEN r.status = 'ok' THEN r.gflops END) AS best "
                         "FROM workloads w JOIN records r ON r.workload_id = w.id GROUP BY w.id ORDER BY w.key")
    assert doc == [dict(key=r["key"], name=r["name"], records=r["n"], best_gflops=r["best"]) for r in rows]
    assert [w["key"] for w in read_json(seeded, "log", "workloads", "--target", "cuda")] == [key_of(LARGE)]


def test_targets_json(seeded):
    doc = read_json(seeded, "log", "targets")
    rows = query(seeded, "SELECT t.kind, t.device, t.compiler, t.flags, t.host, "
                         "count(DISTINCT r.workload_id) AS nw, count(r.id) AS n "
                         "FROM targets t JOIN records r ON r.target_id = t.id GROUP BY t.id ORDER BY t.kind")
    assert doc == [dict(kind=r["kind"], device=r["device"], compiler=r["compiler"], flags=r["flags"],
                        host=r["host"], workloads=r["nw"], records=r["n"]) for r in rows]


def test_runs_json_and_target_filter(seeded):
    doc = read_json(seeded, "log", "runs")
    rows = query(seeded, "SELECT u.*, w.key, t.kind, t.device, count(r.id) AS n, "
                         "sum(r.status = 'ok') AS n_ok, max(CASE WHEN r.status = 'ok' THEN r.gflops END) AS best "
                         "FROM tuning_runs u JOIN workloads w ON u.workload_id = w.id "
                         "JOIN targets t ON u.target_id = t.id JOIN records r ON r.run_id = u.id "
                         "GROUP BY u.id ORDER BY u.id")
    assert len(doc) == len(rows) == 2
    for got, row in zip(doc, rows):
        assert {k: got[k] for k in ("id", "workload", "target", "tuner", "seed", "status", "records",
                                    "requested", "ok", "best_gflops")} == dict(
            id=row["id"], workload=row["key"], target=f"{row['kind']} ({row['device']})", tuner=row["tuner"],
            seed=row["seed"], status=row["status"], records=row["n"], requested=row["trials_requested"],
            ok=row["n_ok"], best_gflops=row["best"])
        assert iso(got["started"]) == stored_time(row["started_at"])
        assert iso(got["last_stored"]) == stored_time(row["heartbeat_at"])
    assert [r["id"] for r in read_json(seeded, "log", "runs", "--target", "cuda")] == [2]
    assert read_json(seeded, "log", "runs", "--target", "cpu", "--workload", "matmul{\"K\":32") == []
    table = run_cli(seeded, "log", "runs", "--target", "cuda").stdout.splitlines()
    assert len(table) == 2 and table[1].split()[0] == "2"


def test_top_json(seeded):
    doc = read_json(seeded, "log", "top", "--workload", "matmul{\"K\":16", "-k", "3")
    rows = query(seeded, "SELECT r.* FROM records r JOIN workloads w ON r.workload_id = w.id "
                         "WHERE w.key = ? AND r.status = 'ok' ORDER BY r.median_s, r.id LIMIT 3", key_of(SMALL))
    assert doc["workload"] == key_of(SMALL)
    assert doc["records"] == [dict(record=r["id"], gflops=r["gflops"], median_ms=r["median_s"] * 1e3,
                                   spread=r["spread"], run=r["run_id"], trial=r["trial"], target="cpu (test cpu)",
                                   config=r["config_hash"]) for r in rows]


def test_top_takes_workload_as_an_option_the_old_positional_form_and_picks_the_only_one(seeded):
    small = read_json(seeded, "log", "top", "--workload", "matmul{\"K\":16")
    assert read_json(seeded, "log", "top", "matmul{\"K\":16") == small            # the old form still works
    assert read_json(seeded, "log", "top", "matmul{\"K\":16", "--workload", "matmul{\"K\":16") == small
    assert read_json(seeded, "log", "top", "--target", "cpu") == small             # one workload on cpu
    several = run_cli(seeded, "log", "top", expect=1)
    assert "2 workloads in" in several.stderr and "choose one with --workload" in several.stderr
    both = run_cli(seeded, "log", "top", "matmul{\"K\":16", "--workload", "matmul{\"K\":32", expect=2)
    assert "given twice" in both.stderr and "give it once, with --workload" in both.stderr


def test_history_json(seeded):
    doc = read_json(seeded, "log", "history", "1")
    run = query(seeded, "SELECT * FROM tuning_runs WHERE id = 1")[0]
    rows = query(seeded, "SELECT trial, status, gflops FROM records WHERE run_id = 1 ORDER BY trial")
    best, trials = None, []
    for r in rows:
        if r["status"] == "ok":
            best = r["gflops"] if best is None else max(best, r["gflops"])
        trials.append(dict(trial=r["trial"], status=r["status"], gflops=r["gflops"], best_so_far=best))
    assert doc == dict(run=1, workload=key_of(SMALL), target="cpu (test cpu)", tuner=run["tuner"],
                       status=run["status"], resumed_from=None, baseline_gflops=None, trials=trials)
    assert any(t["gflops"] is None for t in doc["trials"]), "failed trials are null, not '-'"


def test_history_json_with_a_plot_keeps_stdout_json(seeded, tmp_path):
    plot = tmp_path / "h.svg"
    result = run_cli(seeded, "log", "history", "2", "--json", "--plot", str(plot))
    assert json.loads(result.stdout)["run"] == 2 and plot.exists() and "plot:" in result.stderr


def test_errors_json_has_whole_messages(seeded):
    doc = read_json(seeded, "log", "errors")
    rows = query(seeded, "SELECT status, count(*) AS n, max(id) AS latest FROM records "
                         "WHERE status != 'ok' GROUP BY status")
    expected = {r["status"]: dict(status=r["status"], count=r["n"],
                                  latest_message=query(seeded, "SELECT error FROM records WHERE id = ?",
                                                       r["latest"])[0]["error"]) for r in rows}
    assert doc == [expected[s] for s in tuning_db.STATUSES if s in expected]
    assert doc[0]["latest_message"] == "gcc failed again:\nkernel.c:9: error"
    assert read_json(seeded, "log", "errors", "--workload", "matmul{\"K\":32", "--target", "cpu") == []


def test_show_json(seeded):
    for row in query(seeded, "SELECT * FROM records WHERE id IN (1, 6)"):   # an ok and a failed record
        doc = read_json(seeded, "log", "show", str(row["id"]))
        assert {k: doc[k] for k in ("record", "run", "trial", "status", "gflops", "spread", "build_s",
                                    "run_time_s", "tool", "config_hash", "error")} == dict(
            record=row["id"], run=row["run_id"], trial=row["trial"], status=row["status"], gflops=row["gflops"],
            spread=row["spread"], build_s=row["build_s"], run_time_s=row["run_s"], tool=row["tool_version"],
            config_hash=row["config_hash"], error=row["error"])
        assert doc["median_ms"] == (None if row["median_s"] is None else row["median_s"] * 1e3)
        assert doc["repeats"] == len(json.loads(row["costs"]))
        assert doc["config"] == json.loads(row["config"])
        assert iso(doc["created"]) == stored_time(row["created_at"])
        assert (doc["workload"], doc["target"], doc["host"]) == (key_of(SMALL), "cpu (test cpu)", "box")
    assert read_json(seeded, "log", "show", "1", "--ir")["ir"].startswith("def kernel(")


def test_export_filters_by_target(seeded, tmp_path):
    out = tmp_path / "cuda.jsonl"
    result = run_cli(seeded, "log", "export", str(out), "--target", "cuda")
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    (n_cuda,) = query(seeded, "SELECT count(*) FROM records r JOIN targets t ON r.target_id = t.id "
                              "WHERE t.kind = 'cuda'")[0]
    assert len(lines) == n_cuda > 0 and {line["target"]["kind"] for line in lines} == {"cuda"}
    assert result.stdout.startswith(f"exported {n_cuda} records")
    to_stdout = run_cli(seeded, "log", "export", "-", "--target", "cpu")
    assert {json.loads(line)["target"]["kind"] for line in to_stdout.stdout.splitlines()} == {"cpu"}
    assert run_cli(seeded, "log", "export", "-", "--target", "cuda", "--workload", "matmul{\"K\":16").stdout == ""


@pytest.mark.parametrize("op", OPS)
def test_every_op_command_accepts_its_own_defaults(op):
    """An option whose type refuses its default (a float parameter given an int type) fails
    every run of the command; parsing no arguments must give the workload's defaults."""
    ctx = cli.commands[op].make_context(op, [])
    assert ctx.params, op


def test_layernorm_takes_a_float_eps():
    ctx = cli.commands["layernorm"].make_context("layernorm", ["--eps", "1e-3"])
    assert ctx.params["eps"] == pytest.approx(1e-3)
    with pytest.raises(click.BadParameter):
        cli.commands["layernorm"].make_context("layernorm", ["--eps", "0"])
