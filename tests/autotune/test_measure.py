"""Every trial status, from real kernels: one that segfaults, one that hangs, one that gives
a wrong answer, one that does not compile; the runner recovers after each and a tuning run
goes on and stores them. Also the measuring rounds of the runner.

Bad kernels are made by ``SabotagingBuilder``: it wraps the generated matmul kernel in a
function that crashes, spins, corrupts the output or does not compile, for the configs
it is told to sabotage.
"""
from __future__ import annotations

import os
import random

import pytest

from autotune import Task, tune
from autotune.builder import LocalBuilder
from autotune.measure import MeasureInput, MeasureResult, Status
from autotune.runner import LocalRunner, TimingOptions, keep_faster_round, measure_in_rounds
from tuning_db import Database

SIGNATURE = "void kernel(float* __restrict__ A, float* __restrict__ B, float* __restrict__ C)"

#: What the wrapper does before and after the real kernel, per sabotage.
SABOTAGE = {
    "segfault": ("*(volatile int*)0 = 1;", ""),
    "hang": ("for (volatile unsigned long spin = 0;; ++spin) {}", ""),
    "wrong": ("", "C[3] += 100.0f;"),
    "no_compile": ("this is not C;", ""),
    "slow": ("usleep(40000);", ""),
}


def sabotaged(source: str, how: str) -> str:
    """``source`` with its kernel wrapped so that it does ``how``."""
    assert SIGNATURE in source, "the matmul kernel's signature changed; update SIGNATURE"
    before, after = SABOTAGE[how]
    wrapper = f"\n{SIGNATURE} {{\n  {before}\n  kernel_good(A, B, C);\n  {after}\n}}\n"
    head = "#include <unistd.h>\n"
    return head + source.replace(SIGNATURE, SIGNATURE.replace("void kernel(", "static void kernel_good(")) + wrapper


class SabotagingBuilder(LocalBuilder):
    """Builds the configs in ``plan`` (config -> sabotage) sabotaged, the others as usual."""

    def __init__(self, plan: dict, **kw):
        super().__init__(**kw)
        self.plan = plan

    def source(self, inp: MeasureInput) -> str:
        source = super().source(inp)
        how = self.plan.get(inp.config)
        return source if how is None else sabotaged(source, how)


@pytest.fixture(scope="module")
def task():
    return Task("matmul", dict(M=32, N=32, K=32))


def distinct_configs(task, n, seed=0):
    rng = random.Random(seed)
    configs = []
    while len(configs) < n:
        c = task.space.sample(rng)
        if c not in configs:
            configs.append(c)
    return configs


FAST = TimingOptions(min_time=0.005, rounds=1)


def test_runner_gives_each_failure_its_status_and_goes_on(task):
    configs = distinct_configs(task, 6)
    hows = ["segfault", None, "hang", "wrong", None, "no_compile"]
    builder = SabotagingBuilder({c: h for c, h in zip(configs, hows) if h}, n_workers=2)
    builds = builder.build([MeasureInput(task, c) for c in configs])
    assert [b.status for b in builds] == [Status.OK] * 5 + [Status.COMPILE_ERROR]
    assert builds[5].error.startswith("gcc failed:") and "this is not C;" in builds[5].error  # gcc quotes the line
    with LocalRunner(timeout=2.0, options=FAST) as runner:
        results = runner.run(task, builds)
    assert [r.status for r in results] == [Status.RUNTIME_ERROR, Status.OK, Status.TIMEOUT, Status.WRONG_ANSWER, Status.OK, Status.COMPILE_ERROR]
    assert "SIGSEGV" in results[0].error
    assert "2 s" in results[2].error
    assert "first at (0, 3)" in results[3].error  # where the output differs
    assert all(r.cost > 0 and r.cost < float("inf") for r in (results[1], results[4]))
    assert all(r.cost == float("inf") for i, r in enumerate(results) if i not in (1, 4))


def test_a_measuring_process_that_exits_after_a_fatal_error_is_replaced(task, monkeypatch):
    """A GPU's measuring process replies to a CUDA fault, then exits; the next candidate may
    reach it before it is gone (a closed pipe): it goes to a fresh process instead."""
    from pathlib import Path

    from autotune.measure import BuildResult

    class ExitingRunner(LocalRunner):
        worker_module = "exiting_worker"

    here = str(Path(__file__).parent)
    monkeypatch.setenv("PYTHONPATH", here + (":" + os.environ["PYTHONPATH"] if os.environ.get("PYTHONPATH") else ""))
    builds = [BuildResult(Status.OK, artifact) for artifact in ("die", "ok", "die", "ok", "ok", "die", "ok")]
    with ExitingRunner(timeout=10.0, options=FAST) as runner:
        results = runner.run(task, builds)
    assert [r.status for r in results] == [Status.RUNTIME_ERROR, Status.OK] * 2 + [Status.OK, Status.RUNTIME_ERROR,
                                                                                   Status.OK]
    assert "the device is gone" in results[0].error


def test_tuning_run_continues_past_every_failure_and_stores_it(task, tmp_path):
    # The grid tuner walks the space's enumeration in order, one config per schedule:
    # sabotage its first four.
    schedules = {}
    for config in task.space.enumerate():
        schedules.setdefault(task.space.schedule_key(config), config)
        if len(schedules) == 4:
            break
    first = list(schedules.values())
    hows = ["segfault", "hang", "wrong", "no_compile"]
    builder = SabotagingBuilder(dict(zip(first, hows)), n_workers=2)
    # 6 s: the hang costs its whole timeout, and a healthy 32^3 kernel's measurement took
    # over 2 s twice in CI on a loaded 2-core host (its OpenMP threads waiting for a core)
    with Database(tmp_path / "t.db") as db, LocalRunner(timeout=6.0, options=FAST) as runner:
        result = tune(task, trials=10, tuner="grid", db=db, batch_size=5, builder=builder, runner=runner)
        statuses = [t.result.status for t in result.history]
        assert statuses == [Status.RUNTIME_ERROR, Status.TIMEOUT, Status.WRONG_ANSWER, Status.COMPILE_ERROR] + [Status.OK] * 6
        assert result.best_config not in first
        (run,) = db.list_runs()
        assert run.status == "finished" and run.n_records == 10
        stored = db.history(run.id)
        assert [r.status for r in stored] == statuses
        assert all(r.median_s is None and r.error for r in stored[:4])
        assert all(r.median_s > 0 for r in stored[4:])


class ScriptedMeasurer:
    """Stands in for the measuring process: candidate i's n-th measurement costs
    ``costs[i][n]`` seconds (None: a wrong answer); logs (candidate, best_cost) per call."""

    def __init__(self, costs):
        self.costs = costs
        self.calls = []

    def __call__(self, i, best_cost):
        self.calls.append((i, best_cost))
        cost = self.costs[i][sum(1 for c, _ in self.calls if c == i) - 1]
        if cost is None:
            return MeasureResult(Status.WRONG_ANSWER, error="C differs")
        return MeasureResult(Status.OK, costs=[cost] * 3, run_s=3 * cost)


def test_later_rounds_measure_only_candidates_near_the_best():
    measure = ScriptedMeasurer([[1.0, 0.9, 0.95], [1.5, 1.2, 1.1], [3.0], [1.9, None]])
    options = TimingOptions(rounds=3, recheck_within=2.0)
    results = measure_in_rounds(4, measure, options)
    # Round 1 forward; round 2 backward over those within 2x of the best (not candidate 2: 3.0 > 2 x 1.0);
    # round 3 forward, after candidate 3 failed its second round.
    assert [i for i, _ in measure.calls] == [0, 1, 2, 3, 3, 1, 0, 0, 1]
    assert [r.rounds for r in results] == [3, 3, 1, 2]
    assert [r.cost for r in results[:3]] == [0.9, 1.1, 3.0]
    assert results[3].status == Status.WRONG_ANSWER and "later measuring round" in results[3].error
    # Each call knows the best cost so far: the first round's running best, later the batch's best.
    assert [b for _, b in measure.calls] == [None, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 0.9, 0.9]


def test_a_third_round_only_for_candidates_whose_rounds_disagree():
    measure = ScriptedMeasurer([[1.0, 1.02, 0.5], [1.0, 1.2, 1.1], [1.0, 0.98, 0.4]])
    results = measure_in_rounds(3, measure, TimingOptions(rounds=3, settled_within=0.03))
    assert [i for i, _ in measure.calls] == [0, 1, 2, 2, 1, 0, 1]  # 0 and 2 agree within 3 %
    assert [r.rounds for r in results] == [2, 3, 2]
    assert [r.cost for r in results] == [1.0, 1.0, 0.98]
    measure = ScriptedMeasurer([[1.0, 1.02, 0.5]])  # settled_within=0: every round as before
    assert measure_in_rounds(1, measure, TimingOptions(rounds=3, settled_within=0.0))[0].cost == 0.5
    with pytest.raises(ValueError, match="settled_within"):
        TimingOptions(settled_within=-0.1)


def test_rounds_start_from_the_best_known_cost_and_skip_failures():
    measure = ScriptedMeasurer([[None], [5.0, 4.0], [0.5, 0.5]])
    results = measure_in_rounds(3, measure, TimingOptions(rounds=2, recheck_within=2.0), best_cost=2.0)
    assert [i for i, _ in measure.calls] == [0, 1, 2, 2]  # 5.0 is over 2x the best (0.5); 0 failed
    assert [r.rounds for r in results] == [1, 1, 2] and results[0].status == Status.WRONG_ANSWER


def test_one_round_measures_each_candidate_once():
    measure = ScriptedMeasurer([[1.0], [1.0]])
    measure_in_rounds(2, measure, TimingOptions(rounds=1))
    assert [i for i, _ in measure.calls] == [0, 1]


def test_a_sleeping_kernel_is_timed_through_the_real_runner(task):
    good, slow = distinct_configs(task, 2, seed=2)
    builder = SabotagingBuilder({slow: "slow"}, n_workers=2)
    builds = builder.build([MeasureInput(task, c) for c in (good, slow)])
    options = TimingOptions(min_time=0.005, rounds=1)
    with LocalRunner(timeout=5.0, options=options) as runner:
        results = runner.run(task, builds)
    assert [r.status for r in results] == [Status.OK] * 2
    assert results[1].cost > 0.04  # the kernel sleeps 40 ms: no clock reads less


def test_a_later_round_keeps_the_faster_and_a_later_failure_wins():
    first = MeasureResult(Status.OK, costs=[2.0, 2.1, 2.2], run_s=1.0)
    faster = keep_faster_round(first, MeasureResult(Status.OK, costs=[1.0, 1.1, 1.2], run_s=1.0))
    assert faster.costs == [1.0, 1.1, 1.2] and faster.rounds == 2 and faster.run_s == 2.0
    slower = keep_faster_round(faster, MeasureResult(Status.OK, costs=[3.0, 3.0, 3.0], run_s=1.0))
    assert slower.costs == [1.0, 1.1, 1.2] and slower.rounds == 3
    failed = keep_faster_round(slower, MeasureResult(Status.WRONG_ANSWER, error="C differs", run_s=0.5))
    assert failed.status == Status.WRONG_ANSWER and failed.cost == float("inf")
    assert "later measuring round" in failed.error and "C differs" in failed.error


def test_timing_options_reject_nonsense():
    with pytest.raises(ValueError, match="rounds"):
        TimingOptions(rounds=0)
    with pytest.raises(ValueError, match="recheck_within"):
        TimingOptions(recheck_within=0.5)


@pytest.mark.parametrize("rounds", [1, 3])
def test_tune_measures_in_the_rounds_asked(task, rounds):
    timing = TimingOptions(min_time=0.005, rounds=rounds, settled_within=0.0)  # no candidate settles early
    result = tune(task, trials=6, tuner="random", batch_size=6, timing=timing)
    assert all(t.result.ok for t in result.history)
    assert max(t.result.rounds for t in result.history) == rounds  # the best is always near the best
    # A candidate left out of a round was then slower than recheck_within times the best,
    # and the best only gets faster: which ones those are depends on the machine's speed.
    best = min(t.result.cost for t in result.history)
    assert all(t.result.rounds == rounds or t.result.cost > timing.recheck_within * best for t in result.history)
