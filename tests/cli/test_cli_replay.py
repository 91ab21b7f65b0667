"""``autotune replay`` and ``autotune sample`` from the command line.

The replay tests run in-process (click's CliRunner) over a database filled with made-up
records of exactly the configs the random tuner with seed 0 proposes first, so a replay
of it hits the recording every time; ``sample`` measures for real in a subprocess.
"""
from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

import tuning_db
from autotune.cli import cli as autotune_cli
from autotune.task import Task
from autotune.tuners import RandomTuner

from cli_helpers import count_records

RECORDED = 32


def fill(db_path, shape: dict, n: int = RECORDED) -> Task:
    """``n`` made-up ok records of matmul ``shape``: the first configs the random tuner (seed 0) proposes."""
    task = Task("matmul", shape, "cpu")
    target = tuning_db.TargetInfo("cpu", device="test cpu")
    with tuning_db.Database(db_path) as db:
        run = db.start_run(task.key, task.workload_name, task.params, target, "random", 0, n)
        configs = RandomTuner(task.space, seed=0).next_batch(n)
        db.add_records(run, [
            tuning_db.MeasureRecord(workload_key=task.key, workload_name="matmul", params=task.params, target=target,
                                    config=c.to_dict(), status="ok", costs=[1e-3 + 1e-5 * (i % 7)],
                                    median_s=1e-3 + 1e-5 * (i % 7), build_s=0.5, run_s=0.1, trial=i)
            for i, c in enumerate(configs)])
        db.finish_run(run)
    return task


@pytest.fixture
def recorded_db(tmp_path):
    path = tmp_path / "tuning.db"
    fill(path, dict(M=16, N=16, K=16))
    return path


def invoke(*args: str, expect: int = 0):
    result = CliRunner().invoke(autotune_cli, list(args))
    assert result.exit_code == expect, f"exit {result.exit_code}: {result.output}\n{result.exception!r}"
    return result


def test_replay_prints_a_line_per_strategy(recorded_db):
    out = invoke("replay", "--db", str(recorded_db), "--tuner", "random", "--tuner", "ga", "--seeds", "2",
                 "--trials", "8", "--batch-size", "8").stdout
    assert f"recording: {RECORDED} configs ({RECORDED} ok)" in out
    lines = out.splitlines()
    header = next(n for n, line in enumerate(lines) if line.startswith("tuner"))
    assert "trials to 0.9x" in lines[header]
    assert [line.split()[0] for line in lines[header + 1:]] == ["random", "ga"]


def test_replay_json_and_plot(recorded_db, tmp_path):
    plot = tmp_path / "curves.svg"
    out = invoke("replay", "--db", str(recorded_db), "--workload", "matmul", "--target", "cpu", "--tuner", "random",
                 "--seeds", "1", "--trials", "16", "--batch-size", "8", "--json", "--plot", str(plot)).stdout
    report = json.loads(out)
    (run,) = report["runs"]
    assert run["tuner"] == "random" and run["misses"] == 0 and len(run["costs"]) == 16
    assert report["recorded"] == RECORDED and report["optimum_s"] == pytest.approx(1e-3)
    assert plot.read_bytes().startswith(b"<?xml")


def test_replay_jobs_change_the_speed_not_the_report(recorded_db):
    args = ["replay", "--db", str(recorded_db), "--workload", "matmul", "--target", "cpu", "--tuner", "random",
            "--tuner", "ga", "--seeds", "2", "--trials", "12", "--batch-size", "4", "--json"]
    one, two = (json.loads(invoke(*args, "--jobs", jobs).stdout) for jobs in ("1", "2"))
    assert [(r["tuner"], r["seed"], r["costs"], r["seconds"]) for r in two["runs"]] == \
        [(r["tuner"], r["seed"], r["costs"], r["seconds"]) for r in one["runs"]]
    assert len(one["runs"]) == 4


def test_replay_needs_a_workload_when_the_database_holds_several(recorded_db):
    fill(recorded_db, dict(M=8, N=8, K=8), n=4)
    assert "choose one with --workload" in invoke("replay", "--db", str(recorded_db), expect=1).output


def test_replay_of_an_empty_or_missing_database_and_a_bad_plot_name(tmp_path):
    tuning_db.Database(tmp_path / "empty.db").close()
    assert "no records to replay" in invoke("replay", "--db", str(tmp_path / "empty.db"), expect=1).output
    invoke("replay", "--db", str(tmp_path / "missing.db"), expect=1)
    assert not (tmp_path / "missing.db").exists()   # replay only reads: it creates nothing
    out = invoke("replay", "--db", str(tmp_path / "empty.db"), "--plot", "curves.pdf", expect=2).output
    assert ".png or .svg" in out


def test_sample_refuses_an_option_its_op_does_not_have(tmp_path):
    out = invoke("sample", "--trials", "2", "--db", str(tmp_path / "t.db"), "matmul", "--bogus", "1", expect=2).output
    assert "--bogus" in out


def test_sample_measures_distinct_random_configs_into_the_database(cli):
    proc = cli.run("sample", "--trials", "4", "--batch-size", "4", "--rounds", "1", "--no-progress", "--db",
                   str(cli.db), "matmul", "-M", "16", "-N", "16", "-K", "16", db=False)
    assert "sampled 4 configs" in proc.stdout
    assert count_records(cli.db) == 4
    with tuning_db.Database(cli.db) as db:
        (run,) = db.list_runs()
        records = db.history(run.id)
    assert run.tuner == "random" and run.status == "finished"
    assert len({r.config_hash for r in records}) == len(records) == 4


def test_replay_transfer_learns_from_the_ops_other_workloads(recorded_db):
    args = ["replay", "--db", str(recorded_db), "--workload", "matmul", "--target", "cpu", "--tuner", "xgb",
            "--seeds", "1", "--trials", "8", "--batch-size", "8", "--restrict", "--transfer"]
    result = invoke(*args, expect=2)
    assert "no other matmul workload" in result.output
    other = fill(recorded_db, dict(M=32, N=16, K=16), n=24)
    key = Task("matmul", dict(M=16, N=16, K=16), "cpu").key
    args[4] = key
    out = invoke(*args).stdout
    assert f"transfer: 24 records of {other.key}" in out
    cold = json.loads(invoke(*args[:-1], "--json").stdout)["runs"][0]["costs"]
    warm = json.loads(invoke(*args, "--json").stdout)["runs"][0]["costs"]
    assert len(cold) == len(warm) == 8
