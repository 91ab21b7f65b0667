"""Sharing one PostgreSQL database between tuning processes: no record lost or doubled, no
shared row (workload, target) duplicated, every race between a read and a write closed, and
``autotune log`` reading it all back. A real server (tests/pg_server.py), no mocks.

The other tests of this directory that take ``db`` or ``db_url`` run on PostgreSQL too.
"""
from __future__ import annotations

import io
import json
import multiprocessing
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from sqlalchemy import create_engine, make_url, select, text

import tuning_db
from tuning_db import Database, DatabaseError, NoDatabaseError
from tuning_db.models import RecordRow, WorkloadRow
from tdb_helpers import CPU, MATMUL, key_of, make_record, open_at_the_same_instant, start
from pg_server import PASSWORD

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
KEY = key_of(*MATMUL)


def _env(tmp_path: Path) -> dict[str, str]:
    """The environment of a child: this checkout importable, no default database of the user's."""
    env = {k: v for k, v in os.environ.items() if k not in ("AUTOTUNE_DB", "AUTOTUNE_DEBUG")}
    env.update(PYTHONPATH=os.pathsep.join([str(REPO), str(HERE)]), XDG_CACHE_HOME=str(tmp_path / "xdg"),
               AUTOTUNE_CACHE_DIR=str(tmp_path / "kernels"), COLUMNS="200")
    return env


def _spawn_writers(url: str, n: int, n_batches: int, batch_size: int, tmp_path: Path) -> list[subprocess.Popen]:
    """``n`` tdb_writer.py processes, released together once all are ready (a go-file)."""
    go = tmp_path / "go"
    writers = [subprocess.Popen([sys.executable, str(HERE / "tdb_writer.py"), url, str(n_batches), str(batch_size),
                                 str(go)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env=_env(tmp_path))
               for _ in range(n)]
    for w in writers:
        line = w.stdout.readline()
        assert line == "ready\n", line + w.stderr.read()
    go.touch()
    return writers


def _autotune(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "autotune.cli", *args], cwd=tmp_path, env=_env(tmp_path),
                          capture_output=True, text=True, timeout=300)


def _log_json(tmp_path: Path, url: str, *args: str):
    proc = _autotune(tmp_path, "log", *args, "--json", "--db", url)
    assert proc.returncode == 0, proc.stderr
    assert PASSWORD not in proc.stdout + proc.stderr
    return json.loads(proc.stdout)


def _count(url: str, sql: str) -> int:
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            return conn.execute(text(sql)).scalar_one()
    finally:
        engine.dispose()


# ---------------------------------------------------------------- the acceptance test


def test_three_processes_writing_300_records_each_leave_exactly_900(postgres_url, tmp_path):
    # The database is empty: the three also race to create the tables, the workload and the target.
    writers = _spawn_writers(postgres_url, n=3, n_batches=30, batch_size=10, tmp_path=tmp_path)
    for w in writers:
        out, err = w.communicate(timeout=300)
        assert w.returncode == 0, err
        assert out.splitlines()[-1] == "done"

    assert _count(postgres_url, "SELECT count(*) FROM records") == 900
    assert _count(postgres_url, "SELECT count(DISTINCT id) FROM records") == 900
    assert _count(postgres_url, "SELECT count(*) FROM (SELECT DISTINCT run_id, trial FROM records) AS pairs") == 900
    assert _count(postgres_url, "SELECT count(*) FROM workloads") == 1
    assert _count(postgres_url, "SELECT count(*) FROM targets") == 1
    with Database(postgres_url) as db:
        runs = db.list_runs()
        assert [(r.n_records, r.status) for r in runs] == [(300, "finished")] * 3
        for run in runs:
            assert [r.trial for r in db.history(run.id)] == list(range(300))

    # ... and `autotune log` reads them all back.
    (workload,) = _log_json(tmp_path, postgres_url, "workloads")
    assert (workload["key"], workload["records"]) == (KEY, 900)
    runs = _log_json(tmp_path, postgres_url, "runs")
    assert sorted(r["records"] for r in runs) == [300, 300, 300]
    assert {r["status"] for r in runs} == {"finished"}
    (target,) = _log_json(tmp_path, postgres_url, "targets")
    assert (target["records"], target["workloads"]) == (900, 1)
    top = _log_json(tmp_path, postgres_url, "top", "-k", "1000")
    assert len(top["records"]) == 675                # the ok ones: every fourth trial timed out
    assert len({r["record"] for r in top["records"]}) == 675


def test_two_autotune_runs_share_one_database(postgres_url, tmp_path):
    tune = [sys.executable, "-m", "autotune.cli", "matmul", "-M", "16", "-N", "16", "-K", "16", "--trials", "8",
            "--tuner", "random", "--batch-size", "4", "--no-anchor", "--db", postgres_url]
    procs = [subprocess.Popen([*tune, "--seed", str(seed)], cwd=tmp_path, env=_env(tmp_path),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for seed in (1, 2)]
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
        assert PASSWORD not in out + err
    runs = _log_json(tmp_path, postgres_url, "runs")
    searches = [r for r in runs if r["tuner"] != "final"]  # each run also stores its final timing
    assert sorted(r["records"] for r in searches) == [8, 8] and {r["status"] for r in runs} == {"finished"}
    (workload,) = _log_json(tmp_path, postgres_url, "workloads")
    assert workload["records"] == sum(r["records"] for r in runs)
    # The ranking is over the database: every ok record of either run, whichever run found it.
    top = _log_json(tmp_path, postgres_url, "top", "-k", "100")
    assert len(top["records"]) == sum(r["ok"] for r in runs)
    assert {r["run"] for r in top["records"]} <= {r["id"] for r in runs}


# ---------------------------------------------------------------- creating the schema at once


def test_processes_creating_the_schema_at_the_same_instant_all_succeed(postgres_server):
    context = multiprocessing.get_context("spawn")
    n_processes, n_rounds = 4, 3
    with context.Manager() as manager, context.Pool(n_processes) as pool:
        for round_ in range(n_rounds):
            name = f"fresh_schema_{round_}"
            url = postgres_server.create_database(name)
            outcomes = open_at_the_same_instant(url, pool, manager, n_processes)
            assert outcomes == ["ok"] * n_processes, f"round {round_}: {outcomes}"
            assert _count(url, "SELECT count(*) FROM meta") == 1
            postgres_server.drop_database(name)


def _rows(url: str, sql: str) -> list[tuple]:
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            return [tuple(row) for row in conn.execute(text(sql))]
    finally:
        engine.dispose()


def _columns(url: str) -> list[tuple]:
    return _rows(url, "SELECT table_name, column_name, data_type, is_nullable FROM information_schema.columns "
                      "WHERE table_schema = 'public' ORDER BY table_name, column_name")


def _checks(url: str) -> list[tuple]:
    """(table, check constraint, its definition) of the public schema."""
    return _rows(url, "SELECT conrelid::regclass::text, conname, pg_get_constraintdef(oid) FROM pg_constraint "
                      "WHERE contype = 'c' AND connamespace = 'public'::regnamespace ORDER BY 1, 2")


def test_migrations_bring_a_version_1_database_to_the_schema_a_new_one_gets(postgres_server, postgres_url):
    fresh = postgres_server.create_database("fresh_for_migration")
    Database(fresh).close()
    with Database(postgres_url) as db:
        db.add_records(start(db), [make_record(0), make_record(1, "timeout")])
    # Back to version 1: without the columns versions 2, 3, 5 and 6 added, nor the status version 4 added.
    added = {"tuning_runs": ("pid", "host", "heartbeat_at", "resumed_from", "baseline_gflops", "anchor_gflops",
                             "ratio_low", "ratio_high"),
             "workloads": ("dag_json", "dag_hash", "dag_stored_at")}
    engine = create_engine(postgres_url)
    with engine.begin() as conn:
        for table, columns in added.items():
            for column in columns:
                conn.execute(text(f"ALTER TABLE {table} DROP COLUMN {column}"))
        conn.execute(text("ALTER TABLE records DROP CONSTRAINT ck_records_status"))
        conn.execute(text("ALTER TABLE records ADD CONSTRAINT ck_records_status CHECK (status IN "
                          "('ok', 'compile_error', 'runtime_error', 'wrong_answer', 'timeout', 'invalid'))"))
        conn.execute(text("UPDATE meta SET value = '1' WHERE key = 'schema_version'"))
    engine.dispose()
    assert ("tuning_runs", "pid", "integer", "YES") not in _columns(postgres_url)

    with Database(postgres_url) as db:
        (run,) = db.list_runs()
        assert (run.n_records, run.n_ok, run.pid, run.heartbeat_at) == (2, 1, None, None)
        assert (run.anchor_gflops, run.ratio_low, run.ratio_high) == (None, None, None)
        assert db.workload_dag(KEY) is None
    assert _columns(postgres_url) == _columns(fresh)
    assert _checks(postgres_url) == _checks(fresh)
    assert _count(postgres_url, "SELECT value FROM meta WHERE key = 'schema_version'") == str(tuning_db.SCHEMA_VERSION)
    with Database(postgres_url) as db:
        db.add_records(db.list_runs()[0].id, [make_record(2, "worker_lost")])  # refused before version 4
    postgres_server.drop_database("fresh_for_migration")


# ---------------------------------------------------------------- reads then writes, interleaved


def test_a_stale_run_taken_over_by_two_processes_at_once_is_closed_once(postgres_url):
    # The second takeover runs to its end in the middle of the first (between the first's read
    # of the running runs and its write): the first must not close the run again.
    with Database(postgres_url) as first, Database(postgres_url) as second:
        killed = start(first)
        seen_by_second = []

        def dead_but_second_takes_over_first(pid, started):
            if not seen_by_second:
                seen_by_second.append(second.take_over_stale_runs(KEY, CPU, alive=lambda *_: False))
            return False

        assert first.take_over_stale_runs(KEY, CPU, alive=dead_but_second_takes_over_first) == []
        assert seen_by_second == [[killed]]
        assert first.get_run(killed).status == "interrupted"


def test_a_dag_stored_while_another_process_stores_one_keeps_the_first(postgres_url):
    name, params = MATMUL
    with Database(postgres_url) as db, Database(postgres_url) as other:
        start(db)
        with db._writing() as s:
            row = tuning_db.rows.get_or_create_workload(s, KEY, name, params)
            assert row.dag_json is None                       # read: no DAG yet
            other.start_run(KEY, name, params, CPU, "xgb", 0, 10, dag_json='{"first":1}', dag_hash="1" * 16)
            tuning_db.rows.store_dag(s, row, '{"second":2}', "2" * 16, tuning_db.records.utc_now())
            assert row.dag_json == '{"first":1}'
        assert db.workload_dag(KEY) == '{"first":1}'


def _waiting_for_a_lock(url: str) -> int:
    """How many sessions of the server wait for a lock (``engine.serialize``'s, or a row's)."""
    return _count(url, "SELECT count(*) FROM pg_locks WHERE NOT granted")


@pytest.mark.timeout(300)
def test_the_same_file_imported_twice_at_once_adds_each_record_once(postgres_url, tmp_path, monkeypatch):
    with Database(postgres_url) as db:
        start(db)          # the workload and target rows exist: the imports do not meet on inserting them
    with Database(tmp_path / "source.db") as source:
        source.add_records(start(source), [make_record(i) for i in range(20)])
        lines = io.StringIO()
        source.export_jsonl(lines)
    exported = lines.getvalue()

    # A second import starts while the first is inside its transaction, after the first has read
    # what is stored: without a lock it would add the 20 records too, and so would the first.
    from tuning_db import jsonl

    real_seen = jsonl._Importer._seen
    second: dict[str, object] = {}

    def import_again():
        with Database(postgres_url) as db:
            second["added"] = db.import_jsonl(io.StringIO(exported))

    def seen_then_let_another_import_start(self, workload_id, target_id):
        found = real_seen(self, workload_id, target_id)
        if "thread" not in second:
            second["thread"] = thread = threading.Thread(target=import_again)
            thread.start()
            # Go on once the second import has finished (the race) or waits for our lock.
            while thread.is_alive() and not _waiting_for_a_lock(postgres_url):
                thread.join(timeout=0.01)
        return found

    monkeypatch.setattr(jsonl._Importer, "_seen", seen_then_let_another_import_start)
    with Database(postgres_url) as db:
        assert db.import_jsonl(io.StringIO(exported)) == 20
    second["thread"].join(timeout=120)
    assert second["added"] == 0
    assert _count(postgres_url, "SELECT count(*) FROM records") == 20


# ---------------------------------------------------------------- JSON, URLs, empty databases


def test_a_json_field_is_queryable_on_both_backends(db):
    big = ("matmul", {"M": 1024, "N": 1024, "K": 512, "dtype": "float64"})
    for workload in (MATMUL, big):
        db.add_records(start(db, workload=workload), [make_record(0, workload=workload)])
    json_field = tuning_db.rows.json_field
    with db._reading() as s:
        assert s.scalars(select(WorkloadRow.key).where(json_field(WorkloadRow.params, "M").as_integer() > 100)
                         ).all() == [key_of(*big)]
        assert s.scalars(select(WorkloadRow.key).where(json_field(WorkloadRow.params, "dtype").as_string()
                                                       == "float32")).all() == [KEY]
        orders = s.scalars(select(json_field(RecordRow.config, "order").as_string())).all()
    assert orders == ["ijk", "ijk"]


def test_the_password_never_shows(postgres_url, tmp_path):
    with Database(postgres_url) as db:
        assert PASSWORD not in db.location and PASSWORD not in repr(db)
        assert db.location.startswith("postgresql+psycopg://autotune:***@127.0.0.1:")
    unreachable = str(make_url(postgres_url).set(port=1).render_as_string(hide_password=False))  # nothing listens
    with pytest.raises(DatabaseError) as info:
        Database(unreachable)
    message = str(info.value)
    assert PASSWORD not in message and "cannot open" in message and "\n" not in message
    proc = _autotune(tmp_path, "log", "runs", "--db", unreachable)
    assert proc.returncode == 1 and PASSWORD not in proc.stdout + proc.stderr
    assert "***@127.0.0.1:1/" in proc.stderr


def test_an_empty_database_is_no_tuning_database_yet(postgres_url, tmp_path):
    """Read-only, an empty server database is like a missing file: nothing tuned (so
    --print-passes shows the default schedule), not a foreign database."""
    with pytest.raises(NoDatabaseError, match="no tuning database here"):
        Database(postgres_url, create=False)
    proc = _autotune(tmp_path, "log", "workloads", "--db", postgres_url)
    assert proc.returncode == 1 and "no tuning database here" in proc.stderr
    engine = create_engine(postgres_url)
    try:
        with engine.begin() as conn:                            # a table of someone else's
            conn.exec_driver_sql("CREATE TABLE other (x integer)")
        with pytest.raises(DatabaseError, match="not a tuning database") as info:
            Database(postgres_url, create=False)
        assert not isinstance(info.value, NoDatabaseError)
        with engine.begin() as conn:
            conn.exec_driver_sql("DROP TABLE other")
    finally:
        engine.dispose()
    assert _count(postgres_url, "SELECT count(*) FROM pg_tables WHERE schemaname = 'public'") == 0
    with Database(postgres_url):                                  # a writer creates the tables
        pass
    assert _log_json(tmp_path, postgres_url, "workloads") == []


def test_the_schema_uses_jsonb_on_postgresql(postgres_url):
    Database(postgres_url).close()
    types = _count(postgres_url, "SELECT string_agg(DISTINCT data_type, ',') FROM information_schema.columns "
                                 "WHERE table_name IN ('workloads', 'records') AND column_name IN ('params', 'config', 'costs')")
    assert types == "jsonb"
