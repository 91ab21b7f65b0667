"""Runs that are interrupted, killed, resumed, or share a database file with another run."""
from __future__ import annotations

import os
import signal
import subprocess

import pytest

import tuning_db

from cli_helpers import MATMUL_KEY, TINY_MATMUL, cli_env, count_records, wait_for_records


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
    out, err = proc.communicate(timeout=60)
    assert "Traceback" not in err
    if how == "SIGINT":
        assert proc.returncode == 130
        assert "interrupted after" in err and "--resume" in err
    else:
        assert proc.returncode == -signal.SIGKILL
    with tuning_db.Database(cli.db) as db:   # readable, with every finished batch
        (run,) = db.list_runs()
        assert run.status == ("interrupted" if how == "SIGINT" else "running")
        assert 4 <= run.n_records < 400 and run.n_records % 4 == 0
        stored = run.n_records

    total = stored + 8
    resumed = cli.tune("--resume", trials=total)
    assert f": 8 new, {stored} stored before" in resumed.stdout
    with tuning_db.Database(cli.db) as db:
        records = db.records_for_task(MATMUL_KEY, None)
        assert len(records) == total
        assert len({r.config_hash for r in records}) == total, "resume re-measured a stored config"
        assert db.list_runs()[-1].n_records == 8


def test_ctrl_c_to_the_process_group_shows_no_traceback(cli):
    proc = subprocess.Popen(cli.command(*TINY_MATMUL, "--trials", "400", "--no-anchor", "--db", str(cli.db)),
                            cwd=cli.root, env=cli_env(cli.root), text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    wait_for_records(cli.db, 4, proc)
    os.killpg(proc.pid, signal.SIGINT)   # what a terminal does on Ctrl-C
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130 and "interrupted after" in err
    assert "Traceback" not in err, err
