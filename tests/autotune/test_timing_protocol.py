"""The timing protocol candidates and anchors share, run on a scripted clock."""
from __future__ import annotations

import pytest

from autotune.runner import TimingOptions
from autotune.timing_protocol import MIN_REPEAT_S, Rounds, fastest_round, time_round


class ScriptedKernel:
    """A 'kernel' whose calls advance a fake clock by scripted durations (the last one repeats)."""

    def __init__(self, durations):
        self.durations = list(durations)
        self.now = 0.0
        self.calls = 0

    def clock(self) -> float:
        return self.now

    def __call__(self, *args):
        self.now += self.durations[min(self.calls, len(self.durations) - 1)]
        self.calls += 1


def test_a_round_flushes_before_each_repeat_and_stops_at_min_repeats_and_min_time():
    k = ScriptedKernel([0.01])  # 10 ms a call: one call per repeat
    flushes = []
    costs = time_round(k, (), min_repeats=3, max_repeats=20, min_time=0.035, flush=lambda: flushes.append(k.calls),
                       clock=k.clock)
    assert costs == pytest.approx([0.01] * 4)   # 3 repeats reach 30 ms < 35 ms: a fourth
    assert flushes == [1, 2, 3, 4]               # after the warm-up, before every repeat


def test_short_calls_are_grouped_above_the_clock_resolution():
    k = ScriptedKernel([1e-4])
    costs = time_round(k, (), min_repeats=3, max_repeats=3, min_time=0.0, flush=lambda: None, clock=k.clock)
    number = int(MIN_REPEAT_S / 1e-4)
    assert k.calls == 1 + 3 * number
    assert costs == pytest.approx([1e-4] * 3)


def test_a_hopeless_first_call_ends_the_round():
    k = ScriptedKernel([1.0])
    assert time_round(k, (), min_repeats=3, max_repeats=20, min_time=0.035, flush=lambda: None,
                      best_cost=0.1, slow_factor=3.0, clock=k.clock) == [1.0]
    assert k.calls == 1


def test_a_call_just_made_stands_in_for_the_warm_up():
    k = ScriptedKernel([0.01])
    costs = time_round(k, (), min_repeats=3, max_repeats=3, min_time=0.0, flush=lambda: None, clock=k.clock,
                       warmed_up=0.01)
    assert k.calls == 3 and costs == pytest.approx([0.01] * 3)
    # A hopeless one ends the round without another call.
    k = ScriptedKernel([0.05])
    assert time_round(k, (), min_repeats=3, max_repeats=3, min_time=0.0, flush=lambda: None, best_cost=0.1,
                      clock=k.clock, warmed_up=0.9) == [0.9]
    assert k.calls == 0
    # A short one gets a real warm-up: its first call is mostly cold start.
    k = ScriptedKernel([1e-3])
    time_round(k, (), min_repeats=1, max_repeats=1, min_time=0.0, flush=lambda: None, clock=k.clock, warmed_up=1.5e-3)
    assert k.calls == 1 + int(MIN_REPEAT_S / 1e-3)


def test_the_fastest_round_is_kept_and_rounds_are_apart():
    # round 1 slowed by a neighbour (20 ms calls), rounds 2 and 3 quiet (10 ms, 12 ms)
    k = ScriptedKernel([0.02] * 5 + [0.01] * 5 + [0.012] * 5)
    pauses = []
    rounds = fastest_round(k, TimingOptions(rounds=3, min_repeats=4, max_repeats=4, min_time=0.0),
                           flush=lambda: None, clock=k.clock, sleep=pauses.append, pause=0.5)
    assert rounds.medians == pytest.approx((0.02, 0.01, 0.012))
    assert rounds.fastest == pytest.approx(0.01)
    assert pauses == [0.5, 0.5]


def test_rounds_fastest_is_the_smallest_median():
    assert Rounds((0.3, 0.1, 0.2)).fastest == 0.1
