"""Weights packed at build time, through measurement: the measuring process packs them once
before verifying and timing (so a kernel that reads panels gets panels), the final timing
does the same for every candidate, and apply_best gives a module that packs them."""
from __future__ import annotations

import random

import numpy as np
import pytest

import autotune
import tuning_db
from autotune.builder import LocalBuilder
from autotune.final_timing import FinalTimingOptions
from autotune.measure import MeasureInput, Status
from autotune.runner import LocalRunner, TimingOptions
from autotune.verify import mismatch, reduction_length

QUICK = TimingOptions(rounds=1, min_time=0.0, min_repeats=1)
QUICK_FINAL = FinalTimingOptions(candidates=3, rounds=2, min_time=0.0, min_repeats=1, pause=0.0, max_rounds=2)


@pytest.fixture(scope="module")
def task():
    return autotune.Task("dense", dict(M=24, N=40, K=20, bias=True, relu=True), target="cpu")


def _configs(task, at_build_time: bool, count: int = 3):
    rng = random.Random(5)
    found = {}
    while len(found) < count:
        config = task.space.sample(rng)
        d = task.space.decisions(config)["dense"]
        if d.panel_pack is not None and d.panels_at_build_time == at_build_time:
            found[config.hash] = config
    return list(found.values())


def test_the_measuring_process_packs_the_weights_before_it_verifies_and_times(task):
    configs = _configs(task, True) + _configs(task, False, 1)
    builds = LocalBuilder().build([MeasureInput(task, c) for c in configs])
    assert all(b.status is Status.OK for b in builds), [b.error for b in builds]
    with LocalRunner(options=QUICK) as runner:
        results = runner.run(task, builds)
        # Unpacked, the first kernel would read W's rows as panels: a wrong answer.
        assert [r.status for r in results] == [Status.OK] * 4, [r.error for r in results]
        final = runner.time_final(task, builds, QUICK_FINAL)
    assert not final.errors and len(final.candidates) == 4
    assert all(len(rounds) == 2 and min(rounds) > 0 for rounds in final.candidates)


def test_apply_best_builds_a_module_that_takes_the_weights_as_laid_out_or_packed_once(task, tmp_path):
    with tuning_db.Database(tmp_path / "t.db") as db:
        # GA measures the space's starting points first, and dense's all pack W at build time:
        # as many trials as there are points measure only them, so the best packs W whichever
        # is fastest. (How many there are follows the host's register file: two or three.)
        points = task.space.starting_points(random.Random(0))
        assert points and all(task.space.decisions(c)["dense"].panels_at_build_time for c in points)
        result = autotune.tune(task, trials=len(points), tuner="ga", db=db, batch_size=len(points), timing=QUICK,
                               final=QUICK_FINAL)
        assert task.space.decisions(result.best_config)["dense"].panels_at_build_time
        f = autotune.build(task, db=db)
    assert f.config.hash == result.best_config.hash
    x, w, b = task.workload.random_inputs(0)
    (reference,) = task.workload.reference(x, w, b)
    red = reduction_length(task.workload.outputs)
    y = np.full(reference.shape, np.nan, np.float32)
    f(x, w, b, y)
    assert mismatch(y, reference, red) is None
    packed = f.pack("W", w)
    y.fill(np.nan)
    f(x, packed, b, y)
    assert mismatch(y, reference, red) is None
    assert [p.name for p in f.params] == ["X", "W", "bias", task.workload.outputs[0].name]
