"""Runs sharing one database skip what others measured on the same device (``ShareMeasured``):
configs stored before the run, and configs another process stores while it runs.

The grid tuner proposes configs in a fixed order, so which configs a run measures shows
exactly what it skipped. Compiles are cached by source, so measuring a config twice is cheap.
"""
from __future__ import annotations

import itertools
from dataclasses import replace

from autotune import Task, tune
from autotune.loop import TuningCallback
from autotune.runner import TimingOptions
from autotune.targets import describe
from tuning_db import Database, MeasureRecord

PARAMS = dict(M=16, N=16, K=16)
QUICK = TimingOptions(rounds=1, min_time=0.0, min_repeats=1)


def _schedules(task: Task):
    """The grid tuner's walk: the space's enumeration, the first config of each schedule
    (configs of one ``schedule_key`` are measured once)."""
    seen = set()
    for config in task.space.enumerate():
        key = task.space.schedule_key(config)
        if key not in seen:
            seen.add(key)
            yield config


def _grid(task: Task, n: int, start: int = 0) -> list[str]:
    return [c.hash for c in itertools.islice(_schedules(task), start, start + n)]


def _hashes(result) -> list[str]:
    return [t.config.hash for t in result.history]


def test_a_second_run_measures_what_the_first_did_not(tmp_path):
    task = Task("matmul", PARAMS)
    with Database(tmp_path / "t.db") as db:
        first = tune(task, trials=8, tuner="grid", db=db, batch_size=4, timing=QUICK)
        second = tune(task, trials=8, tuner="grid", db=db, batch_size=4, timing=QUICK)
        again = tune(task, trials=8, tuner="grid", db=db, batch_size=4, timing=QUICK, share=False)
    assert _hashes(first) == _grid(task, 8)
    assert _hashes(second) == _grid(task, 8, start=8)  # the first 8 were skipped, not measured again
    assert _hashes(again) == _grid(task, 8)             # share=False: from scratch


def test_records_of_another_device_are_not_shared(tmp_path):
    task = Task("matmul", PARAMS)
    here = describe(task.target)
    elsewhere = replace(here, device=here.device + " (another model)")
    configs = list(itertools.islice(_schedules(task), 4))
    with Database(tmp_path / "t.db") as db:
        run = db.start_run(task.key, task.workload_name, task.params, elsewhere, "grid", 0, 4, "test")
        db.add_records(run, [_record(task, elsewhere, c, n) for n, c in enumerate(configs)])
        result = tune(task, trials=4, tuner="grid", db=db, batch_size=4, timing=QUICK)
    assert _hashes(result) == [c.hash for c in configs]


def test_configs_another_process_stores_during_the_run_are_skipped(tmp_path):
    """After the first batch, "another process" stores configs 9-12 of the grid; the run,
    which reads what others stored after every batch, measures 13-16 instead."""
    task = Task("matmul", PARAMS)
    target = describe(task.target)
    others = list(itertools.islice(_schedules(task), 8, 12))

    class AnotherProcess(TuningCallback):
        def on_batch(self, loop, trials):
            if len(loop.result.history) == 4:
                with Database(tmp_path / "t.db") as other:
                    run = other.start_run(task.key, task.workload_name, task.params, target, "grid", 0, 4, "test")
                    other.add_records(run, [_record(task, target, c, n) for n, c in enumerate(others)])

    with Database(tmp_path / "t.db") as db:
        result = tune(task, trials=12, tuner="grid", db=db, batch_size=4, timing=QUICK, callbacks=[AnotherProcess()])
    assert _hashes(result) == _grid(task, 8) + _grid(task, 4, start=12)
    assert not set(_hashes(result)) & {c.hash for c in others}


def _record(task: Task, target, config, trial: int) -> MeasureRecord:
    return MeasureRecord(workload_key=task.key, workload_name=task.workload_name, params=task.params, target=target,
                         config=config.to_dict(), config_hash=config.hash, status="ok", costs=[1e-4],
                         median_s=1e-4, gflops=task.flops / 1e-4 / 1e9, build_s=0.1, run_s=0.1, trial=trial,
                         tool_version="test")
