"""``autotune log ...``: every subcommand against a database a real run filled."""
from __future__ import annotations

import json
import re

import pytest

import tuning_db

from cli_helpers import MATMUL_KEY


def test_log_workloads_lists_key_name_records_best(tuned):
    cli, _ = tuned
    out = cli.run("log", "workloads").stdout
    header, row = out.splitlines()
    assert header.split() == ["key", "name", "records", "best", "GFLOP/s"]
    assert row.split()[:3] == [MATMUL_KEY, "matmul", "12"]


def test_log_targets(tuned):
    cli, _ = tuned
    lines = cli.run("log", "targets").stdout.splitlines()
    assert lines[0].split()[:2] == ["kind", "device"] and lines[1].startswith("cpu ")
    assert lines[1].split()[-2:] == ["1", "12"]


@pytest.mark.parametrize("extra", [[], ["--workload", "matmul"], ["--workload", "matmul{"]])
def test_log_runs(tuned, extra):
    cli, _ = tuned
    lines = cli.run("log", "runs", *extra).stdout.splitlines()
    assert len(lines) == 2
    assert re.match(r"\s*1\s+" + re.escape(MATMUL_KEY) + r"\s+cpu.*random\s+0\s+finished\s+12\s+12", lines[1])


def test_log_top(tuned):
    cli, _ = tuned
    lines = cli.run("log", "top", "matmul", "-k", "3", "--target", "cpu").stdout.splitlines()
    assert lines[0] == f"workload: {MATMUL_KEY}"
    rows = [line.split() for line in lines[2:]]
    assert len(rows) == 3
    speeds = [float(r[1]) for r in rows]
    assert speeds == sorted(speeds, reverse=True)
    with tuning_db.Database(cli.db) as db:
        assert [int(r[0]) for r in rows] == [r.id for r in db.top_k(MATMUL_KEY, 3)]


def test_log_history_table_and_png(tuned, tmp_path):
    cli, _ = tuned
    png = tmp_path / "history.png"
    lines = cli.run("log", "history", "1", "--plot", str(png)).stdout.splitlines()
    assert lines[0].startswith(f"run 1: {MATMUL_KEY} on cpu")
    rows = [line.split() for line in lines[2:] if not line.startswith("plot:")]
    assert [int(r[0]) for r in rows] == list(range(12))
    best = [float(r[3]) for r in rows if r[3] != "-"]
    assert best == sorted(best), "best so far never decreases"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def _store_failures(path, key_sizes=(16, 32)):
    """A database with two matmul workloads and a few failed records, written with the library."""
    with tuning_db.Database(path) as db:
        target = tuning_db.TargetInfo("cpu", "test-cpu")
        for n in key_sizes:
            params = dict(K=n, M=n, N=n, dtype="float32", out_dtype=None, transpose_a=False, transpose_b=False)
            key = "matmul" + json.dumps(params, sort_keys=True, separators=(",", ":"))
            run = db.start_run(key, "matmul", params, target, "random", 0, 3)
            records = [
                tuning_db.MeasureRecord(workload_key=key, workload_name="matmul", params=params, target=target,
                                        config={"n": i}, status=status, error=error, trial=i)
                for i, (status, error) in enumerate([
                    ("compile_error", "gcc failed:\nkernel.c:3: error: expected ';'"),
                    ("compile_error", "gcc failed:\nkernel.c:9: error: unknown type"),
                    ("timeout", "no result within 10 s; the measuring process was killed"),
                ])
            ]
            db.add_records(run, records)
            db.finish_run(run)


def test_log_errors_counts_per_status_with_a_sample(cli):
    _store_failures(cli.db)
    lines = cli.run("log", "errors").stdout.splitlines()
    assert lines[0].split() == ["status", "count", "latest", "message"]
    assert re.match(r"compile_error\s+4\s+gcc failed:$", lines[1])
    assert re.match(r"timeout\s+2\s+no result within 10 s", lines[2])
    one = cli.run("log", "errors", "--workload", 'matmul{"K":32').stdout.splitlines()
    assert re.match(r"compile_error\s+2\s", one[1])


def test_log_errors_agrees_with_the_database(tuned):
    cli, _ = tuned
    out = cli.run("log", "errors").stdout
    with tuning_db.Database(cli.db) as db:
        found = db.errors_by_status()
    if not found:
        assert out == "no failed trials\n"
    else:
        rows = [line.split()[:2] for line in out.splitlines()[1:]]
        assert rows == [[status, str(count)] for status, (count, _) in found.items()]


def test_ambiguous_workload_name_lists_the_candidates(cli):
    _store_failures(cli.db)
    proc = cli.run("log", "top", "matmul", expect=1)
    assert proc.stderr.startswith("Error: 'matmul' matches several workloads: matmul{")
    assert 'give more of the key' in proc.stderr and "Traceback" not in proc.stderr
    assert cli.run("log", "runs", "--workload", 'matmul{"K":16').stdout.count("\n") == 2


def test_export_then_import_into_a_fresh_database_gives_equal_contents(tuned, tmp_path):
    cli, _ = tuned
    exported = tmp_path / "records.jsonl"
    assert cli.run("log", "export", str(exported)).stdout.startswith("exported 12 records")
    fresh = tmp_path / "fresh.db"
    proc = cli.run("log", "import", str(exported), "--db", str(fresh), db=False)
    assert proc.stdout.startswith(f"imported 12 new records into {fresh}")
    again = cli.run("log", "import", str(exported), "--db", str(fresh), db=False)
    assert again.stdout.startswith("imported 0 new records"), "import skips records already present"
    with tuning_db.Database(cli.db) as a, tuning_db.Database(fresh) as b:
        assert a.records_for_task(MATMUL_KEY, None) == b.records_for_task(MATMUL_KEY, None)
        assert [(r.workload_key, r.n_records, r.status) for r in a.list_runs()] == \
               [(r.workload_key, r.n_records, r.status) for r in b.list_runs()]
    reexported = tmp_path / "again.jsonl"
    cli.run("log", "export", str(reexported), "--workload", "matmul", "--db", str(fresh), db=False)
    assert [json.loads(x) for x in exported.read_text().splitlines()] == \
           [json.loads(x) for x in reexported.read_text().splitlines()]


def test_export_to_stdout(tuned):
    cli, _ = tuned
    proc = cli.run("log", "export", "-")
    lines = proc.stdout.splitlines()
    assert len(lines) == 12 and json.loads(lines[0])["format"] == "autotune-record"
    assert "exported 12 records" in proc.stderr


def test_log_show_record_ir_and_source(tuned):
    cli, _ = tuned
    with tuning_db.Database(cli.db) as db:
        best = db.best(MATMUL_KEY)
    plain = cli.run("log", "show", str(best.id)).stdout
    assert re.search(rf"^record +{best.id}$", plain, re.M)
    assert re.search(rf"^config hash +{best.config_hash}$", plain, re.M)
    assert re.search(r"^status +ok$", plain, re.M)
    ir = cli.run("log", "show", str(best.id), "--ir").stdout
    assert ir.startswith(plain) and "def kernel(A: float32[16, 16], B: float32[16, 16], C: float32[16, 16]):" in ir
    source = cli.run("log", "show", str(best.id), "--source").stdout
    assert source.startswith(plain) and "void kernel(float* __restrict__ A" in source and "#include" in source
