"""Workloads keep their DAG (schema version 3): stored once per key, read back, migrated to.

``data/schema_v2.sql`` is the SQL dump of a file the version-2 code wrote (one finished run
of three records of a matmul, one of them failed).
"""
from __future__ import annotations

import hashlib
import json
import sqlite3
from pathlib import Path

import pytest
from sqlalchemy import text

import tuning_db
from tdb_helpers import CPU, MATMUL, database_from_dump, key_of, make_record, start

FIXTURE = Path(__file__).parent / "data" / "schema_v2.sql"
DAG = '{"format":1,"name":"matmul"}'     # the database stores the text as given
DAG_HASH = "0123456789abcdef"


@pytest.fixture
def v2_file(tmp_path) -> Path:
    return database_from_dump(FIXTURE, tmp_path / "old.db")


def _start_with_dag(db, dag=DAG, dag_hash=DAG_HASH) -> int:
    name, params = MATMUL
    return db.start_run(key_of(name, params), name, params, CPU, "xgb", 0, 100, "0.1.0",
                        dag_json=dag, dag_hash=dag_hash)


def test_a_run_stores_its_workloads_dag_once(db):
    key = key_of(*MATMUL)
    assert db.workload_dag(key) is None
    _start_with_dag(db)
    assert db.workload_dag(key) == DAG
    _start_with_dag(db, dag='{"format":1,"name":"other"}', dag_hash="fedcba9876543210")
    assert db.workload_dag(key) == DAG  # the first DAG stays: the one its first records were measured with
    with db._engine.connect() as con:
        rows = con.execute(text("SELECT key, dag_json, dag_hash, dag_stored_at FROM workloads")).all()
    assert len(rows) == 1 and rows[0][:3] == (key, DAG, DAG_HASH) and rows[0][3] is not None


def test_a_run_without_a_dag_leaves_none_and_a_later_run_adds_it(db):
    key = key_of(*MATMUL)
    start(db)
    assert db.workload_dag(key) is None
    _start_with_dag(db)
    assert db.workload_dag(key) == DAG


def test_an_unknown_key_has_no_dag(db):
    assert db.workload_dag("nothing{}") is None


def test_dag_json_and_hash_go_together(db):
    with pytest.raises(ValueError, match="together"):
        _start_with_dag(db, dag_hash=None)


def test_a_version_2_file_migrates_with_empty_dags_and_keeps_its_records(v2_file):
    key = key_of(*MATMUL)
    with tuning_db.Database(v2_file) as db:
        assert db.workload_dag(key) is None
        (run,) = db.list_runs()
        assert (run.status, run.n_records, run.n_ok, run.host) == ("finished", 3, 2, "oldhost")
        assert db.best(key).median_s == pytest.approx(1e-3)
        _start_with_dag(db)
        assert db.workload_dag(key) == DAG
    with sqlite3.connect(v2_file) as con:
        version = con.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0]
    assert version == str(tuning_db.SCHEMA_VERSION)


def test_a_version_2_file_opens_read_only_after_migration(v2_file):
    tuning_db.Database(v2_file).close()
    with tuning_db.Database(v2_file, create=False) as db:
        assert len(db.history(1)) == 3


def test_the_dag_travels_with_exported_records_and_is_stored_on_import(db, tmp_path):
    run = _start_with_dag(db)
    db.add_records(run, [make_record(1), make_record(2, "wrong_answer")])
    lines = tmp_path / "records.jsonl"
    assert db.export_jsonl(lines) == 2
    assert all(json.loads(line)["workload"]["dag"] == DAG for line in lines.read_text().splitlines())
    with tuning_db.Database(tmp_path / "other.db") as other:
        assert other.import_jsonl(lines) == 2
        assert other.workload_dag(key_of(*MATMUL)) == DAG
        with sqlite3.connect(other.path) as con:
            (stored_hash,) = con.execute("SELECT dag_hash FROM workloads").fetchone()
    assert stored_hash == hashlib.sha256(DAG.encode()).hexdigest()[:16]


def test_records_without_a_dag_export_without_one_and_a_bad_dag_is_refused(db, tmp_path):
    db.add_records(start(db), [make_record(1)])
    lines = tmp_path / "records.jsonl"
    db.export_jsonl(lines)
    line = json.loads(lines.read_text())
    assert "dag" not in line["workload"]
    line["workload"]["dag"] = {"format": 1}
    lines.write_text(json.dumps(line) + "\n")
    with tuning_db.Database(tmp_path / "other.db") as other:
        with pytest.raises(tuning_db.RecordFormatError, match="workload.dag"):
            other.import_jsonl(lines)
