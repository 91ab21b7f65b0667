"""Autotuning: tasks, measurement, cost model, tuners, and the ``autotune`` command line.

    import autotune, tuning_db
    task = autotune.Task("matmul", dict(M=1024, N=1024, K=1024), target="cpu")
    result = autotune.tune(task, trials=1000, tuner="xgb", db=tuning_db.Database())
    result.best_config, result.best_gflops, result.best_so_far(), result.timings
    autotune.tune(task, db=db, final=autotune.FinalTimingOptions())  # the winner timed again, vs NumPy
    with tuning_db.apply_best(db):
        f = autotune.build(task)          # the best stored schedule, else a default one
    task = autotune.Task.from_tensors([A, x, y], name="my_gemv")   # any expression, registered or not
    autotune.tune_graph(graph, trials=2000, db=db); autotune.build_graph(graph, db=db)  # networks
    dim = autotune.DynamicDim("M", 1, 256, (1, 8, 64, 256))           # a size known only at run time
    autotune.tune_buckets("dense", dict(N=1024, K=1024), dim, trials=200, db=db)
    f = autotune.build_buckets("dense", dict(N=1024, K=1024), dim, db=db)   # any M in 1..256

Public names are loaded on first use: ``import autotune`` stays cheap (the measuring
process imports this package, and the cost model pulls in XGBoost, which takes
seconds to import). The tuning loop lives in ``autotune.tuning``, the
apply-best dispatch in ``autotune.dispatch`` and ``replay`` in ``autotune.replaying``.
"""
from __future__ import annotations

import importlib

#: public name -> the submodule defining it
_EXPORTS = {
    "Task": "task", "TaskError": "task", "TaskTooLarge": "task",
    "tune": "tuning", "TuneResult": "tuning", "Trial": "tuning", "Progress": "tuning",
    "TuningLoop": "loop", "TuningCallback": "loop",
    "build": "dispatch", "default_config": "dispatch",
    "MeasureInput": "measure", "MeasureResult": "measure", "STATUSES": "measure", "Status": "measure",
    "Builder": "measure", "Runner": "measure", "TimingOptions": "runner", "FinalTimingOptions": "final_timing",
    "LocalBuilder": "builder", "LocalRunner": "runner",
    "parse_target": "targets", "register_autotune_parts": "targets", "AutotuneParts": "targets",
    "make_tuner": "tuners",
    "replay": "replaying", "Recording": "replaying", "ReplayReport": "replay_report",
    "Graph": "graph", "tune_graph": "graph", "build_graph": "graph",
    "DynamicDim": "dynamic", "tune_buckets": "dynamic", "build_buckets": "dynamic",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'autotune' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_EXPORTS))
