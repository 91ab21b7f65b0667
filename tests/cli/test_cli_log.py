"""``autotune log ...``: every subcommand against a database a real run filled."""
from __future__ import annotations

import json
import re
import sqlite3

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


def test_log_runs_shows_a_final_runs_ratio_interval(cli):
    params = {"M": 16, "N": 16, "K": 16}
    target = tuning_db.TargetInfo("cpu", "test cpu", "gcc", "-O2", "node1")
    with tuning_db.Database(cli.db) as db:
        db.start_run(MATMUL_KEY, "matmul", params, target, "random", 0, 8, "0.1.0")
        db.start_run(MATMUL_KEY, "matmul", params, target, "final", None, 3, "0.1.0",
                     anchor_gflops=2.5, ratio_interval=(1.0823, 1.2141))
    header, search, final = cli.run("log", "runs").stdout.splitlines()
    assert header.endswith("anchor GFLOP/s  ratio interval")
    assert re.search(r"\s-\s+-$", search) and re.search(r"\s2\.5  1\.08-1\.21$", final), (search, final)
    runs = json.loads(cli.run("log", "runs", "--json").stdout)
    assert [(r["tuner"], r["anchor_gflops"], r["ratio_interval"]) for r in runs] == [
        ("random", None, None), ("final", 2.5, [1.0823, 1.2141])]


def test_log_top(tuned, tmp_path):
    cli, _ = tuned
    # a failure that claims to be the fastest of all must not rank
    seeded = seeded_copy(cli, tmp_path, [("wrong_answer", "output 'C': 1 element(s) off", 1e-9)])
    lines = seeded.run("log", "top", "matmul", "-k", "3", "--target", "cpu").stdout.splitlines()
    assert lines[0] == f"workload: {MATMUL_KEY}"
    rows = [line.split() for line in lines[2:]]
    assert len(rows) == 3
    speeds = [float(r[1]) for r in rows]
    assert speeds == sorted(speeds, reverse=True)
    with sqlite3.connect(seeded.db) as con:
        ok = sorted(con.execute("SELECT median_s, id FROM records WHERE status = 'ok'"))
    assert [int(r[0]) for r in rows] == [record_id for _, record_id in ok[:3]]
    flops = 2 * 16 ** 3
    for row, (median_s, _) in zip(rows, ok):
        assert float(row[1]) == pytest.approx(flops / median_s / 1e9, rel=1e-3)


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
    from matplotlib import image

    pixels = image.imread(png)
    assert pixels.ndim == 3 and pixels.shape[0] > 100 and pixels.shape[1] > 100


def test_log_history_plot_to_svg_is_svg(tuned, tmp_path):
    import xml.etree.ElementTree as ET

    cli, _ = tuned
    path = tmp_path / "history.svg"
    cli.run("log", "history", "1", "--plot", str(path))
    data = path.read_bytes()
    assert ET.fromstring(data).tag == "{http://www.w3.org/2000/svg}svg"
    assert b"best so far" in data   # the legend, as text


def test_log_history_plot_with_an_unknown_suffix_is_a_usage_error(tuned, tmp_path):
    cli, _ = tuned
    proc = cli.run("log", "history", "1", "--plot", str(tmp_path / "history.jpg"), expect=2)
    assert ".png, .svg, .pdf" in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "history.jpg").exists()


def _small_history():
    from datetime import datetime, timezone

    key = MATMUL_KEY + "x" * 80   # longer than one line of the figure
    run = tuning_db.RunInfo(id=7, workload_key=key, workload_name="matmul",
                            target=tuning_db.TargetInfo("cpu", "some cpu"), tuner="xgb", seed=0,
                            trials_requested=50, tool_version="0", status="finished",
                            started_at=datetime.now(timezone.utc), finished_at=None, baseline_gflops=30.0)
    records = [type("R", (), dict(trial=t, gflops=10.0 + t))() for t in range(40)]
    curve = [(t, max(30.0, 10.0 + t)) for t in range(40)]
    return run, records, curve


@pytest.mark.parametrize("name", ["h.png", "h.PNG", "h.svg", "h.pdf"])
def test_saved_plots_are_files_of_the_suffix_format(tmp_path, name):
    from autotune.cli.history_plot import history_figure, save_figure

    path = tmp_path / name
    save_figure(history_figure(*_small_history()), str(path))
    data = path.read_bytes()
    if name.lower().endswith(".png"):
        from matplotlib import image

        assert data[:8] == b"\x89PNG\r\n\x1a\n" and image.imread(path).ndim == 3
    elif name.endswith(".pdf"):
        assert data.startswith(b"%PDF-") and data.rstrip().endswith(b"%%EOF")
    else:
        import xml.etree.ElementTree as ET

        assert ET.fromstring(data).tag == "{http://www.w3.org/2000/svg}svg"


@pytest.mark.parametrize("name", ["h.jpg", "h", "h.svg.gz"])
def test_plot_format_refuses_other_suffixes(name):
    from autotune.cli.history_plot import plot_format

    with pytest.raises(ValueError, match=r"\.png, \.svg, \.pdf"):
        plot_format(name)


def test_history_figure_keeps_title_and_legend_clear_of_the_data():
    """The figure as drawn: the wrapped title inside the figure, the legend beside the axes."""
    from autotune.cli.history_plot import history_figure

    run, records, curve = _small_history()
    fig = history_figure(run, records, curve)
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    (ax,) = fig.axes
    figure_box = fig.bbox
    title = ax.title.get_window_extent(renderer)
    assert "\n" in ax.title.get_text()
    assert figure_box.x0 <= title.x0 and title.x1 <= figure_box.x1 and title.y1 <= figure_box.y1
    legend = ax.get_legend().get_window_extent(renderer)
    assert legend.x0 >= ax.get_window_extent(renderer).x1, "the legend must not cover the axes"
    assert legend.x1 <= figure_box.x1
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels == ["trial", "best so far (incl. stored before)"]


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


def seeded_copy(cli, tmp_path, failures: list[tuple[str, str, float | None]]):
    """A copy of ``cli``'s database with ``failures`` ((status, error, median_s) each) added to
    its first run, written with plain SQL (not the library the CLI reads with), each a copy of
    the run's first record under another trial number. Returns a CLI on the copy."""
    copy = tmp_path / "seeded.db"
    with sqlite3.connect(cli.db) as src, sqlite3.connect(copy) as dst:
        src.backup(dst)
    with sqlite3.connect(copy) as con:
        first = con.execute("SELECT min(id) FROM records").fetchone()[0]
        for n, (status, error, median_s) in enumerate(failures):
            con.execute(
                "INSERT INTO records (run_id, workload_id, target_id, trial, config, config_hash, status, costs, "
                "median_s, spread, gflops, build_s, run_s, error, created_at, tool_version) "
                "SELECT run_id, workload_id, target_id, 1000 + ?, config, config_hash, ?, '[]', ?, NULL, ?, "
                "build_s, run_s, ?, created_at, tool_version FROM records WHERE id = ?",
                (n, status, median_s, None if median_s is None else 1e6, error, first))
    return type(cli)(cli.root, copy)


def failures_by_status(db) -> dict[str, int]:
    with sqlite3.connect(db) as con:
        return dict(con.execute("SELECT status, count(*) FROM records WHERE status != 'ok' GROUP BY status"))


SEEDED = [
    ("wrong_answer", "output 'C': 3 element(s) off, first at (0, 1)", None),
    ("runtime_error", "the measuring process died (SIGSEGV)", None),
    ("wrong_answer", "output 'C': 9 element(s) off, first at (2, 2)", None),
    ("timeout", "no result within 10 s; the measuring process was killed", None),
    ("wrong_answer", "output 'C': 256 element(s) off, first at (0, 0)\nmore lines", None),
]


def test_log_errors_counts_failures_seeded_into_a_real_run(tuned, tmp_path):
    cli, _ = tuned
    before = failures_by_status(cli.db)            # the tiny run usually has none
    seeded = seeded_copy(cli, tmp_path, SEEDED)
    lines = seeded.run("log", "errors").stdout.splitlines()
    assert lines[0].split() == ["status", "count", "latest", "message"]
    rows = {line.split()[0]: line for line in lines[1:]}
    expected = {status: before.get(status, 0) + sum(s == status for s, _, _ in SEEDED)
                for status in ("wrong_answer", "runtime_error", "timeout")}
    for status, count in expected.items():
        assert rows[status].split()[1] == str(count), lines
    # the latest message of each status, first line only
    assert re.match(r"wrong_answer\s+\d+\s+output 'C': 256 element\(s\) off, first at \(0, 0\)$", rows["wrong_answer"])
    assert rows["runtime_error"].endswith("the measuring process died (SIGSEGV)")
    assert [line.split()[0] for line in lines[1:]] == [
        s for s in ("compile_error", "runtime_error", "wrong_answer", "timeout", "invalid")
        if before.get(s, 0) or s in expected], "statuses in the order of the Status enum"
    filtered = seeded.run("log", "errors", "--workload", "matmul").stdout
    assert filtered == seeded.run("log", "errors").stdout


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
