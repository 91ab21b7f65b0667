"""Runs killed while "running": pid, host and heartbeat stored, stale runs told apart and taken over,
and a resumed run's best-so-far starting from what was stored before it."""
from __future__ import annotations

import os
import subprocess
import sys
from datetime import timedelta
from types import SimpleNamespace

import pytest

import tuning_db
from tuning_db.liveness import STALE_AFTER, process_alive, run_state, this_host

from tdb_helpers import CPU, MATMUL, T0, key_of, make_record, start

KEY = key_of(*MATMUL)


class Clock:
    """A settable clock for the database (heartbeat ages without waiting)."""

    def __init__(self, now=T0):
        self.now = now

    def __call__(self):
        return self.now


def _run(status="running", pid=123, host="here", heartbeat=T0, started=T0):
    return SimpleNamespace(status=status, pid=pid, host=host, heartbeat_at=heartbeat, started_at=started)


# ---------------------------------------------------------------- the rules


@pytest.mark.parametrize("status", ["finished", "interrupted"])
def test_closed_runs_keep_their_status(status):
    assert run_state(_run(status), now=T0 + timedelta(days=30), host="here", alive=lambda *_: False) == status


def test_a_run_on_this_host_is_stale_exactly_when_its_process_is_gone():
    seen = []

    def alive(pid, started):
        seen.append((pid, started))
        return pid == 123

    far_later = T0 + timedelta(days=30)   # the heartbeat's age does not matter on this host
    assert run_state(_run(pid=123), now=far_later, host="here", alive=alive) == "running"
    assert run_state(_run(pid=456), now=T0, host="here", alive=alive) == "stale"
    assert seen == [(123, T0), (456, T0)]


def test_a_run_on_another_host_is_stale_after_no_heartbeat_for_stale_after():
    run = _run(host="elsewhere", heartbeat=T0 + timedelta(minutes=5))

    def no_look(*_):
        raise AssertionError("another host's processes cannot be looked at")

    just_in_time = T0 + timedelta(minutes=5) + STALE_AFTER
    assert run_state(run, now=just_in_time, host="here", alive=no_look) == "running"
    assert run_state(run, now=just_in_time + timedelta(seconds=1), host="here", alive=no_look) == "stale"


def test_a_run_without_pid_or_heartbeat_ages_from_its_start():
    run = _run(pid=None, host=None, heartbeat=None)
    assert run_state(run, now=T0 + STALE_AFTER / 2, host="here") == "running"
    assert run_state(run, now=T0 + STALE_AFTER * 2, host="here") == "stale"


def test_process_alive_sees_this_process_but_not_a_finished_one_nor_a_reused_pid():
    now = tuning_db.records.utc_now()
    assert process_alive(os.getpid(), now)
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    assert not process_alive(child.pid, now)
    # A run that started long before this process did: the pid now belongs to someone else.
    assert not process_alive(os.getpid(), T0)


# ---------------------------------------------------------------- the database


def test_runs_store_pid_host_and_a_heartbeat_renewed_by_each_batch(db_url):
    now = tuning_db.records.utc_now()
    clock = Clock(now)
    with tuning_db.Database(db_url, clock=clock) as db:
        run = start(db)
        info = db.get_run(run)
        assert (info.pid, info.host, info.started_at, info.heartbeat_at) == (os.getpid(), this_host(), now, now)
        assert info.state() == "running"          # this very process
        clock.now = now + timedelta(minutes=7)
        db.add_records(run, [make_record(0)])
        assert db.get_run(run).heartbeat_at == now + timedelta(minutes=7)
        clock.now = now + timedelta(minutes=9)
        db.heartbeat(run)
        assert db.get_run(run).heartbeat_at == now + timedelta(minutes=9)


def test_take_over_closes_stale_runs_of_the_task_only(db_url):
    clock = Clock()
    with tuning_db.Database(db_url, clock=clock) as db:
        killed, live, finished = start(db), start(db, seed=1), start(db, seed=2)
        db.finish_run(finished)
        other = start(db, workload=("matmul", {"M": 8, "N": 8, "K": 8, "dtype": "float32"}))
        clock.now = T0 + timedelta(hours=2)

        def alive(pid, started):
            return False

        # Each run's process: only ``live`` still stores batches (seen from another host).
        db.heartbeat(live)
        taken = db.take_over_stale_runs(KEY, CPU, host="another-host", alive=alive)
        assert taken == [killed]
        states = {r.id: r.state(host="another-host", now=clock.now) for r in db.list_runs()}
        assert states == {killed: "interrupted", live: "running", finished: "finished", other: "stale"}
        assert db.get_run(killed).finished_at == clock.now
        assert db.take_over_stale_runs(KEY, CPU, host="another-host", alive=alive) == []


def test_list_runs_filters_by_target(db):
    cpu_run = start(db)
    gpu_run = start(db, target=tuning_db.TargetInfo("cuda", "NVIDIA H100"))
    assert [r.id for r in db.list_runs(KEY, "cuda")] == [gpu_run]
    assert [r.id for r in db.list_runs(KEY, CPU)] == [cpu_run]


def test_a_resumed_runs_best_so_far_starts_from_the_best_stored_before(db):
    first = start(db)
    db.add_records(first, [make_record(0, median_s=1e-3), make_record(1, median_s=5e-4)])
    best_before = db.best(KEY).gflops
    name, params = MATMUL
    resumed = db.start_run(KEY, name, params, CPU, "xgb", 0, 10, "0.1.0", resumed_from=first,
                           baseline_gflops=best_before)
    slower = make_record(2, median_s=2e-3)
    db.add_records(resumed, [slower, make_record(3, "compile_error"), make_record(4, median_s=1e-4)])
    curve = db.best_so_far(resumed)
    assert curve == [(2, best_before), (3, best_before), (4, pytest.approx(2 * 64**3 / 1e-4 / 1e9))]
    info = db.get_run(resumed)
    assert (info.resumed_from, info.baseline_gflops) == (first, best_before)
    assert db.best_so_far(first)[0] == (0, pytest.approx(2 * 64**3 / 1e-3 / 1e9))   # a plain run starts from nothing
