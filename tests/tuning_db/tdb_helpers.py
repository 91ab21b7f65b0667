"""Helpers shared by the tuning database tests (a uniquely named module, so that it can be
imported by the tests of this directory without clashing with other test directories)."""
from __future__ import annotations

import json
import sqlite3
from contextlib import closing
from datetime import datetime, timedelta, timezone
from pathlib import Path

from tuning_db import MeasureRecord, TargetInfo

CPU = TargetInfo("cpu", "Intel Xeon Gold 6348", "gcc 12.2.0", "-O3 -march=native", "node1")
GPU = TargetInfo("cuda", "NVIDIA H100", "nvrtc 13.0", "-arch=sm_90", "node2")
MATMUL = ("matmul", {"M": 64, "N": 64, "K": 64, "dtype": "float32"})
T0 = datetime(2025, 1, 1, 12, 0, 0, tzinfo=timezone.utc)


def key_of(name: str, params: dict) -> str:
    """The key te.workload_key gives (name + canonical JSON); the database treats it as opaque."""
    return name + json.dumps(params, sort_keys=True, separators=(",", ":"))


def make_record(trial: int, status: str = "ok", *, median_s: float | None = None, target: TargetInfo = CPU,
                workload=MATMUL, error: str | None = None, config: dict | None = None,
                flops: float = 2 * 64**3) -> MeasureRecord:
    """A record of ``workload`` on ``target``; ok records get median_s (default 1 ms + trial us)."""
    name, params = workload
    ok = status == "ok"
    median = (median_s if median_s is not None else 1e-3 + trial * 1e-6) if ok else None
    return MeasureRecord(
        workload_key=key_of(name, params), workload_name=name, params=params, target=target,
        config=config if config is not None else {"tile": [trial % 7 + 1, 8], "order": "ijk", "trial": trial},
        status=status,
        costs=[median * 0.99, median, median * 1.02] if ok else [],
        median_s=median, spread=0.03 if ok else None, gflops=flops / median / 1e9 if ok else None,
        build_s=0.25, run_s=0.05 if ok else 0.0,
        error=error if error is not None else (None if ok else f"{status} in trial {trial}"),
        trial=trial, created_at=T0 + timedelta(seconds=trial, microseconds=trial), tool_version="0.1.0",
    )


def start(db, target: TargetInfo = CPU, workload=MATMUL, tuner: str = "xgb", seed: int = 0) -> int:
    name, params = workload
    return db.start_run(key_of(name, params), name, params, target, tuner, seed, 100, "0.1.0")


#: How long a child waits for the others at the barrier before the round fails instead of hanging.
BARRIER_TIMEOUT_S = 120


def open_at_the_same_instant(url: str, pool, manager, n_processes: int) -> list[str]:
    """Open (and create) the database at ``url`` in ``n_processes`` workers of ``pool``,
    released together by a barrier; each worker's "ok" or error message.

    ``pool`` and ``manager`` come from the "spawn" context: a forked child inherits the
    threads' locks of the test process (gRPC's, after the cluster tests) and may hang.
    """
    barrier = manager.Barrier(n_processes)
    pending = pool.starmap_async(open_when_released, [(url, barrier)] * n_processes)
    return pending.get(timeout=2 * BARRIER_TIMEOUT_S)


def open_when_released(url: str, barrier) -> str:
    """In a child process: wait at ``barrier``, open (and create) the database at ``url``;
    "ok" or the error's message, for the parent to assert on."""
    from tuning_db import Database

    barrier.wait(timeout=BARRIER_TIMEOUT_S)
    try:
        Database(url).close()
        return "ok"
    except Exception as exc:  # reported back to the parent, which asserts on it
        return str(exc)


def database_from_dump(dump: Path, path: Path) -> Path:
    """A SQLite file at ``path`` made from the SQL ``dump`` of a file an older version wrote."""
    with closing(sqlite3.connect(path)) as con, con:
        con.executescript(dump.read_text())
    return path
