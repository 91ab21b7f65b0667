"""Several processes writing one database (a SQLite file, a PostgreSQL database), and a writer
killed with SIGKILL."""
from __future__ import annotations

import multiprocessing
import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

from tuning_db import Database
from tdb_helpers import MATMUL, key_of, open_at_the_same_instant

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
KEY = key_of(*MATMUL)


def _spawn(url: str, n_batches: int, batch_size: int) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), str(HERE)]))
    return subprocess.Popen([sys.executable, str(HERE / "tdb_writer.py"), url, str(n_batches), str(batch_size)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def test_two_processes_write_one_database_at_once(db_url):
    url = db_url                                     # its tables created by whichever child comes first
    writers = [_spawn(url, n_batches=40, batch_size=5) for _ in range(2)]
    for w in writers:
        out, err = w.communicate(timeout=120)
        assert w.returncode == 0, err
        assert out.splitlines()[-1] == "done"
    with Database(url) as db:
        runs = db.list_runs()
        assert [(r.n_records, r.status) for r in runs] == [(200, "finished")] * 2
        assert len(db.records_for_task(KEY, None)) == 400
        for run in runs:
            assert [r.trial for r in db.history(run.id)] == list(range(200))
        assert len(db.list_workloads()) == 1 and len(db.list_targets()) == 1


def test_killed_writer_leaves_every_committed_batch(db_url):
    batch = 7
    writer = _spawn(db_url, n_batches=1_000_000, batch_size=batch)
    try:
        assert writer.stdout.readline().startswith("run ")
        reported = 0
        while reported < 5 * batch:
            line = writer.stdout.readline()
            assert line.startswith("committed"), line + writer.stderr.read()
            reported = int(line.split()[1])
        os.kill(writer.pid, signal.SIGKILL)          # most likely in the middle of a transaction
        writer.wait(timeout=30)
    finally:
        if writer.poll() is None:
            writer.kill()
        writer.stdout.close()
        writer.stderr.close()
    assert writer.returncode == -signal.SIGKILL

    with Database(db_url) as db:
        (run,) = db.list_runs()
        assert run.status == "running" and run.finished_at is None
        count = len(db.history(run.id))
        assert count >= reported and count % batch == 0
        assert [r.trial for r in db.history(run.id)] == list(range(count))
        path = db.path
    if path is not None:
        with sqlite3.connect(path) as conn:
            assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)


def test_processes_opening_a_new_file_at_the_same_instant_all_succeed(tmp_path):
    # Switching a new file to WAL is not covered by busy_timeout: SQLite refuses at once
    # while another process switches it. Without the retry about one round in fifteen failed.
    context = multiprocessing.get_context("spawn")
    n_processes, n_rounds = 6, 30
    with context.Manager() as manager, context.Pool(n_processes) as pool:
        for round_ in range(n_rounds):
            url = f"sqlite:///{tmp_path / f'fresh{round_}.db'}"
            outcomes = open_at_the_same_instant(url, pool, manager, n_processes)
            assert outcomes == ["ok"] * n_processes, f"round {round_}: {outcomes}"
            with Database(url) as db:
                assert db.list_runs() == []
