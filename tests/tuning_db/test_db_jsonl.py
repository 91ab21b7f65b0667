"""JSON lines: export then import gives equal contents; bad lines are named by number."""
from __future__ import annotations

import io
import json
from dataclasses import asdict

import pytest

import tuning_db
from tuning_db import RecordFormatError
from tdb_helpers import CPU, GPU, MATMUL, key_of, make_record, start

CONV = ("conv2d", {"N": 1, "C": 64, "H": 56, "W": 56, "K": 64})


def _fill(db) -> None:
    r1 = start(db, CPU)
    db.add_records(r1, [make_record(0), make_record(1, "compile_error", error="bad\n\"quoted\" ünïcode"),
                        make_record(2, median_s=7e-4)])
    db.finish_run(r1)
    r2 = start(db, GPU, tuner="ga", seed=None)
    db.add_records(r2, [make_record(i, target=GPU) for i in range(3)])
    r3 = start(db, CPU, workload=CONV)
    db.add_records(r3, [make_record(0, "timeout", workload=CONV)])
    db.finish_run(r3, "interrupted")


def _contents(db) -> tuple[list[dict], list[dict]]:
    """Every record and run as dicts, without database ids."""
    records = [asdict(r) | {"id": None, "run_id": None}
               for w in db.list_workloads() for r in db.records_for_task(w.key, None)]
    local = {"id": None, "pid": None, "host": None, "heartbeat_at": None, "resumed_from": None,
             "baseline_gflops": None}  # the process and resume links of a run are not exported
    runs = [asdict(r) | local for r in db.list_runs()]
    return records, runs


def test_export_then_import_gives_equal_contents(db, tmp_path):
    _fill(db)
    path = tmp_path / "records.jsonl"
    assert db.export_jsonl(path) == 7
    first = json.loads(path.read_text().splitlines()[0])
    assert (first["format"], first["version"]) == ("autotune-record", 1)
    assert first["workload"] == {"key": key_of(*MATMUL), "name": "matmul", "params": MATMUL[1]}
    assert first["target"] == CPU.to_dict() and first["run"]["tuner"] == "xgb"

    with tuning_db.Database(tmp_path / "fresh.db") as fresh:
        assert fresh.import_jsonl(path) == 7
        assert _contents(fresh) == _contents(db)
        assert fresh.import_jsonl(path) == 0            # exact duplicates are skipped
        assert _contents(fresh) == _contents(db)


def _fill_final(db) -> int:
    """A searching run and its final timing run (anchor and ratio interval); the final run's id."""
    name, params = MATMUL
    searched = start(db)
    db.add_records(searched, [make_record(0)])
    db.finish_run(searched)
    final = db.start_run(key_of(name, params), name, params, CPU, "final", None, 1, "0.1.0",
                         anchor_gflops=0.4, ratio_interval=(1.08, 1.21))
    db.add_records(final, [make_record(1)])
    db.finish_run(final)
    return final


def test_a_final_runs_ratio_interval_is_exported_and_imported(db, tmp_path):
    _fill_final(db)
    lines = [json.loads(line) for line in _lines(db)]
    assert [line["run"]["ratio_interval"] for line in lines] == [None, [1.08, 1.21]]
    path = tmp_path / "records.jsonl"
    db.export_jsonl(path)
    with tuning_db.Database(tmp_path / "fresh.db") as fresh:
        assert fresh.import_jsonl(path) == 2
        assert _contents(fresh) == _contents(db)
        final = fresh.list_runs()[-1]
        assert (final.tuner, final.anchor_gflops, final.ratio_low, final.ratio_high) == ("final", 0.4, 1.08, 1.21)


def test_a_ratio_interval_is_optional_on_import_and_checked(db, tmp_path):
    _fill_final(db)
    line = json.loads(_lines(db)[1])
    older = line | {"run": {k: v for k, v in line["run"].items() if k != "ratio_interval"}}  # before version 6
    with tuning_db.Database(tmp_path / "fresh.db") as fresh:
        assert fresh.import_jsonl(io.StringIO(json.dumps(older))) == 1
        (run,) = fresh.list_runs()
        assert (run.anchor_gflops, run.ratio_low, run.ratio_high) == (0.4, None, None)
        for bad in ([1.21, 1.08], [0, 1], [1.08], "1.08-1.21", [1.08, None], [1, float("inf")]):
            text = json.dumps(line | {"run": line["run"] | {"ratio_interval": bad}})
            with pytest.raises(RecordFormatError, match=r"line 1: field 'run.ratio_interval' must be two finite"):
                fresh.import_jsonl(io.StringIO(text))
        assert len(fresh.list_runs()) == 1


def test_import_into_the_same_database_adds_nothing(db):
    _fill(db)
    buf = io.StringIO()
    db.export_jsonl(buf)
    before = _contents(db)
    assert db.import_jsonl(io.StringIO(buf.getvalue())) == 0
    assert _contents(db) == before


def test_export_one_workload(db):
    _fill(db)
    buf = io.StringIO()
    assert db.export_jsonl(buf, workload_key=key_of(*CONV)) == 1
    assert json.loads(buf.getvalue())["status"] == "timeout"


def _lines(db) -> list[str]:
    buf = io.StringIO()
    db.export_jsonl(buf)
    return buf.getvalue().splitlines()


@pytest.mark.parametrize("bad_line, message", [
    ('{"format": "autotune-record", "version": 1, "workload": ', r"line 3: not valid JSON"),
    ('[1, 2]', r"line 3: expected a JSON object, got list"),
    ('{"format": "tvm-log", "version": 1}', r"line 3: not an autotune record \(format 'tvm-log'"),
    ('{"format": "autotune-record", "version": 2}', r"line 3: unsupported record format version 2 .*upgrade"),
])
def test_malformed_line_is_named_and_nothing_is_imported(db, tmp_path, bad_line, message):
    _fill(db)
    lines = _lines(db)
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join(lines[:2] + [bad_line] + lines[2:]) + "\n")
    with tuning_db.Database(tmp_path / "fresh.db") as fresh:
        with pytest.raises(RecordFormatError, match=str(path) + " " + message):
            fresh.import_jsonl(path)
        assert fresh.list_workloads() == []


def test_invalid_field_values_are_named(db):
    _fill(db)
    record = json.loads(_lines(db)[0])
    cases = [
        ({"status": "exploded"}, "line 2: unknown record status 'exploded'"),
        ({"config": "tile=8"}, "line 2: MeasureRecord.config must be a dict"),
        ({"created_at": "yesterday"}, "line 2: field 'created_at' is not an ISO 8601 time"),
        ({"target": {"kind": "cpu", "gpu": "x"}}, "line 2: .*unexpected keyword argument 'gpu'"),
    ]
    for change, message in cases:
        text = "\n" + json.dumps(record | change) + "\n"    # a blank first line is skipped
        with pytest.raises(RecordFormatError, match=message):
            db.import_jsonl(io.StringIO(text))
    missing = {k: v for k, v in record.items() if k != "workload"}
    with pytest.raises(RecordFormatError, match="line 1: missing field 'workload'"):
        db.import_jsonl(io.StringIO(json.dumps(missing)))


def test_missing_file_is_a_database_error(db, tmp_path):
    with pytest.raises(tuning_db.DatabaseError, match="cannot read .*nothing.jsonl: No such file"):
        db.import_jsonl(tmp_path / "nothing.jsonl")
