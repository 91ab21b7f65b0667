"""conv2d tuned with Winograd among its algorithms, end to end: every measured candidate of
every algorithm verified against conv2d's reference, records stored with their algorithm,
and ``apply_best`` in a fresh process rebuilding the stored best, whichever algorithm it is."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import autotune
import tuning_db
from autotune.final_timing import FinalTimingOptions
from autotune.runner import TimingOptions
from schedule.config import Config

REPO = Path(__file__).resolve().parents[2]
FAST = TimingOptions(min_time=0.001, min_repeats=1, max_repeats=3, rounds=1)
QUICK_FINAL = FinalTimingOptions(candidates=2, rounds=2, min_time=0.0, min_repeats=1, pause=0.0)
PARAMS = dict(N=1, C=16, H=8, W=10, K=16, R=3, S=3, padding=1)

FRESH_PROCESS = textwrap.dedent('''
    import json, sys
    import numpy as np
    import autotune, tuning_db
    from autotune.verify import mismatch, reduction_length
    from schedule.config import Config

    task = autotune.Task("conv2d", json.loads(sys.argv[2]))
    with tuning_db.Database(sys.argv[1], create=False) as db:
        kernel = autotune.build(task, db=db)
        picked = Config.from_json(sys.argv[3])
        other = autotune.dispatch.build_config(task, picked)
    inputs = task.workload.random_inputs(seed=7)
    (reference,) = task.workload.reference(*inputs)
    for module in (kernel, other):
        out = np.full(reference.shape, np.nan, reference.dtype)
        module(*inputs, out)
        problem = mismatch(out, reference, reduction_length(task.workload.outputs))
        assert problem is None, problem
    print(kernel.config.hash, task.space.algorithm(kernel.config))
''')


def test_tuned_configs_of_every_algorithm_are_verified_and_the_best_rebuilds_in_a_fresh_process(tmp_path):
    task = autotune.Task("conv2d", PARAMS)
    db_path = tmp_path / "conv.db"
    with tuning_db.Database(db_path) as db:
        autotune.tune(task, trials=16, tuner="random", db=db, batch_size=8, timing=FAST, final=QUICK_FINAL, seed=3)
        records = db.records_for_task(task.key, None)
        best = db.best(task.key)
    by_algorithm: dict = {}
    for record in records:
        by_algorithm.setdefault(task.space.algorithm(Config.from_json(record.config)), []).append(record)
    assert set(by_algorithm) == {"direct", "winograd2", "winograd4"}
    assert all(r.status == "ok" for rs in by_algorithm.values() for r in rs)  # each checked against conv2d's reference
    winograd = next(r for r in by_algorithm["winograd4"])
    env = {k: v for k, v in os.environ.items() if k not in ("AUTOTUNE_DB", "AUTOTUNE_DEBUG")}
    env.update(AUTOTUNE_CACHE_DIR=str(tmp_path / "cache"),
               PYTHONPATH=os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p))
    picked = Config.from_json(winograd.config).to_json()
    proc = subprocess.run([sys.executable, "-c", FRESH_PROCESS, str(db_path), json.dumps(PARAMS), picked],
                          capture_output=True, text=True, cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stderr
    config_hash, algorithm = proc.stdout.split()
    assert config_hash == Config.from_json(best.config).hash
    assert algorithm == task.space.algorithm(Config.from_json(best.config))
