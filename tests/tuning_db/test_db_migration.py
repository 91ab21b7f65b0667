"""A database written before schema version 2 opens, migrated in place (through every later
version), and keeps working; so does one of version 5, the last before final timing runs
kept their interval of the winner's ratio to the anchor.

``data/schema_v1.sql`` is the SQL dump of a file the version-1 code wrote (a finished run
of three records and a run killed after one record, on host "oldhost"); ``data/schema_v5.sql``
one the version-5 code wrote (a finished run of three records, one failed, and its final
timing run of two records with the anchor's GFLOP/s).
"""
from __future__ import annotations

import sqlite3
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

import tuning_db
from tuning_db.schema import MIGRATIONS
from tdb_helpers import CPU, MATMUL, database_from_dump, key_of

FIXTURE = Path(__file__).parent / "data" / "schema_v1.sql"
V5_FIXTURE = Path(__file__).parent / "data" / "schema_v5.sql"
KEY = 'matmul{"K":16,"M":16,"N":16,"dtype":"float32","out_dtype":null,"transpose_a":false,"transpose_b":false}'
PARAMS = {"K": 16, "M": 16, "N": 16, "dtype": "float32", "out_dtype": None, "transpose_a": False,
          "transpose_b": False}
STARTED = datetime(2025, 1, 1, 12, 0, tzinfo=timezone.utc)


@pytest.fixture
def v1_file(tmp_path) -> Path:
    return database_from_dump(FIXTURE, tmp_path / "old.db")


def _version(path: Path) -> str:
    with sqlite3.connect(path) as con:
        return con.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0]


def test_the_fixture_is_version_1_and_every_later_version_has_a_migration(v1_file):
    assert _version(v1_file) == "1"
    assert tuning_db.SCHEMA_VERSION == 6 and set(MIGRATIONS) == {1, 2, 3, 4, 5}


def test_a_version_1_file_opens_with_its_runs_and_records(v1_file):
    with tuning_db.Database(v1_file, create=False) as db:
        runs = db.list_runs()
        assert [(r.id, r.status, r.n_records, r.n_ok) for r in runs] == [(1, "finished", 3, 2), (2, "running", 1, 1)]
        assert all(r.pid is None and r.host is None and r.heartbeat_at is None for r in runs)
        assert db.best(KEY).median_s == 1e-6
        assert [b for _, b in db.best_so_far(1)] == [pytest.approx(4.096), pytest.approx(4.096), pytest.approx(8.192)]
    assert _version(v1_file) == str(tuning_db.SCHEMA_VERSION)
    with sqlite3.connect(v1_file) as con:
        columns = {row[1] for row in con.execute("PRAGMA table_info(tuning_runs)")}
        workload_columns = {row[1] for row in con.execute("PRAGMA table_info(workloads)")}
    assert {"pid", "host", "heartbeat_at", "resumed_from", "baseline_gflops", "anchor_gflops",
            "ratio_low", "ratio_high"} <= columns
    assert {"dag_json", "dag_hash", "dag_stored_at"} <= workload_columns


def test_an_old_killed_run_ages_from_its_start_and_can_be_taken_over(v1_file):
    with tuning_db.Database(v1_file) as db:
        killed = db.get_run(2)
        assert killed.state(now=STARTED + timedelta(minutes=10)) == "running"
        assert killed.state(now=STARTED + timedelta(hours=2)) == "stale"
        assert db.take_over_stale_runs(KEY, "cpu", now=STARTED + timedelta(hours=2)) == [2]
        target = db.list_targets()[0].target
        new = db.start_run(KEY, "matmul", PARAMS, target, "xgb", 0, 10, resumed_from=2, baseline_gflops=8.192)
        assert [r.status for r in db.list_runs()] == ["finished", "interrupted", "running"]
        assert db.get_run(new).resumed_from == 2


def test_a_migrated_file_takes_worker_lost_records_and_still_refuses_unknown_statuses(v1_file):
    with tuning_db.Database(v1_file) as db:
        (record_id,) = db.add_records(1, [replace(db.history(1)[0], trial=3, status="worker_lost",
                                                  costs=[], median_s=None, spread=None, gflops=None)])
        assert db.get_record(record_id).status == "worker_lost"
    with sqlite3.connect(v1_file) as con:
        assert con.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        with pytest.raises(sqlite3.IntegrityError, match="ck_records_status"):
            con.execute("UPDATE records SET status = 'lost' WHERE id = ?", (record_id,))


def test_a_migrated_file_is_not_migrated_again(v1_file):
    tuning_db.Database(v1_file).close()
    with sqlite3.connect(v1_file) as con:
        con.execute("UPDATE tuning_runs SET host = 'kept' WHERE id = 1")
    with tuning_db.Database(v1_file) as db:
        assert db.get_run(1).host == "kept"


@pytest.fixture
def v5_file(tmp_path) -> Path:
    return database_from_dump(V5_FIXTURE, tmp_path / "v5.db")


def test_a_version_5_file_keeps_its_runs_with_no_ratio_interval(v5_file):
    assert _version(v5_file) == "5"
    with sqlite3.connect(v5_file) as con:
        before = con.execute("SELECT * FROM tuning_runs ORDER BY id").fetchall()
    with tuning_db.Database(v5_file) as db:
        runs = db.list_runs()
        assert [(r.id, r.tuner, r.status, r.n_records, r.n_ok) for r in runs] == [
            (1, "xgb", "finished", 3, 2), (2, "final", "finished", 2, 2)]
        assert [r.anchor_gflops for r in runs] == [None, 0.25]
        assert all(r.ratio_low is None and r.ratio_high is None for r in runs)
        assert len(db.history(1)) == 3 and len(db.history(2)) == 2
        # ... and the migrated file takes a final run with its interval.
        name, params = MATMUL
        new = db.start_run(key_of(name, params), name, params, CPU, "final", None, 2, "0.1.0",
                           anchor_gflops=0.25, ratio_interval=(1.08, 1.21))
        assert (db.get_run(new).ratio_low, db.get_run(new).ratio_high) == (1.08, 1.21)
    assert _version(v5_file) == str(tuning_db.SCHEMA_VERSION)
    with sqlite3.connect(v5_file) as con:
        after = con.execute("SELECT * FROM tuning_runs WHERE id <= 2 ORDER BY id").fetchall()
    assert after == [row + (None, None) for row in before]   # the new columns come last, empty
