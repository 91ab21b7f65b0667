"""Transfer learning: records of other shapes of an op warm-start the xgb tuner's model."""
from __future__ import annotations

import random

import numpy as np

from autotune import targets
from autotune.features import FeatureCache
from autotune.task import Task
from autotune.tuners import SearchOptions, XGBTuner
from autotune.cost_model import XGBCostModel
from autotune.tuning import _warm_start_from_similar, tune
from tuning_db import Database, MeasureRecord


def _store(db: Database, task: Task, target, configs, costs) -> None:
    run = db.start_run(task.key, task.workload_name, task.params, target, "random", 0, len(configs), "test")
    records = []
    for n, (config, cost) in enumerate(zip(configs, costs)):
        ok = np.isfinite(cost)
        records.append(MeasureRecord(
            workload_key=task.key, workload_name=task.workload_name, params=task.params, target=target,
            config=config.to_dict() if hasattr(config, "to_dict") else config, status="ok" if ok else "runtime_error",
            costs=[cost] if ok else [], median_s=cost if ok else None, spread=0.0 if ok else None,
            gflops=task.flops / cost / 1e9 if ok else None, build_s=0.1, run_s=0.1,
            error=None if ok else "crashed", trial=n, tool_version="test"))
    db.add_records(run, records)
    db.finish_run(run)


def _vector_cost(config) -> float:
    """A stand-in device: wider vector tiles are faster (any learnable order will do)."""
    return 1e-3 / (1 + config.values["C.tile.j"][2])


def test_records_of_another_shape_steer_the_first_batch(tmp_path):
    db = Database(tmp_path / "t.db")
    target = targets.describe("cpu")
    other = Task("matmul", dict(M=48, N=48, K=48))
    rng = random.Random(0)
    configs = [other.space.sample(rng) for _ in range(60)]
    costs = [_vector_cost(c) for c in configs]
    costs[0] = float("inf")  # a failure is a record too: the slowest
    _store(db, other, target, configs, costs)
    # A record whose config no longer fits the space is skipped, not fatal.
    _store(db, other, target, [{"sketch": "cpu-v0", "values": {"x": 1}}], [1e-3])

    task = Task("matmul", dict(M=32, N=32, K=32))
    cache = FeatureCache()
    tuner = XGBTuner(task.space, cache.feature_fn(task), seed=0, model=XGBCostModel(seed=0, nthread=1),
                     options=SearchOptions(population=32, generations=1),
                     features_many=lambda cs: cache.get_many(task, cs))
    used = _warm_start_from_similar(db, task, target, tuner, cache, limit=1000)
    assert used == 60 and tuner.model.fitted and tuner.fits == 1
    batch = tuner.next_batch(16)  # no measurement of this task yet, but the model is trained
    assert tuner.scored > 0
    blind = XGBTuner(task.space, cache.feature_fn(task), seed=0).next_batch(16)
    assert np.median([_vector_cost(c) for c in batch]) < np.median([_vector_cost(c) for c in blind])
    # Only other shapes count: seen from the 48^3 task, there are none.
    assert _warm_start_from_similar(db, other, target, XGBTuner(other.space, cache.feature_fn(other)),
                                    cache, limit=1000) == 0
    db.close()


def test_tune_with_transfer_measures_and_stores(tmp_path):
    """End to end: a random run on one shape, then an xgb run on another with transfer."""
    db = Database(tmp_path / "t.db")
    first = tune(Task("matmul", dict(M=24, N=24, K=24)), trials=12, tuner="random", db=db, batch_size=12)
    assert first.best is not None
    task = Task("matmul", dict(M=16, N=16, K=16))
    result = tune(task, trials=8, tuner="xgb", db=db, batch_size=8, transfer=True)
    assert result.transfer_records == 12
    assert len(result.history) == 8 and result.best is not None
    assert len(db.records_for_task(task.key, None)) == 8
    assert tune(task, trials=4, tuner="xgb", db=None, transfer=True).transfer_records == 0
    db.close()
