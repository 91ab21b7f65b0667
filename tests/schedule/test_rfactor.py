"""The ``rfactor`` algorithm: a long reduction with few results split in parts run in parallel.

The rule (which reductions qualify), the DAG it builds (partial results, then their
reduction under the original name; the last part guarded when the parts do not divide
the axis), sampled configs and its starting points built and checked against the
workload's own reference, and a tuning run that measures both algorithms.
"""
from __future__ import annotations

import random

import pytest

import te
from autotune.task import Task
from schedule.alternatives import (DIRECT, RFACTOR, RFACTOR_MIN_EXTENT, RFACTOR_PARTS, RFACTOR_SUFFIX,
                                   AlternativesSpace, alternatives)

from test_space import _check_sampled

LONG = RFACTOR_MIN_EXTENT + 905  # not a multiple of the parts: the last part is shorter


def _stages(outputs) -> dict:
    return {op.name: op for op in te.topological_order(outputs) if isinstance(op, te.ComputeOp)}


def _reduction(combiner: str, rows: int, length: int, extra_axis: int = 0):
    """[X, Y]: Y[r] = combiner over k (and over a short second axis) of a few ops on X."""
    shape = (rows, length) if not extra_axis else (rows, extra_axis, length)
    X = te.placeholder(shape, "float32", "X")
    k = te.reduce_axis((0, length), "k")
    reducer = {"sum": te.sum, "max": te.max, "min": te.min}[combiner]
    if extra_axis:
        j = te.reduce_axis((0, extra_axis), "j")
        Y = te.compute((rows,), lambda r: reducer(X[r, j, k] * X[r, j, k] + 1.0, axis=[j, k]), name="Y")
    else:
        Y = te.compute((rows,), lambda r: reducer(te.exp(X[r, k] * 0.01), axis=k), name="Y")
    return [X, Y]


def test_softmax_with_few_long_rows_splits_both_reductions():
    wl = te.create_workload("softmax", shape=[2, LONG])
    found = alternatives(wl.outputs)
    assert list(found) == [RFACTOR]
    (out,) = found[RFACTOR]
    assert out.name == wl.outputs[0].name and out.shape == wl.outputs[0].shape
    stages = _stages([out])
    for name in ("softmax_max", "softmax_sum"):
        partial, combined = stages[name + RFACTOR_SUFFIX], stages[name]
        assert partial.output(0).shape == (2, RFACTOR_PARTS)
        assert [iv.extent for iv in combined.body.axes] == [RFACTOR_PARTS]
        assert combined.body.combiner == partial.body.combiner == name[len("softmax_"):]
        width = -(-LONG // RFACTOR_PARTS)
        assert [iv.extent for iv in partial.body.axes] == [width]
        assert partial.body.condition is not None  # 64 parts of `width` overrun LONG: the last is guarded
    assert isinstance(Task("softmax", dict(shape=[2, LONG])).space, AlternativesSpace)


@pytest.mark.parametrize("shape", [[64, LONG], [2, RFACTOR_MIN_EXTENT - 1], [LONG]], ids=str)
def test_many_results_or_a_short_axis_have_none(shape):
    """64 rows are parallel work enough; an axis below the minimum is short. A 1-d softmax
    has one result per reduction and qualifies."""
    found = alternatives(te.create_workload("softmax", shape=shape).outputs)
    assert (RFACTOR in found) == (shape == [LONG])


def test_products_split_k_only_with_few_results():
    """A 4x4 product over a long K is split-K; a GEMV's thousand results or a convolution's
    many outputs are parallel work enough, and a short K is no reason to split."""
    for name, params, expected in (
            ("matmul", dict(M=4, N=4, K=LONG), True), ("matmul", dict(M=8, N=8, K=LONG), False),
            ("matmul", dict(M=4, N=4, K=512), False), ("dense", dict(M=1, N=1024, K=LONG), False),
            ("conv2d", dict(N=1, C=3, H=8, W=8, K=4, R=3, S=3), False)):
        found = alternatives(te.create_workload(name, **params).outputs)
        assert (RFACTOR in found) == expected, (name, params)


def test_the_split_keeps_other_reduce_axes_and_offsets():
    X, Y = _reduction("sum", 3, LONG, extra_axis=3)
    (out,) = alternatives([Y])[RFACTOR]
    partial = _stages([out])["Y" + RFACTOR_SUFFIX]
    assert sorted(iv.extent for iv in partial.body.axes) == [3, -(-LONG // RFACTOR_PARTS)]
    X2 = te.placeholder((1, LONG + 10), "float32", "X2")
    k = te.reduce_axis((10, LONG + 10), "k")  # an axis that starts at 10
    Y2 = te.compute((1,), lambda r: te.sum(X2[r, k], axis=k), name="Y2")
    assert RFACTOR in alternatives([Y2])
    task = Task.from_tensors([X2, Y2], name="offset_sum")
    _check_sampled(None, configs=_configs_of(task, RFACTOR, 4, seed=3), task=task)


def _configs_of(task: Task, algorithm: str, count: int, seed: int) -> list:
    rng = random.Random(seed)
    space = task.space
    found: dict = {}
    for _ in range(400):
        config = space.sample(rng)
        if space.algorithm(config) == algorithm:
            found.setdefault(space.schedule_key(config), config)
        if len(found) == count:
            break
    assert len(found) == count
    return list(found.values())


@pytest.mark.parametrize("combiner", ["sum", "max", "min"])
def test_sampled_split_configs_match_the_reference(combiner):
    task = Task.from_tensors(_reduction(combiner, 2, LONG), name=f"long_{combiner}")
    _check_sampled(None, configs=_configs_of(task, RFACTOR, 5, seed=1) + _configs_of(task, DIRECT, 2, seed=1),
                   task=task)


def test_softmax_split_configs_and_starting_points_match_the_reference():
    task = Task("softmax", dict(shape=[1, LONG]), "cpu")
    space = task.space
    points = space.starting_points(random.Random(0))
    assert {space.algorithm(c) for c in points} == {DIRECT, RFACTOR}
    split = [c for c in points if space.algorithm(c) == RFACTOR]
    parallel = [c for c in split if "softmax_max_rf: inner tiles" in space.describe_config(c)
                and "2 outer loop(s) in parallel" in space.describe_config(c)]
    assert parallel, "a starting point runs the partial results in parallel, not inside the row loop"
    generic = space.alternatives[RFACTOR].starting_points(random.Random(0))
    assert not {space.schedule_key(c) for c in parallel} & {f"{RFACTOR}:{space.alternatives[RFACTOR].schedule_key(c)}"
                                                               for c in generic}
    _check_sampled(None, configs=split + _configs_of(task, RFACTOR, 4, seed=2), task=task)


def test_a_split_reduction_lowers_to_a_parallel_loop_over_the_parts():
    import schedule

    task = Task.from_tensors(_reduction("sum", 1, LONG), name="long_sum_1")
    space = task.space
    point = next(c for c in space.starting_points(random.Random(0)) if space.algorithm(c) == RFACTOR
                 and "Y_rf: inner tiles" in space.describe_config(c))
    text = str(schedule.lower(*space.apply(point)))
    parallel = [line for line in text.splitlines() if "(parallel)" in line]
    assert parallel and f"range({RFACTOR_PARTS})" in parallel[0], text
    direct = space.primary.sample(random.Random(0))
    assert "(parallel)" not in str(schedule.lower(*space.primary.apply(direct)))  # one result: nothing to share


def test_a_tuning_run_measures_both_algorithms_and_verifies_every_trial(tmp_path):
    import autotune
    from tuning_db import Database

    task = Task.from_tensors(_reduction("sum", 1, LONG), name="long_sum_tuned")
    with Database(str(tmp_path / "t.db")) as db:
        autotune.tune(task, trials=24, db=db, seed=0)
        records = db.records_for_task(task.key, "cpu")
    algorithms = {r.config["values"].get("algorithm", DIRECT) for r in records}
    assert algorithms == {DIRECT, RFACTOR}
    assert records and all(r.status == "ok" for r in records), [r.status for r in records]
