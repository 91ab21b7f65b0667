"""The final timing: the run's fastest configs timed again with the anchor, in interleaved
rounds, and the winner by that timing reported, stored and used by apply_best.

The protocol is checked with injected timers (what is timed, in which order, which figure
is kept); the measuring process and the database with real kernels, never their speed.
"""
from __future__ import annotations

import dataclasses
import random

import pytest

import autotune
import tuning_db
from autotune.final_timing import (
    FINAL_TUNER, FinalFigures, FinalTimingOptions, InterleavedTimes, confirm_leader, fastest_in_rounds,
    interleaved_rounds, median_interval, paired_ratio, pick_candidates, relative_error,
)
from autotune.loop import Trial
from autotune.measure import MeasureResult, Status
from autotune.runner import TimingOptions

QUICK = TimingOptions(rounds=1, min_time=0.0, min_repeats=1)
QUICK_FINAL = FinalTimingOptions(candidates=3, rounds=2, min_time=0.0, min_repeats=1, pause=0.0)


# ---------------------------------------------------------------- the protocol


def test_each_round_times_the_anchor_and_every_candidate_alternating_direction():
    order, pauses = [], []

    def candidate(i):
        order.append(i)
        return 1.0

    def anchor():
        order.append("A")
        return 1.0

    times = interleaved_rounds(3, candidate, anchor, rounds=3, pause=0.5, sleep=pauses.append,
                               start_round=lambda r: order.append(f"round {r}"))
    assert order == ["round 0", "A", 0, 1, 2, "round 1", 2, 1, 0, "A", "round 2", "A", 0, 1, 2]
    assert pauses == [0.5, 0.5]
    assert times.candidates == [[1.0] * 3] * 3 and times.anchor == [1.0] * 3 and times.errors == {}


def test_the_anchor_keeps_a_settling_time_from_the_candidates_on_both_sides():
    events = []
    interleaved_rounds(2, lambda i: events.append(i) or 1.0, lambda: events.append("A") or 1.0, rounds=2,
                       pause=0.5, settle=0.05, sleep=lambda s: events.append(f"sleep {s}"))
    assert events == ["A", "sleep 0.05", 0, 1, "sleep 0.5", 1, 0, "sleep 0.05", "A"]


def test_the_measuring_process_idles_openblas_threads_unless_the_user_chose(monkeypatch):
    from autotune.runner import LocalRunner

    task = autotune.Task("matmul", dict(M=8, N=8, K=8), target="cpu")
    for preset, expected in ((None, "4"), ("9", "9")):
        if preset is None:
            monkeypatch.delenv("OPENBLAS_THREAD_TIMEOUT", raising=False)
        else:
            monkeypatch.setenv("OPENBLAS_THREAD_TIMEOUT", preset)
        runner = LocalRunner()
        try:
            runner._ensure(task)
            with open(f"/proc/{runner._proc.pid}/environ", "rb") as f:
                env = dict(x.split(b"=", 1) for x in f.read().split(b"\0") if b"=" in x)
        finally:
            runner.close()
        assert env[b"OPENBLAS_THREAD_TIMEOUT"] == expected.encode()


def test_without_an_anchor_only_the_candidates_are_timed():
    times = interleaved_rounds(2, lambda i: 2.0 + i, None, rounds=2, sleep=lambda s: None)
    assert times.anchor is None and times.candidates == [[2.0, 2.0], [3.0, 3.0]]


def test_a_candidate_that_fails_is_not_timed_again_and_the_others_go_on():
    calls = []

    def candidate(i):
        calls.append(i)
        if i == 1:
            raise ValueError("wrong_answer: 3 of 64 elements differ")
        return 1.0

    times = interleaved_rounds(3, candidate, lambda: 1.0, rounds=3, sleep=lambda s: None)
    assert calls.count(1) == 1 and calls.count(0) == 3 and calls.count(2) == 3
    assert times.errors == {1: "wrong_answer: 3 of 64 elements differ"}


def _scripted(values):
    """A timer that returns ``values`` in turn, the last one ever after."""
    values = list(values)
    return lambda *args: values.pop(0) if len(values) > 1 else values[0]


def test_the_relative_error_of_a_median_grows_with_the_spread_and_shrinks_with_the_rounds():
    assert relative_error([1.0, 1.0]) == float("inf")  # two rounds say nothing of their spread
    assert relative_error([1.0, 1.0, 1.0]) == 0.0
    assert relative_error([2.0, 2.2, 1.8]) == pytest.approx(1.2533 * 1.4826 * 0.1 / 3 ** 0.5)
    wide, narrow = relative_error([0.8, 1.0, 1.2, 0.9, 1.1]), relative_error([0.98, 1.0, 1.02, 0.99, 1.01])
    assert wide == pytest.approx(10 * narrow)
    assert relative_error([0.8, 1.0, 1.2, 0.9, 1.1] * 4) == pytest.approx(wide / 2)
    # one spoiled round does not move it much: the median absolute deviation ignores how far it went
    assert relative_error([0.98, 1.0, 1.02, 0.99, 3.0]) == pytest.approx(relative_error([0.98, 1.0, 1.02, 0.99, 1.03]))


def test_a_quiet_timing_stops_at_its_rounds_and_a_noisy_one_goes_on_to_the_limit():
    quiet = interleaved_rounds(1, _scripted([1.0, 1.001, 0.999]), _scripted([2.0, 2.001, 1.999]), rounds=3,
                               sleep=lambda s: None, max_rounds=9, precision=0.01)
    assert len(quiet.candidates[0]) == 3 and len(quiet.anchor) == 3
    noisy = interleaved_rounds(1, _scripted([1.0, 1.3, 0.8, 1.2, 0.9] * 3), lambda: 2.0, rounds=3,
                               sleep=lambda s: None, max_rounds=9, precision=0.01)
    assert len(noisy.candidates[0]) == 9 and len(noisy.anchor) == 9
    # the anchor's noise makes the ratio as uncertain as the candidate's own
    noisy_anchor = interleaved_rounds(1, lambda i: 1.0, _scripted([2.0, 2.6, 1.6, 2.4, 1.8] * 3), rounds=3,
                                      sleep=lambda s: None, max_rounds=9, precision=0.01)
    assert len(noisy_anchor.candidates[0]) == 9
    # load that slows the candidate and the anchor alike in a round leaves their ratio steady
    shared = interleaved_rounds(1, _scripted([1.0, 1.5, 0.8, 1.2] * 3), _scripted([2.0, 3.0, 1.6, 2.4] * 3),
                                rounds=3, sleep=lambda s: None, max_rounds=9, precision=0.01)
    assert len(shared.candidates[0]) == 3
    # without a precision the rounds are what was asked, noisy or not
    assert len(interleaved_rounds(1, _scripted([1.0, 1.3, 0.8] * 3), None, rounds=3,
                                  sleep=lambda s: None, max_rounds=9).candidates[0]) == 3


def test_a_timing_stops_once_its_rounds_agree_enough():
    # Two wild rounds, then steady ones: more rounds until the steady ones outvote the spread.
    times = interleaved_rounds(1, _scripted([1.0, 1.5, 0.6] + [1.0] * 20), None, rounds=3,
                               sleep=lambda s: None, max_rounds=20, precision=0.05)
    # The error estimate alone is nil from the 5th round (three of five agree), but the 90 %
    # interval is the extremes up to 7 rounds; from 8 it is the 2nd from each end: 1.0 both.
    assert len(times.candidates[0]) == 8
    assert relative_error(times.candidates[0][:5]) == 0.0 and median_interval(times.candidates[0][:7]) == (0.6, 1.5)
    assert median_interval(times.candidates[0]) == (1.0, 1.0)


def test_a_timing_with_too_few_rounds_for_an_interval_stops_by_its_error_alone():
    times = interleaved_rounds(1, _scripted([1.0, 1.001, 0.999, 1.0]), None, rounds=3,
                               sleep=lambda s: None, max_rounds=4, precision=0.05)
    assert len(times.candidates[0]) == 3


def test_the_rounds_that_pick_the_leader_are_not_extended_but_its_confirmation_is():
    from autotune.builder import LocalBuilder
    from autotune.final_timing import final_timing

    class Recording:
        limits = []

        def time_final(self, task, builds, options):
            Recording.limits.append((len(builds), options.round_limit))
            return InterleavedTimes([[1.0 + i] * options.rounds for i in range(len(builds))], [2.0] * options.rounds)

    task = autotune.Task("matmul", dict(M=16, N=16, K=16), target="cpu")
    candidates = [(task.space.sample(random.Random(i)), 1e-6) for i in range(2)]
    options = dataclasses.replace(QUICK_FINAL, rounds=3, max_rounds=12)
    final_timing(task, LocalBuilder(), Recording(), candidates, options)
    assert Recording.limits == [(2, 3), (1, 12)]
    assert FinalTimingOptions(rounds=4).round_limit == 12


def test_screening_ranks_each_candidate_against_its_rounds_so_a_slow_stretch_moves_no_rank():
    # Candidate 1 is 5 % faster than 0 in every round; the machine ran twice as slow in round 2
    # and candidate 1 alone met a spike in round 3. Its plain median falls in the slow round
    # (1.9 against 1.0); against each round's median it keeps its lead.
    times = InterleavedTimes([[1.0, 2.0, 1.0], [0.95, 1.9, 3.0], [1.2, 2.4, 1.2]], None)
    assert sorted(range(2), key=lambda i: sorted(times.candidates[i])[1]) == [0, 1]
    assert fastest_in_rounds(times, 2) == [1, 0]
    assert fastest_in_rounds(times, 5) == [1, 0, 2]
    failed = InterleavedTimes([[1.0, 1.0], [0.5], [2.0, 2.0]], None, errors={1: "wrong_answer: x"})
    assert fastest_in_rounds(failed, 3) == [0, 2]
    assert fastest_in_rounds(InterleavedTimes([[], []], None, errors={0: "x", 1: "y"}), 1) == []


class _ScriptedRunner:
    """A runner whose rounds make the candidates listed in ``fast`` (their positions in the
    timing) the fastest, whose screening rounds fail those in ``failing``, and that records
    each ``time_final`` call."""

    def __init__(self, fast, failing=()):
        self.fast, self.failing, self.calls = fast, failing, []

    def time_final(self, task, builds, options):
        self.calls.append((len(builds), options.anchor, options.rounds, options.round_limit))
        rounds = [[0.5 if i in self.fast else 1.0 + 0.1 * i] * options.rounds for i in range(len(builds))]
        errors = {i: "runtime_error: crashed" for i in self.failing} if not options.anchor else {}
        return InterleavedTimes(rounds, [2.0] * options.rounds if options.anchor else None, errors=errors)


def test_a_wide_pool_is_screened_and_its_fastest_go_on_to_the_rounds_with_the_anchor():
    from autotune.builder import LocalBuilder
    from autotune.final_timing import final_timing
    from test_measure import distinct_configs

    task = autotune.Task("matmul", dict(M=16, N=16, K=16), target="cpu")
    configs = distinct_configs(task, 6)
    candidates = [(c, 1e-6 * (n + 1)) for n, c in enumerate(configs)]  # fastest search reading first
    options = dataclasses.replace(QUICK_FINAL, candidates=2, pool=6, screen_rounds=3, confirm=False)
    runner = _ScriptedRunner(fast={4, 5}, failing={1})
    figures = final_timing(task, LocalBuilder(), runner, candidates, options)
    # screened: all six, three rounds, no anchor, not extended; then the two fastest of them,
    # with the anchor (unconfirmed, so their rounds may go on until precise)
    assert runner.calls == [(6, False, 3, 3), (2, True, 2, 6)]
    assert figures.screened == 6
    # listed in search order: the one that failed in screening, then the two kept (read 5th and 6th)
    assert [c.hash for c in figures.configs] == [configs[1].hash, configs[4].hash, configs[5].hash]
    assert figures.search_costs == pytest.approx([2e-6, 5e-6, 6e-6])
    assert figures.errors == {0: "runtime_error: crashed"} and figures.costs[0] is None
    assert figures.winner in (1, 2) and len(figures.anchor_rounds) == 2


def test_a_pool_no_larger_than_the_candidates_is_not_screened():
    from autotune.builder import LocalBuilder
    from autotune.final_timing import final_timing

    task = autotune.Task("matmul", dict(M=16, N=16, K=16), target="cpu")
    candidates = [(task.space.sample(random.Random(i)), 1e-6) for i in range(2)]
    runner = _ScriptedRunner(fast=set())
    figures = final_timing(task, LocalBuilder(), runner, candidates, dataclasses.replace(QUICK_FINAL, confirm=False))
    assert [anchor for _, anchor, _, _ in runner.calls] == [True] and figures.screened == 0
    assert FinalTimingOptions(candidates=4).pool_size == 12 and FinalTimingOptions(candidates=4, pool=4).pool_size == 4


def test_placed_copies_keep_the_contents_at_16_byte_boundaries_anywhere_in_a_page():
    import numpy as np

    from autotune.final_timing import placed_copies

    rng = random.Random(0)
    a = np.arange(1000, dtype=np.float32).reshape(10, 100)
    offsets = set()
    for _ in range(20):
        (copy,) = placed_copies([a], rng)
        assert copy.flags.c_contiguous and copy.dtype == a.dtype and np.array_equal(copy, a)
        assert copy.ctypes.data % 16 == 0
        offsets.add(copy.ctypes.data % 4096)
    assert len(offsets) > 10


def _figures(rounds, anchor, search_costs=None, errors=None):
    configs = [autotune.Task("matmul", dict(M=16, N=16, K=16)).space.sample(random.Random(i)) for i in range(len(rounds))]
    return FinalFigures(configs, search_costs or [1.0] * len(rounds), rounds, errors or {}, "NumPy", anchor, flops=2e9)


def test_the_figure_is_the_median_of_the_rounds_not_the_fastest_and_the_winner_is_ranked_by_it():
    # Candidate 0 had the lucky search reading and one lucky round; candidate 1 is steadily faster.
    figures = _figures([[1.0, 3.0, 3.0], [2.0, 2.0, 2.0]], anchor=[4.0, 4.0, 5.0], search_costs=[0.9, 1.5])
    assert figures.costs == [3.0, 2.0]
    assert figures.winner == 1
    assert figures.anchor_cost == 4.0
    # each round's ratio (4/1, 4/3, 5/3 and 4/2, 4/2, 5/2), their median
    assert figures.ratio(1) == pytest.approx(2.0) and figures.ratio(0) == pytest.approx(5.0 / 3.0)
    assert figures.gflops(1) == pytest.approx(1.0) and figures.anchor_gflops == pytest.approx(0.5)


def test_the_ratio_pairs_the_rounds_so_a_slow_stretch_between_the_two_timings_does_not_move_it():
    # The host slowed down by half between the candidate's and the anchor's timing in round 2
    # and stayed slow: the median of the anchor's rounds comes from the slow stretch and the
    # candidate's from the fast one (their quotient: 4x); each round compares like with like.
    figures = _figures([[1.0, 1.0, 1.0, 2.0, 2.0]], anchor=[2.0, 2.0, 4.0, 4.0, 4.0])
    assert figures.ratio(0) == pytest.approx(2.0)
    assert paired_ratio([1.0, 1.0, 1.0, 2.0, 2.0], [2.0, 2.0, 4.0, 4.0, 4.0]) == pytest.approx(2.0)
    # the anchor figure reported beside the winner is the one its ratio implies
    assert figures.anchor_cost == pytest.approx(2.0)
    assert figures.gflops(0) / figures.anchor_gflops == pytest.approx(figures.ratio(0))
    assert paired_ratio([1.0], None) is None and paired_ratio([], [1.0]) is None


def test_the_median_interval_takes_order_statistics_by_the_binomial_tail():
    # 5 samples: only the extremes give 90 % (each tail 1/32); 4 samples cannot (1/16 > 5 %).
    assert median_interval([5.0, 1.0, 3.0, 2.0, 4.0]) == (1.0, 5.0)
    assert median_interval([1.0, 2.0, 3.0, 4.0]) is None
    # 15 samples: P(fewer than 4 below the median) = 576 / 32768 <= 5 % < P(fewer than 5): the 4th from each end
    assert median_interval([float(x) for x in range(15, 0, -1)]) == (4.0, 12.0)
    assert median_interval([float(x) for x in range(15)], confidence=0.5) == (5.0, 9.0)
    with pytest.raises(ValueError, match="confidence"):
        median_interval([1.0] * 5, confidence=1.0)


def test_the_median_interval_covers_the_median_about_as_often_as_it_says():
    rng = random.Random(3)
    for n in (5, 9, 15):
        covered = 0
        for _ in range(2000):
            low, high = median_interval([rng.lognormvariate(0.0, 0.3) for _ in range(n)])
            covered += low <= 1.0 <= high   # the lognormal's median is exp(0) = 1
        assert 0.88 <= covered / 2000 <= 0.99, (n, covered)


def test_the_ratio_interval_spans_the_rounds_ratios_and_a_wide_one_is_flagged():
    steady = _figures([[1.0] * 5], anchor=[2.0, 2.02, 1.98, 2.01, 2.0])
    assert steady.ratio_interval(0) == pytest.approx((1.98, 2.02))
    assert not steady.ratio_uncertain(0)
    # one round in five ran the anchor at half speed: the interval reaches to it, more than 5 % away
    noisy = _figures([[1.0] * 5], anchor=[2.0, 2.02, 4.0, 2.01, 1.99])
    assert noisy.ratio(0) == pytest.approx(2.01) and noisy.ratio_interval(0) == pytest.approx((1.99, 4.0))
    assert noisy.ratio_uncertain(0)
    # too few rounds for an interval: no interval, and the ratio cannot be vouched for
    short = _figures([[1.0] * 3], anchor=[2.0] * 3)
    assert short.ratio_interval(0) is None and short.ratio_uncertain(0)
    # no anchor, or a failure: no ratio, nothing to flag
    assert _figures([[1.0] * 5], anchor=None).ratio_interval(0) is None
    failed = _figures([[1.0] * 5, []], anchor=[2.0] * 5, errors={1: "runtime_error: boom"})
    assert failed.ratio_interval(1) is None and not failed.ratio_uncertain(1)


def test_a_failed_candidate_has_no_figure_and_cannot_win():
    figures = _figures([[1.0], [2.0]], anchor=None, errors={0: "runtime_error"})
    assert figures.costs == [None, 2.0] and figures.winner == 1 and figures.ratio(1) is None
    assert _figures([[], []], anchor=None, errors={0: "x", 1: "y"}).winner is None


def _again(scripted: dict):
    """A ``time_again`` that answers the confirmation of a group of candidates from
    ``scripted`` (candidate -> its rounds or an error, and the anchor's rounds beside it) and
    logs the calls (a group of one as its index)."""
    calls = []

    def time_again(group):
        calls.append(group[0] if len(group) == 1 else list(group))
        rounds = [scripted[i][0] for i in group]
        errors = {slot: r for slot, r in enumerate(rounds) if isinstance(r, str)}
        return InterleavedTimes([[] if slot in errors else r for slot, r in enumerate(rounds)], scripted[group[0]][1],
                                errors=errors)

    return time_again, calls


def test_the_leader_is_timed_again_and_its_figure_is_the_confirmation_not_the_rounds_that_picked_it():
    # Candidate 0 led by lucky rounds; timed again it runs at 2.5, behind candidate 1's 2.0,
    # so candidate 1 is timed again too, confirms at 2.2 and wins with that figure.
    figures = _figures([[1.0, 1.0, 1.0], [2.0, 2.0, 2.0], [3.0, 3.0, 3.0]], anchor=[4.0, 4.0, 4.0])
    time_again, calls = _again({0: ([2.5, 2.5, 2.5], [5.0, 5.0, 5.0]), 1: ([2.2, 2.2, 2.2], [4.4, 4.4, 4.4])})
    confirm_leader(figures, time_again)
    assert calls == [0, 1]
    assert figures.costs == [2.5, 2.2, 3.0] and figures.winner == 1
    assert figures.result(1).costs == [2.2, 2.2, 2.2]  # what is stored, so the database ranks it first
    assert figures.anchor_cost == 4.4 and figures.ratio(1) == pytest.approx(2.0)
    assert figures.ratio(0) == pytest.approx(2.0) and figures.ratio(2) == pytest.approx(4.0 / 3.0)
    # A leader that stays ahead when timed again wins at once; one that fails now loses.
    steady = _figures([[1.0], [2.0]], anchor=[4.0])
    time_again, calls = _again({0: ([1.1], [4.0])})
    confirm_leader(steady, time_again)
    assert calls == [0] and steady.winner == 0 and steady.costs == [1.1, 2.0]
    broken = _figures([[1.0], [2.0]], anchor=[4.0])
    time_again, calls = _again({0: ("wrong_answer: 3 elements differ", None), 1: ([2.0], [4.0])})
    confirm_leader(broken, time_again)
    assert calls == [0, 1] and broken.winner == 1 and broken.result(0).status is Status.WRONG_ANSWER


def test_when_the_leader_falls_back_the_candidates_now_ahead_are_confirmed_together():
    # Candidate 0 confirms at 2.6, behind the first rounds of 1 (2.0) and 2 (2.5) but ahead of
    # 3 (2.8): 1 and 2 are timed again together, in one interleaved timing; 3 never is.
    figures = _figures([[1.0] * 3, [2.0] * 3, [2.5] * 3, [2.8] * 3], anchor=[4.0] * 3)
    time_again, calls = _again({0: ([2.6] * 3, [5.0] * 3), 1: ([2.4] * 3, [4.8] * 3), 2: ([2.3] * 3, None)})
    confirm_leader(figures, time_again)
    assert calls == [0, [1, 2]]
    assert figures.costs == [2.6, 2.4, 2.3, 2.8] and figures.winner == 2
    assert figures.anchor_rounds_of(2) == figures.anchor_rounds_of(1) == [4.8] * 3  # the anchor of their timing
    # One of a group that fails loses; the other's confirmation stands.
    failing = _figures([[1.0], [2.0], [2.5]], anchor=[4.0])
    time_again, calls = _again({0: ([3.0], [4.0]), 1: ("runtime_error: crashed", [4.0]), 2: ([2.6], None)})
    confirm_leader(failing, time_again)
    assert calls == [0, [1, 2]] and failing.winner == 2 and failing.result(1).status is Status.RUNTIME_ERROR


def test_the_run_stores_the_confirmed_figures_and_apply_best_builds_the_reported_winner(tmp_path):
    from autotune import targets
    from autotune.final_timing import store_final

    task = autotune.Task("matmul", dict(M=16, N=16, K=16), target="cpu")
    figures = _figures([[1.0, 1.0], [2.0, 2.0]], anchor=[4.0, 4.0])
    figures.flops = task.flops
    confirm_leader(figures, _again({0: ([3.0, 3.0], [4.0, 4.0]), 1: ([2.1, 2.1], [4.2, 4.2])})[0])
    with tuning_db.Database(tmp_path / "t.db") as db:
        run_id = store_final(db, task, targets.describe(task.target), figures, "test")
        best = db.best(task.key)
        assert best.run_id == run_id and best.config_hash == figures.configs[figures.winner].hash
        assert best.median_s == 2.1
        assert db.get_run(run_id).anchor_gflops == pytest.approx(task.flops / 4.2 / 1e9)
        assert autotune.build(task, db=db).config.hash == figures.configs[1].hash


def test_without_confirm_the_leader_is_not_timed_again(tmp_path):
    from autotune.final_timing import final_timing
    from autotune.runner import LocalRunner
    from autotune.builder import LocalBuilder

    class Counting(LocalRunner):
        calls = 0

        def time_final(self, task, builds, options):
            Counting.calls += 1
            return super().time_final(task, builds, options)

    task = autotune.Task("matmul", dict(M=16, N=16, K=16), target="cpu")
    candidates = [(task.space.sample(random.Random(i)), 1e-6) for i in range(2)]
    for confirm, calls in ((False, 1), (True, 2)):
        Counting.calls = 0
        options = dataclasses.replace(QUICK_FINAL, confirm=confirm)
        with Counting(timeout=5.0) as runner:
            figures = final_timing(task, LocalBuilder(), runner, candidates, options)
        assert figures.winner is not None and Counting.calls >= calls
        assert (figures.winner in figures.confirmed) == confirm
        if not confirm:
            assert Counting.calls == 1

    class LostAfterFirst(LocalRunner):  # the machine goes away after the first rounds
        calls = 0

        def time_final(self, task, builds, options):
            LostAfterFirst.calls += 1
            if LostAfterFirst.calls > 1:
                raise RuntimeError("node lost during the final timing")
            return super().time_final(task, builds, options)

    with LostAfterFirst(timeout=5.0) as runner:
        figures = final_timing(task, LocalBuilder(), runner, candidates, QUICK_FINAL)
    assert figures.winner is not None and not figures.confirmed and len(figures.anchor_rounds) == 2


def test_candidates_are_the_fastest_distinct_ok_configs_each_with_its_best_reading():
    space = autotune.Task("matmul", dict(M=16, N=16, K=16)).space
    a, b, c = (space.sample(random.Random(i)) for i in range(3))
    history = [Trial(0, a, MeasureResult(Status.OK, costs=[3.0])), Trial(1, b, MeasureResult(Status.OK, costs=[2.0])),
               Trial(2, c, MeasureResult(Status.WRONG_ANSWER, error="x")),
               Trial(3, a, MeasureResult(Status.OK, costs=[1.0]))]
    assert pick_candidates(history, 5) == [(a, 1.0), (b, 2.0)]
    assert pick_candidates(history, 1) == [(a, 1.0)]


def test_options_are_checked():
    with pytest.raises(ValueError, match="candidates"):
        FinalTimingOptions(candidates=-1)
    with pytest.raises(ValueError, match="rounds"):
        FinalTimingOptions(rounds=0)
    with pytest.raises(ValueError, match="max_rounds"):
        FinalTimingOptions(rounds=5, max_rounds=4)
    with pytest.raises(ValueError, match="precision"):
        FinalTimingOptions(precision=0.0)
    with pytest.raises(ValueError, match="pool"):
        FinalTimingOptions(candidates=5, pool=4)
    with pytest.raises(ValueError, match="screen_rounds"):
        FinalTimingOptions(screen_rounds=0)


# ---------------------------------------------------------------- measured, stored, used


def test_a_run_times_its_fastest_configs_again_with_numpy_and_apply_best_uses_the_winner(tmp_path):
    task = autotune.Task("matmul", dict(M=32, N=32, K=32), target="cpu")
    with tuning_db.Database(tmp_path / "t.db") as db:
        result = autotune.tune(task, trials=8, tuner="random", db=db, batch_size=4, timing=QUICK, final=QUICK_FINAL)
        final = result.final
        assert len(final.configs) == 3 and len({c.hash for c in final.configs}) == 3
        distinct = {t.config.hash for t in result.history if t.result.ok}
        assert final.screened == (min(9, len(distinct)) if len(distinct) > 3 else 0)  # the pool: 3 x 3
        assert all(len(r) == 2 for r in final.round_costs) and len(final.anchor_rounds) == 2
        assert final.anchor_name == "NumPy" and final.winner is not None
        assert result.best_config == final.configs[final.winner]
        assert result.best_cost == final.costs[final.winner]
        assert result.timings["final_s"] > 0

        runs = db.list_runs(task.key)
        assert [r.tuner for r in runs] == ["random", FINAL_TUNER]
        stored = runs[1]
        assert stored.n_records == 3 and stored.anchor_gflops == pytest.approx(final.anchor_gflops)
        best = db.best(task.key)
        assert best.run_id == stored.id and best.config_hash == result.best_config.hash
        assert best.median_s == pytest.approx(final.costs[final.winner])
        # Resuming, sharing and replaying see the search's records only.
        assert len(db.records_for_task(task.key, None)) == 8
        assert len(db.records_for_task(task.key, None, include_final=True)) == 11

        f = autotune.build(task, db=db)
        assert f.config.hash == result.best_config.hash and f.record.run_id == stored.id


def test_a_final_record_outranks_a_faster_search_reading(tmp_path):
    task = autotune.Task("matmul", dict(M=16, N=16, K=16), target="cpu")
    target = autotune.targets.describe(task.target)
    lucky, steady = (task.space.sample(random.Random(i)) for i in (1, 2))

    def record(config, seconds, trial):
        return tuning_db.MeasureRecord(
            workload_key=task.key, workload_name=task.workload_name, params=task.params, target=target,
            config=config.to_dict(), config_hash=config.hash, status="ok", costs=[seconds], median_s=seconds,
            gflops=task.flops / seconds / 1e9, trial=trial)

    with tuning_db.Database(tmp_path / "t.db") as db:
        search = db.start_run(task.key, task.workload_name, task.params, target, "random", 0, 2)
        db.add_records(search, [record(lucky, 1e-6, 0), record(steady, 2e-6, 1)])
        assert db.best(task.key).config_hash == lucky.hash
        final = db.start_run(task.key, task.workload_name, task.params, target, FINAL_TUNER, None, 2,
                             anchor_gflops=3.0)
        db.add_records(final, [record(lucky, 4e-6, 0), record(steady, 3e-6, 1)])
        assert [r.config_hash for r in db.top_k(task.key, 4)] == [steady.hash, lucky.hash, lucky.hash, steady.hash]
        assert db.get_run(final).anchor_gflops == 3.0


def test_resuming_after_a_final_timing_counts_only_the_searched_trials(tmp_path):
    task = autotune.Task("matmul", dict(M=16, N=16, K=16), target="cpu")
    with tuning_db.Database(tmp_path / "t.db") as db:
        autotune.tune(task, trials=4, tuner="grid", db=db, batch_size=4, timing=QUICK, final=QUICK_FINAL)
        again = autotune.tune(task, trials=8, tuner="grid", db=db, batch_size=4, timing=QUICK, resume=True)
        assert len(again.history) == 8
        assert len({t.config.hash for t in again.history}) == 8


def test_a_workload_without_an_anchor_still_gets_its_final_timing(tmp_path):
    task = autotune.Task("elementwise", dict(op="sigmoid", shape=[8, 8]), target="cpu")  # pool2d: PyTorch's, if installed
    with tuning_db.Database(tmp_path / "t.db") as db:
        result = autotune.tune(task, trials=4, tuner="random", db=db, batch_size=4, timing=QUICK, final=QUICK_FINAL)
        assert result.final.anchor_rounds is None and result.final.winner is not None
        assert db.list_runs(task.key)[-1].anchor_gflops is None


@pytest.mark.parametrize("size", [64, 256])  # arrays on the heap, and mapped pages of their own
def test_without_the_anchor_the_placed_arrays_live_as_long_as_the_kernels_use_them(tmp_path, size):
    """Only the anchor kept this round's inputs referenced: without it they were freed while
    the kernels still read them, and the candidates failed (or read released memory)."""
    task = autotune.Task("matmul", dict(M=size, N=size, K=size), target="cpu")
    options = FinalTimingOptions(candidates=2, rounds=3, min_time=0.0, min_repeats=1, pause=0.0, anchor=False)
    with tuning_db.Database(tmp_path / "t.db") as db:
        result = autotune.tune(task, trials=4, tuner="random", db=db, batch_size=4, timing=QUICK, final=options)
    assert result.final.errors == {} and result.final.anchor_rounds is None
    assert all(len(r) == 3 for r in result.final.round_costs)


def test_a_runner_without_a_final_timing_keeps_the_search_best_and_says_why(tmp_path):
    from autotune.runner import LocalRunner

    class NoFinal(LocalRunner):
        def time_final(self, task, builds, options):
            raise NotImplementedError("NoFinal has no final timing")

    task = autotune.Task("matmul", dict(M=16, N=16, K=16), target="cpu")
    with NoFinal(options=QUICK) as runner:
        result = autotune.tune(task, trials=4, tuner="random", batch_size=4, runner=runner, final=QUICK_FINAL)
    assert result.final is None and result.final_note == "no final timing: NoFinal has no final timing"
    assert result.best is result.search_best


def test_export_and_import_keep_the_final_run_its_anchor_and_its_rank(tmp_path):
    task = autotune.Task("matmul", dict(M=16, N=16, K=16), target="cpu")
    with tuning_db.Database(tmp_path / "a.db") as db:
        result = autotune.tune(task, trials=4, tuner="random", db=db, batch_size=4, timing=QUICK, final=QUICK_FINAL)
        db.export_jsonl(tmp_path / "a.jsonl")
        best = db.best(task.key)
    with tuning_db.Database(tmp_path / "b.db") as other:
        other.import_jsonl(tmp_path / "a.jsonl")
        final = next(r for r in other.list_runs() if r.tuner == FINAL_TUNER)
        assert final.anchor_gflops == pytest.approx(result.final.anchor_gflops)
        moved = other.best(task.key)
        assert (moved.run_id, moved.config_hash, moved.median_s) == (final.id, best.config_hash, best.median_s)


def test_a_kernel_that_turns_wrong_or_no_longer_builds_loses_the_final_timing_with_its_status(tmp_path):
    from autotune.final_timing import final_timing, store_final
    from autotune.runner import LocalRunner
    from test_measure import SabotagingBuilder, distinct_configs

    task = autotune.Task("matmul", dict(M=32, N=32, K=32), target="cpu")
    good, wrong, broken = distinct_configs(task, 3)
    builder = SabotagingBuilder({wrong: "wrong", broken: "no_compile"}, n_workers=2)
    with LocalRunner(timeout=5.0) as runner:
        figures = final_timing(task, builder, runner, [(wrong, 1e-6), (broken, 2e-6), (good, 3e-6)], QUICK_FINAL)
    assert figures.winner == 2 and figures.costs[:2] == [None, None] and len(figures.anchor_rounds) == 2
    assert figures.errors[0].startswith("wrong_answer: ") and figures.errors[1].startswith("compile_error: ")
    with tuning_db.Database(tmp_path / "t.db") as db:
        run_id = store_final(db, task, autotune.targets.describe(task.target), figures, "test")
        assert [r.status for r in db.history(run_id)] == ["wrong_answer", "compile_error", "ok"]
        assert db.best(task.key).config_hash == good.hash
