"""Runs that are interrupted, killed, resumed, too large, or share a database file with another run."""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys

import pytest

import tuning_db

from cli_helpers import MATMUL_KEY, TINY_MATMUL, cli_env, count_records, finish_or_explain, wait_for_records


def test_two_concurrent_runs_on_one_file_lose_no_record(cli):
    procs = [cli.start(*TINY_MATMUL, "--trials", "8", "--no-anchor", "--seed", str(seed)) for seed in (1, 2)]
    for proc in procs:
        out, err = proc.communicate(timeout=180)
        assert proc.returncode == 0, err
    with tuning_db.Database(cli.db) as db:
        runs = db.list_runs()
        assert sorted(r.n_records for r in runs) == [8, 8]
        assert all(r.status == "finished" for r in runs)
    assert count_records(cli.db) == 16


@pytest.mark.parametrize("how", ["SIGINT", "SIGKILL"])
def test_stopped_run_keeps_finished_batches_and_resume_completes_it(cli, how):
    # Far more trials than can finish before the signal lands, however fast the machine.
    proc = cli.start(*TINY_MATMUL, "--trials", "400", "--no-anchor")
    wait_for_records(cli.db, 4, proc)
    proc.send_signal(getattr(signal, how))
    out, err = finish_or_explain(proc)
    assert "Traceback" not in err
    if how == "SIGINT":
        assert proc.returncode == 130
        assert "interrupted after" in err and "--resume" in err
    else:
        assert proc.returncode == -signal.SIGKILL
    with tuning_db.Database(cli.db) as db:   # readable, with every finished batch
        (run,) = db.list_runs()
        assert run.status == ("interrupted" if how == "SIGINT" else "running")
        assert run.pid == proc.pid and run.heartbeat_at is not None
        assert run.state() == ("interrupted" if how == "SIGINT" else "stale")   # its process is gone
        assert 4 <= run.n_records < 400 and run.n_records % 4 == 0
        stored, best_stored = run.n_records, run.best_gflops
    listed = cli.run("log", "runs").stdout.splitlines()[1]
    assert re.search(r"\b(interrupted|stale)\b", listed).group(1) == ("interrupted" if how == "SIGINT" else "stale")

    total = stored + 8
    resumed = cli.tune("--resume", trials=total)
    assert f": 8 new, {stored} stored before" in resumed.stdout
    with tuning_db.Database(cli.db) as db:
        records = db.records_for_task(MATMUL_KEY, None)
        assert len(records) == total
        assert len({r.config_hash for r in records}) == total, "resume re-measured a stored config"
        first, second = db.list_runs()
        assert second.n_records == 8
        assert first.status == "interrupted", "the resume takes the killed run over"
        assert (second.status, second.resumed_from) == ("finished", first.id)
        curve = [best for _, best in db.best_so_far(second.id)]
    if best_stored is not None:
        assert second.baseline_gflops == pytest.approx(best_stored)
        assert curve[0] >= best_stored * (1 - 1e-9), "the best so far starts from the best stored before"
    assert curve == sorted(curve, key=lambda b: -1 if b is None else b)
    history = cli.run("log", "history", str(second.id)).stdout
    assert f"resumed from run {first.id}" in history


@pytest.mark.slow
def test_a_live_run_is_not_taken_over_by_a_resume(cli):
    proc = cli.start(*TINY_MATMUL, "--trials", "400", "--no-anchor")
    try:
        wait_for_records(cli.db, 4, proc)
        listed = cli.run("log", "runs").stdout.splitlines()[1]
        assert re.search(r"\brunning\b", listed) and "stale" not in listed
        cli.tune("--resume", trials=4)   # the live run's records are replayed, the run left alone
        with tuning_db.Database(cli.db) as db:
            assert db.list_runs()[0].status == "running"
    finally:
        proc.kill()
        proc.communicate(timeout=60)


def test_a_shape_too_large_for_memory_is_one_error_line_and_creates_nothing(cli):
    proc = cli.run("matmul", "-M", "100000000", "-N", "1000000", "-K", "1000000", "--trials", "4", expect=1)
    assert proc.stderr.startswith("Error: matmul(M=100000000, N=1000000, K=1000000")
    assert "too large to tune here" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert not cli.db.exists()


def test_ctrl_c_to_the_process_group_shows_no_traceback(cli):
    proc = subprocess.Popen(cli.command(*TINY_MATMUL, "--trials", "400", "--no-anchor", "--db", str(cli.db)),
                            cwd=cli.root, env=cli_env(cli.root), text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    wait_for_records(cli.db, 4, proc)
    os.killpg(proc.pid, signal.SIGINT)   # what a terminal does on Ctrl-C
    out, err = finish_or_explain(proc)
    assert proc.returncode == 130 and "interrupted after" in err
    assert "Traceback" not in err, err


def test_ctrl_c_before_tuning_starts_is_one_line_and_status_130(tmp_path, monkeypatch):
    """Interrupted while measuring the anchor (before the tuning loop, which says more): one
    line and status 130, not click's "Aborted!" and status 1. SIGINT ignored when the command
    starts (a process started in the background of a script) is a Ctrl-C inside it all the same."""
    from click.testing import CliRunner

    from autotune.cli import cli as autotune_cli

    seen = {}

    def interrupted_anchor(task, timing):
        seen["sigint"] = signal.getsignal(signal.SIGINT)
        raise KeyboardInterrupt

    monkeypatch.setattr("autotune.cli.tune_cmd.measure_anchor", interrupted_anchor)
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        result = CliRunner().invoke(autotune_cli, ["matmul", "-M", "8", "-N", "8", "-K", "8", "--trials", "4",
                                                   "--db", str(tmp_path / "t.db")])
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN   # given back as it was
    finally:
        signal.signal(signal.SIGINT, previous)
    assert seen["sigint"] is signal.default_int_handler
    assert result.exit_code == 130, result.output
    assert result.output.strip() == "interrupted" and "Aborted" not in result.output


def test_ctrl_c_while_the_command_line_is_imported_is_one_line_and_status_130(tmp_path):
    """The console script's entry point guards the CLI's import (over half a second): a
    Ctrl-C then prints no traceback of the imports. The interrupt is raised by an import
    hook when ``autotune.cli`` is imported, as a Ctrl-C at that moment would."""
    probe = (
        "import sys\n"
        "class Interrupt:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'autotune.cli':\n"
        "            raise KeyboardInterrupt\n"
        "sys.meta_path.insert(0, Interrupt())\n"
        "from autotune.console import main\n"
        "main()\n"
    )
    proc = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, env=cli_env(tmp_path), capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 130 and proc.stderr == "interrupted\n", proc.stderr
