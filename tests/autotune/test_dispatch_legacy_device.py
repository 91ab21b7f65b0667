"""Records stored before CPU devices were described by family/model, ISA and cores carry the
bare model name; a build still finds them on such a CPU, and says to retune."""
from __future__ import annotations

import random
from dataclasses import replace

import pytest

import autotune
from autotune.targets import describe
from tuning_db import Database, MeasureRecord, NoTunedConfigWarning

PARAMS = dict(M=16, N=16, K=16)


def _store(db, task, device: str) -> int:
    target = replace(describe(task.target), device=device)
    config = task.space.sample(random.Random(7))
    run = db.start_run(task.key, task.workload_name, task.params, target, "random", 0, 1, "old")
    (record_id,) = db.add_records(run, [MeasureRecord(
        workload_key=task.key, workload_name=task.workload_name, params=task.params, target=target,
        config=config.to_dict(), config_hash=config.hash, status="ok", costs=[1e-5], median_s=1e-5,
        gflops=1.0, build_s=0.1, run_s=0.1, trial=0, tool_version="old")])
    return record_id


def test_a_record_of_the_bare_model_name_is_used_with_a_warning_to_retune(tmp_path):
    task = autotune.Task("matmul", PARAMS)
    device = describe(task.target).device
    if " (family " not in device:
        pytest.skip(f"this CPU's description has no family/model part: {device}")
    with Database(tmp_path / "t.db") as db:
        record_id = _store(db, task, device.split(" (family ")[0])
        with pytest.warns(NoTunedConfigWarning, match="retune to be sure"):
            f = autotune.build(task, db=db)
    assert f.record is not None and f.record.id == record_id


def test_a_record_of_another_model_is_not_used(tmp_path):
    task = autotune.Task("matmul", PARAMS)
    with Database(tmp_path / "t.db") as db:
        _store(db, task, "Some Other CPU")
        with pytest.warns(NoTunedConfigWarning, match="no tuned config"):
            f = autotune.build(task, db=db)
    assert f.record is None
