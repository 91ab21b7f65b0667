"""Tuning on a real two-node Ray cluster (``conftest.ray_cluster``) into a real PostgreSQL
server: records carry the host of the node that measured them, a node killed mid-run costs
only what it had in flight, and a driver killed with SIGKILL leaves no measuring process.
"""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from autotune import Task, tune
from autotune.measure import Status
from autotune.runner import TimingOptions
from tuning_db import Database

from autotune.cluster import ClusterError, RayExecutor

PARAMS = dict(M=32, N=32, K=32)
ONE_ROUND = TimingOptions(rounds=1)


def test_a_200_trial_run_across_two_nodes_lands_in_postgres_with_both_hosts(ray_cluster, postgres_url):
    cluster, _ = ray_cluster
    with RayExecutor(cluster.address) as executor, Database(postgres_url) as db:
        assert len(executor.hosts()) == 2 and executor.excluded == [] and executor.warnings == []
        assert all(node.info.niceness == 0 for node in executor.pool.nodes)
        with pytest.raises(ClusterError, match="RayExecutor.target"):
            executor.measurers(Task("matmul", PARAMS, "cpu:avx2"))  # not the machines the cluster measures
        task = Task("matmul", PARAMS, executor.target("cpu"))
        result = tune(task, trials=200, tuner="random", db=db, executor=executor, timing=ONE_ROUND, seed=1)
        assert len(result.history) == 200
        assert all(t.result.status is not Status.WORKER_LOST for t in result.history)
        assert sum(t.result.ok for t in result.history) > 150
        stored = db.history(result.run_id)
        assert len(stored) == 200 and len({r.config_hash for r in stored}) == 200
        assert {r.target.host for r in stored} == set(executor.hosts())
        run = db.get_run(result.run_id)
        assert run.target.host == "ray cluster of 2 node(s)" and run.n_records == 200
        assert executor.pool.lost_builds == executor.pool.lost_measurements == 0


def test_killing_the_worker_node_mid_run_costs_only_its_in_flight_trials(ray_cluster, tmp_path):
    cluster, worker = ray_cluster
    with RayExecutor(cluster.address) as executor, Database(tmp_path / "t.db") as db:
        worker_node = next(n for n in executor.pool.nodes if n.info.node_id == worker.node_id)
        killed = threading.Event()

        def kill_when_busy():
            """Once a batch has been measured, kill the worker node while it measures."""
            deadline = time.monotonic() + 300
            while time.monotonic() < deadline and not killed.is_set():
                if len(db_records()) >= 16 and executor.pool.in_flight[worker.node_id] > 0:
                    cluster.remove_node(worker, allow_graceful=False)
                    killed.set()
                time.sleep(0.005)

        def db_records():
            with Database(tmp_path / "t.db") as reader:
                return reader.list_runs() and reader.history(reader.list_runs()[0].id)

        killer = threading.Thread(target=kill_when_busy, daemon=True)
        killer.start()
        task = Task("matmul", PARAMS, executor.target("cpu"))
        result = tune(task, trials=64, batch_size=16, tuner="random", db=db, executor=executor,
                      timing=ONE_ROUND, seed=2)
        killer.join(timeout=5)
        assert killed.is_set(), "the worker node was never seen measuring"
        assert not worker_node.alive and worker_node.lost_reason
        assert executor.pool.lost_measurements + executor.pool.lost_builds >= 1
        assert len(result.history) == 64  # the trials asked for, the lost ones retried on the head node
        assert all(t.result.status is not Status.WORKER_LOST for t in result.history)
        stored = db.history(result.run_id)
        assert len(stored) == 64
        worker_host = worker_node.info.described.host
        assert any(r.target.host == worker_host for r in stored), "what the worker measured before is kept"
        assert stored[-1].target.host != worker_host


DRIVER = textwrap.dedent("""
    import random, sys, time
    import ray
    from autotune import MeasureInput, Task
    from autotune.cluster import RayExecutor

    executor = RayExecutor(sys.argv[1])
    task = Task("matmul", dict(M=32, N=32, K=32), executor.target("cpu"))
    builder, runner = executor.measurers(task)
    configs = [task.space.sample(random.Random(seed)) for seed in range(4)]
    runner.run(task, builder.build([MeasureInput(task, c) for c in configs]))  # both nodes measure
    pids = ray.get([n.actor.pids.remote() for n in executor.pool.nodes])
    print(" ".join(str(p) for ps in pids for p in ps), flush=True)
    time.sleep(600)
""")


def test_a_driver_killed_with_sigkill_leaves_no_measuring_process(ray_cluster):
    cluster, _ = ray_cluster
    driver = subprocess.Popen([sys.executable, "-c", DRIVER, cluster.address], stdout=subprocess.PIPE, text=True,
                              env={**os.environ, "PYTHONPATH": os.getcwd()})
    try:
        line = driver.stdout.readline()
        pids = [int(p) for p in line.split()]
        assert len(pids) == 4, f"expected two actors and their measuring processes, got {line!r}"
        assert all(_alive(p) for p in pids)
        driver.send_signal(signal.SIGKILL)
        driver.wait()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and any(_alive(p) for p in pids):
            time.sleep(0.2)
        assert not any(_alive(p) for p in pids), f"still running: {[p for p in pids if _alive(p)]}"
    finally:
        if driver.poll() is None:
            driver.kill()
            driver.wait()


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, dead but not yet reaped, does not)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_the_command_line_tunes_on_the_cluster(ray_cluster, tmp_path):
    cluster, _ = ray_cluster
    db_path = tmp_path / "t.db"
    proc = subprocess.run(
        [sys.executable, "-m", "autotune.cli", "matmul", "-M", "32", "-N", "32", "-K", "32", "--trials", "16",
         "--tuner", "random", "--batch-size", "8", "--rounds", "1", "--cluster", cluster.address, "--db", str(db_path)],
        capture_output=True, text=True, timeout=300, env={**os.environ, "PYTHONPATH": os.getcwd()})
    assert proc.returncode == 0, proc.stderr
    # The final timing runs on one node, with NumPy timed there: the only anchor of a cluster run.
    assert re.search(r"^anchor: +NumPy [\d.e+-]+ GFLOP/s; ratio [\d.e+-]+x \(the median of the two's ratio in each of the final timing's",
                     proc.stdout, re.M), proc.stdout
    assert len(re.findall(r"^(?:final: +| +)[* ] [0-9a-f]{16}  searching", proc.stdout, re.M)) == 5
    with Database(db_path) as db:
        run, final = db.list_runs()
        stored = db.history(run.id)
        finals = db.history(final.id)
        best = db.best(run.workload_key)
    assert run.target.host == "ray cluster of 2 node(s)" and len(stored) == 16
    assert len({r.target.host for r in stored}) == 2
    assert final.tuner == "final" and final.anchor_gflops > 0 and len(finals) == 5
    assert len({r.target.host for r in finals}) == 1 and finals[0].target.host in {r.target.host for r in stored}
    assert best.run_id == final.id
