"""Records: validation of the dataclasses, and writing then reading them back unchanged."""
from __future__ import annotations

from datetime import datetime

import pytest

import tuning_db
from tuning_db import MeasureRecord, TargetInfo
from tdb_helpers import CPU, GPU, MATMUL, key_of, make_record, start


def test_records_round_trip_unchanged(db):
    run = start(db)
    written = [make_record(0), make_record(1, "compile_error", error="error: expected ';'\n  x = 1"),
               make_record(2, "timeout"), make_record(3, median_s=5e-4)]
    ids = db.add_records(run, written)
    assert len(ids) == 4 and len(set(ids)) == 4
    read = db.history(run)
    assert read == written
    assert [r.id for r in read] == ids
    assert all(r.run_id == run for r in read)
    assert read[0].created_at.tzinfo is not None
    assert db.get_record(ids[1]) == written[1]
    assert db.get_record(10_000) is None


def test_unknown_status_is_a_clear_value_error():
    with pytest.raises(ValueError, match="unknown record status 'crashed'; expected one of ok, compile_error"):
        make_record(0, "crashed")


def test_ok_record_needs_a_median():
    name, params = MATMUL
    with pytest.raises(ValueError, match="'ok' record needs a positive median_s"):
        MeasureRecord(workload_key=key_of(name, params), workload_name=name, params=params, target=CPU,
                      config={}, status="ok")


def test_record_checks_and_normalises_values():
    with pytest.raises(ValueError, match="timezone-aware"):
        MeasureRecord(**{**_fields(make_record(0)), "created_at": datetime(2025, 1, 1)})
    with pytest.raises(ValueError, match="JSON-serialisable"):
        make_record(0, config={"f": object()})
    with pytest.raises(ValueError, match="costs must be finite"):
        MeasureRecord(**{**_fields(make_record(0)), "costs": [float("inf")]})
    with pytest.raises(ValueError, match="unknown target kind 'no such'"):
        TargetInfo("no such")  # any identifier is a kind (the registry lives in schedule.targets)
    r = make_record(0, config={"b": 1, "a": [1, 2]})
    assert r.config_hash == tuning_db.config_hash({"a": [1, 2], "b": 1})  # computed, key-order free
    long_error = "E" * 3000 + "M" * 10_000 + "Z" * 3000
    cut = make_record(1, "compile_error", error=long_error).error
    assert len(cut) < tuning_db.MAX_ERROR_CHARS + 100
    assert cut.startswith("E" * 3000) and cut.endswith("Z" * 1024) and "characters cut" in cut


def test_add_records_checks_the_run(db):
    run = start(db)
    with pytest.raises(ValueError, match="but run .* tunes"):
        db.add_records(run, [make_record(0, target=GPU)])
    with pytest.raises(tuning_db.DatabaseError, match="no tuning run with id 999"):
        db.add_records(999, [make_record(0)])
    assert db.history(run) == []  # the failed batch wrote nothing


def test_runs_start_and_finish(db):
    run = start(db)
    info = db.get_run(run)
    assert (info.status, info.finished_at, info.tuner, info.seed) == ("running", None, "xgb", 0)
    db.finish_run(run, "interrupted")
    info = db.get_run(run)
    assert info.status == "interrupted" and info.finished_at >= info.started_at
    with pytest.raises(ValueError, match="unknown run status"):
        db.finish_run(run, "done")
    # A second run of the same workload and target reuses their rows.
    start(db, seed=1)
    assert len(db.list_workloads()) == 1 and len(db.list_targets()) == 1


def _start_final(db, ratio_interval) -> int:
    name, params = MATMUL
    return db.start_run(key_of(name, params), name, params, CPU, "final", None, 3, "0.1.0",
                        anchor_gflops=2.5, ratio_interval=ratio_interval)


def test_a_final_run_keeps_its_ratio_interval(db):
    searched = start(db)
    final = _start_final(db, (1.08, 1.21))
    point = _start_final(db, (1, 1))        # as narrow as it gets: ints, low == high
    runs = {r.id: r for r in db.list_runs(key_of(*MATMUL))}
    assert (runs[final].ratio_low, runs[final].ratio_high, runs[final].anchor_gflops) == (1.08, 1.21, 2.5)
    assert (runs[point].ratio_low, runs[point].ratio_high) == (1.0, 1.0)
    assert (runs[searched].ratio_low, runs[searched].ratio_high) == (None, None)
    assert db.get_run(final) == runs[final]


@pytest.mark.parametrize("interval", [(1.2, 1.1), (0, 1), (float("nan"), 1), (1, float("inf")),
                                      (1.1,), (1.0, "1.2"), (True, 2.0), 1.1])
def test_a_ratio_interval_that_is_not_one_is_refused(db, interval):
    with pytest.raises(ValueError, match="ratio_interval must be two finite positive numbers"):
        _start_final(db, interval)
    assert db.list_runs() == []             # refused before anything was written


def _fields(record: MeasureRecord) -> dict:
    from dataclasses import fields

    return {f.name: getattr(record, f.name) for f in fields(record)}
