"""The final timing: the figure a run reports is one the user can reproduce.

    figures = final_timing(task, builder, runner, configs)   # the run's fastest configs
    figures.winner, figures.gflops(i), figures.ratio(i)      # ratio: against the anchor

Why. The best of a thousand noisy measurements, each keeping its fastest round, is biased
upwards (the winner's curse): the kernel that tops the search is often one that was timed
during a lucky stretch. Rebuilt later through ``apply_best`` and timed next to NumPy, it
runs slower than the run said. So at the end of a run the fastest few configs are timed
again, together, in the measuring process, in ``rounds`` rounds interleaved with the
anchor (NumPy on the CPU): every round times the anchor and each candidate once, forward
then backward, so that a burst of load hits them alike. A candidate's figure is the
median of its round medians (not the fastest round: that is the lucky reading again).
Its ratio to the anchor is the median over rounds of each round's ratio (``paired_ratio``),
not the quotient of the two medians: a shared host runs slow for stretches longer than a
round, and the two medians can come from different stretches, where each round's ratio
compares the two under the same load. Re-timed 8-10 times in fresh processes on a noisy
host, the paired ratio of two kernels scattered less than the quotient did, by 1.5-3x
(``bench/RESULTS.md``). The anchor's figure beside the winner is the one that ratio implies
(the winner's figure over its ratio), so that the figures and the ratio a run reports
agree. The winner is the fastest by its figure, and the database stores it as a run of its
own (tuner ``"final"``, the anchor's GFLOP/s on the run), which ``Database.best`` and
``apply_best`` rank above measurements taken while searching.

Every round also moves the arrays (``placed_copies``): a user's arrays start wherever the
allocator put them, at any 16-byte boundary within a page, and a generated kernel that does
not pack its operands can run a third slower at one placement than at another. A figure
from one placement is a draw; the median over rounds at different placements is what a
user can expect, and a config that only wins at a lucky placement does not win here.

Picking the fastest of several candidates by the same rounds that give its figure is the
winner's curse again, on a smaller scale: with five candidates within noise of each other
(a kernel of a millisecond varies by a fifth between rounds), the one picked is the one
whose rounds ran luckiest. So the leader is timed again (``confirm``): ``rounds`` more
rounds of it alone with the anchor, and that confirmation, not the rounds that picked it,
becomes its figure. When the confirmed figure no longer leads, every candidate whose figure
now beats it is confirmed the same way, together in one interleaved timing (confirmed one
at a time, candidates within noise of each other took turns leading, and their
confirmations took most of the final timing), until a confirmed candidate leads; the
winner's figure, the anchor beside it, and the records stored are those of its
confirmation, so the ranking the database applies (``Database.top_k``: final records by
median) picks the config the run reports.

The fastest few by their search readings need not include the fastest config: on a shared
host one reading moves by more than the gap between the configs at the top of a search,
so the config that runs fastest may have been read well below the first few
(``bench/RESULTS.md``). The final timing therefore starts from a wider pool (``pool``,
three times ``candidates`` by default) and *screens* it: ``screen_rounds`` interleaved
rounds of every config in the pool, without the anchor, each config ranked by the median
over rounds of its time relative to that round's median time (a round the whole machine
ran slow in moves no config's rank). The ``candidates`` fastest of the pool go on to the
rounds with the anchor; the others are reported only as screened.

A noisy machine needs more rounds than a quiet one: a shared host's rounds can dip by a
third for a few seconds while a neighbour works, and the median of five such rounds moves by
several percent from one process to the next. So the confirmation goes on past ``rounds``,
up to ``max_rounds``, until the leader's figure is ``precise``: until the relative standard
error of its ratio to the anchor, estimated from the spread of the rounds' ratios (of its
own rounds where there is no anchor), is at most ``precision``, and its 90 % interval (below)
reaches no more than 5 % from it. A machine whose rounds scatter by about 1 % stops at
``rounds``; the rounds that picked the leader are not extended (they only pick it).

The ratio comes with its interval (``FinalFigures.ratio_interval``): a distribution-free
90 % confidence interval of the median of the rounds' ratios (``median_interval``), printed
and stored beside it. On a shared host the ratio itself moves with the load, not only its
reading: load does not slow two libraries alike (they share their work between the threads
differently, and lean on different parts of the core), so two timings minutes apart can
differ by more than any pairing of rounds cancels (``bench/RESULTS.md``). The interval says how
far apart the rounds of this timing were, and a ratio whose interval reaches more than
``RATIO_TOLERANCE`` (5 %) to either side is reported with a warning, rather than as a
figure a re-timing will reproduce.

``interleaved_rounds`` is the protocol apart from any process or clock (what the tests
drive); the measuring process (``runner_worker``) runs it on real kernels.
"""
from __future__ import annotations

import dataclasses
import math
import random
import statistics
import time
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from schedule.config import Config
from tuning_db.records import FINAL_TUNER

from .measure import MeasureInput, MeasureResult, Status
from .timing_protocol import SETTLE_S


@dataclass(frozen=True)
class FinalTimingOptions:
    """How the final timing measures: the ``pool`` fastest distinct configs of the run
    (None: three times ``candidates``) screened in ``screen_rounds`` rounds without the
    anchor when they are more than ``candidates``, whose fastest ``candidates`` are then timed
    in ``rounds`` interleaved rounds, each timing of at least ``min_time`` seconds and
    ``min_repeats`` cache-flushed repeats, ``pause`` seconds between rounds and ``settle``
    seconds between the anchor and the candidates; ``anchor`` False leaves the anchor out
    (the command line's ``--no-anchor``); ``confirm`` times the leader again before it wins,
    in ``rounds`` rounds and more, up to ``max_rounds`` (None: three times ``rounds``), until
    the relative standard error of its figure is at most ``precision`` and its interval reaches
    no more than ``RATIO_TOLERANCE`` from it (``precise``, the module docstring)."""

    candidates: int = 5
    rounds: int = 5
    min_time: float = 0.1
    min_repeats: int = 5
    max_repeats: int = 100
    pause: float = 0.2
    anchor: bool = True
    settle: float = SETTLE_S
    confirm: bool = True
    max_rounds: int | None = None
    precision: float = 0.015
    pool: int | None = None
    screen_rounds: int = 2

    def __post_init__(self):
        if not isinstance(self.candidates, int) or self.candidates < 0:
            raise ValueError(f"FinalTimingOptions.candidates must be an int >= 0, got {self.candidates!r}")
        if self.pool is not None and (not isinstance(self.pool, int) or self.pool < self.candidates):
            raise ValueError(f"FinalTimingOptions.pool must be an int >= candidates ({self.candidates}), "
                             f"got {self.pool!r}")
        if not isinstance(self.screen_rounds, int) or self.screen_rounds < 1:
            raise ValueError(f"FinalTimingOptions.screen_rounds must be an int >= 1, got {self.screen_rounds!r}")
        if not isinstance(self.rounds, int) or self.rounds < 1:
            raise ValueError(f"FinalTimingOptions.rounds must be an int >= 1, got {self.rounds!r}")
        if self.max_rounds is not None and (not isinstance(self.max_rounds, int) or self.max_rounds < self.rounds):
            raise ValueError(f"FinalTimingOptions.max_rounds must be an int >= rounds ({self.rounds}), "
                             f"got {self.max_rounds!r}")
        if not self.precision > 0:
            raise ValueError(f"FinalTimingOptions.precision must be > 0, got {self.precision!r}")

    @property
    def round_limit(self) -> int:
        """The most rounds one timing may take."""
        return 3 * self.rounds if self.max_rounds is None else self.max_rounds

    @property
    def pool_size(self) -> int:
        """How many of the search's fastest distinct configs the final timing considers."""
        return 3 * self.candidates if self.pool is None else self.pool

    def screening(self) -> "FinalTimingOptions":
        """These options for the screening rounds: ``screen_rounds`` of them, not extended,
        without the anchor."""
        return dataclasses.replace(self, rounds=self.screen_rounds, max_rounds=self.screen_rounds,
                                   anchor=False, confirm=False)


@dataclass
class InterleavedTimes:
    """Round medians (seconds) of each candidate and of the anchor, in the order of rounds;
    ``errors`` maps a candidate that failed in some round to why (it has no figure);
    ``where``: the machine that timed them (a ``TargetInfo``), when not the run's own."""

    candidates: list[list[float]]
    anchor: list[float] | None
    errors: dict[int, str] = field(default_factory=dict)
    where: object = None


def interleaved_rounds(n: int, time_candidate: Callable[[int], float], time_anchor: Callable[[], float] | None,
                       rounds: int, *, pause: float = 0.0, settle: float = 0.0,
                       sleep: Callable[[float], object] = time.sleep,
                       start_round: Callable[[int], object] = lambda round_: None,
                       max_rounds: int | None = None, precision: float | None = None) -> InterleavedTimes:
    """Time ``n`` candidates and the anchor in ``rounds`` rounds: even rounds run the anchor,
    then the candidates forward; odd rounds the candidates backward, then the anchor.
    Rounds are ``pause`` seconds apart, and the anchor is ``settle`` seconds away from the
    candidates on either side (one library's idle threads must not slow the other's).
    With ``precision``, rounds go on past ``rounds`` (up to ``max_rounds``) while the
    fastest candidate's figure is not ``precise`` to it.

    ``start_round(r)`` runs before round ``r`` (the measuring process places the arrays
    anew there). ``time_candidate(i)`` and ``time_anchor()`` return one round's median
    seconds; an exception from ``time_candidate(i)`` is that candidate's failure (it is
    not timed again).
    """
    times = InterleavedTimes([[] for _ in range(n)], [] if time_anchor is not None else None)
    limit = rounds if precision is None else max(rounds, max_rounds or rounds)
    for round_ in range(limit):
        if round_ >= rounds and precise(times, precision):
            break
        if round_:
            sleep(pause)
        start_round(round_)
        order: list[int | None] = [None, *range(n)] if round_ % 2 == 0 else [*range(n - 1, -1, -1), None]
        for i in order:
            if i is None:
                if time_anchor is not None:
                    if round_ % 2 == 1 and n and settle:
                        sleep(settle)
                    times.anchor.append(time_anchor())
                    if round_ % 2 == 0 and n and settle:
                        sleep(settle)
            elif i not in times.errors:
                try:
                    times.candidates[i].append(time_candidate(i))
                except Exception as exc:  # noqa: BLE001 - reported as this candidate's failure
                    times.errors[i] = str(exc) or type(exc).__name__
    return times


#: The standard error of a median of n samples from a normal distribution is this factor
#: times theirs over sqrt(n); 1.4826 times the median absolute deviation estimates that
#: standard deviation, unmoved by the odd round a burst of load spoils.
_MEDIAN_SE = 1.2533
_MAD_TO_SD = 1.4826


def until_precise(options: dict) -> dict:
    """``interleaved_rounds``' keywords for extending a timing, from ``vars(FinalTimingOptions)``
    (what a measuring process receives)."""
    limit = FinalTimingOptions(**options).round_limit
    return dict(max_rounds=limit, precision=options["precision"])


def relative_error(samples: list[float]) -> float:
    """The relative standard error of the median of ``samples`` (inf for fewer than 3)."""
    if len(samples) < 3:
        return float("inf")
    mid = statistics.median(samples)
    mad = statistics.median(abs(x - mid) for x in samples)
    return _MEDIAN_SE * _MAD_TO_SD * mad / mid / len(samples) ** 0.5 if mid > 0 else float("inf")


def fastest_in_rounds(times: InterleavedTimes, keep: int) -> list[int]:
    """The ``keep`` fastest candidates of ``times`` (indices, fastest first), each ranked by
    the median over rounds of its time over that round's median time across the candidates:
    all of a round's candidates share its stretch of load, so a round the machine ran slow
    in moves no candidate's rank. A candidate that failed is left out."""
    timed = [i for i, rounds in enumerate(times.candidates) if rounds and i not in times.errors]
    if not timed:
        return []
    scale = [statistics.median(times.candidates[i][r] for i in timed if len(times.candidates[i]) > r)
             for r in range(max(len(times.candidates[i]) for i in timed))]

    def relative(i: int) -> float:
        return statistics.median(t / scale[r] for r, t in enumerate(times.candidates[i]))

    return sorted(timed, key=relative)[:keep]


#: The confidence of the interval a final figure's ratio is given with.
RATIO_CONFIDENCE = 0.9
#: A ratio whose interval reaches further than this share of it to either side is reported
#: with a warning: a re-timing may differ by more than the 5 % a figure should hold to.
RATIO_TOLERANCE = 0.05


def median_interval(samples: list[float], confidence: float = RATIO_CONFIDENCE) -> tuple[float, float] | None:
    """A distribution-free confidence interval for the median that ``samples`` estimate:
    the k-th smallest and the k-th largest of them, k the largest for which the chance
    that fewer than k samples fall below the median (a binomial count with p = 1/2) is at
    most half of ``1 - confidence``. None when there are too few samples for that
    confidence (fewer than 5 at 90 %). It assumes nothing about the samples' distribution,
    so a round spoiled by a burst of load widens it by one rank only; it does assume the
    samples independent, and rounds that share a slow stretch of minutes make it narrower
    than the truth."""
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be between 0 and 1, got {confidence!r}")
    ordered = sorted(samples)
    n = len(ordered)
    tail, below, k = (1 - confidence) / 2, 0.0, 0
    while k < n // 2 and below + math.comb(n, k) / 2 ** n <= tail:
        below += math.comb(n, k) / 2 ** n
        k += 1
    return (ordered[k - 1], ordered[n - k]) if k else None


def interval_holds(samples: list[float]) -> bool | None:
    """Whether the ``median_interval`` of ``samples`` reaches no more than ``RATIO_TOLERANCE``
    of their median from it on either side; None when there are too few for an interval."""
    interval = median_interval(samples)
    if interval is None:
        return None
    middle = statistics.median(samples)
    return max(middle - interval[0], interval[1] - middle) <= RATIO_TOLERANCE * middle


def precise(times: InterleavedTimes, precision: float) -> bool:
    """Whether the fastest timed candidate's figure (its ratio to the anchor, ``paired_ratio``;
    its own median without an anchor) has a relative standard error of at most ``precision``
    and, once there are rounds enough for one, a ``median_interval`` that reaches no more than
    ``RATIO_TOLERANCE`` of the figure to either side; True when no candidate has rounds left
    to time. The interval guards the error estimate: the median absolute deviation of five
    rounds of which three agree is nil however wild the other two are, and the timing would
    stop with an interval the report must then warn about."""
    timed = [i for i, rounds in enumerate(times.candidates) if rounds and i not in times.errors]
    if not timed:
        return True
    leader = min(timed, key=lambda i: statistics.median(times.candidates[i]))
    samples = (round_ratios(times.candidates[leader], times.anchor) if times.anchor
               else times.candidates[leader])
    return relative_error(samples) <= precision and interval_holds(samples) is not False


def round_ratios(candidate_rounds: list[float], anchor_rounds: list[float]) -> list[float]:
    """The candidate's speed over the anchor's in each round both were timed in (the anchor's
    time over the candidate's), in the order of the rounds."""
    return [a / c for c, a in zip(candidate_rounds, anchor_rounds) if c > 0 and a > 0]


def paired_ratio(candidate_rounds: list[float], anchor_rounds: list[float] | None) -> float | None:
    """The candidate's speed over the anchor's: the median over rounds of each round's ratio
    (``round_ratios``), so that a stretch of load that slows both in some rounds moves
    neither side of any ratio; None without rounds of both."""
    ratios = round_ratios(candidate_rounds, anchor_rounds or [])
    return statistics.median(ratios) if ratios else None


#: Allocators hand out blocks at 16-byte boundaries; a page holds 256 such starts.
PLACEMENT_GRANULE = 16
PAGE_BYTES = 4096


def placed_copies(arrays: list[np.ndarray], rng: random.Random) -> list[np.ndarray]:
    """Copies of ``arrays``, each starting at a random 16-byte boundary within a page (as
    an allocator may place a user's arrays), C-contiguous, with the same contents."""
    placed = []
    for arr in arrays:
        buf = np.empty(arr.nbytes + 2 * PAGE_BYTES, dtype=np.uint8)
        start = (-buf.ctypes.data) % PAGE_BYTES + PLACEMENT_GRANULE * rng.randrange(PAGE_BYTES // PLACEMENT_GRANULE)
        copy = buf[start:start + arr.nbytes].view(arr.dtype).reshape(arr.shape)
        copy[...] = arr
        placed.append(copy)
    return placed


@dataclass
class FinalFigures:
    """The final timing of a run: its candidates (fastest first by their search figure),
    each one's round medians when all were timed together (``round_costs``, with the
    anchor's: ``anchor_rounds``), and for the candidates timed again before they could win
    (``confirmed``), their rounds and the anchor's of that confirmation. A candidate's
    figure is the median of its confirmation if it has one, else of its first rounds."""

    configs: list[Config]
    search_costs: list[float]
    round_costs: list[list[float]]
    errors: dict[int, str]
    anchor_name: str | None
    anchor_rounds: list[float] | None
    flops: int
    screened: int = 0  # how many configs the screening rounds chose these from (0: no screening)
    run_id: int | None = None
    where: object = None  # the machine that timed them (a TargetInfo), when not the run's own
    #: candidate -> (its round medians, the anchor's) when it was timed again as the leader
    confirmed: dict[int, tuple[list[float], list[float] | None]] = field(default_factory=dict)

    def rounds_of(self, i: int) -> list[float]:
        """The round medians behind candidate ``i``'s figure."""
        return list(self.confirmed[i][0]) if i in self.confirmed else list(self.round_costs[i])

    def anchor_rounds_of(self, i: int) -> list[float] | None:
        """The anchor's round medians timed beside candidate ``i``'s figure."""
        return self.confirmed[i][1] if i in self.confirmed else self.anchor_rounds

    def result(self, i: int) -> MeasureResult:
        """Candidate ``i``'s final timing as a trial's result: the round medians behind its
        figure as the costs (so its median is the figure), or its failure."""
        if i in self.errors:
            return MeasureResult(_failure_status(self.errors[i]), error=self.errors[i], where=self.where)
        rounds = self.rounds_of(i)
        return MeasureResult(Status.OK, costs=rounds, rounds=len(rounds), where=self.where)

    @property
    def costs(self) -> list[float | None]:
        return [self.result(i).median_s for i in range(len(self.configs))]

    @property
    def winner(self) -> int | None:
        timed = [(c, i) for i, c in enumerate(self.costs) if c is not None]
        return min(timed)[1] if timed else None

    @property
    def winner_anchor_rounds(self) -> list[float] | None:
        """The anchor's round medians timed beside the winner's figure (its ratio pairs them)."""
        return self.anchor_rounds if self.winner is None else self.anchor_rounds_of(self.winner)

    @property
    def anchor_cost(self) -> float | None:
        """The anchor's time beside the winner's figure, as the winner's ratio implies it (its
        figure times its ratio: ``ratio`` is paired round by round), so that the figures a
        run reports divide to its ratio; the anchor's median when there is no winner."""
        winner = self.winner
        ratio = None if winner is None else self.ratio(winner)
        if ratio is not None:
            return self.costs[winner] * ratio
        rounds = self.winner_anchor_rounds
        return statistics.median(rounds) if rounds else None

    @property
    def anchor_gflops(self) -> float | None:
        return self.flops / self.anchor_cost / 1e9 if self.anchor_cost else None

    def gflops(self, i: int) -> float | None:
        cost = self.costs[i]
        return self.flops / cost / 1e9 if cost else None

    def ratio(self, i: int) -> float | None:
        """Candidate ``i``'s speed over the anchor's in the rounds behind its figure, paired
        round by round (``paired_ratio``); None if it failed or there is no anchor."""
        return None if i in self.errors else paired_ratio(self.rounds_of(i), self.anchor_rounds_of(i))

    def ratio_interval(self, i: int, confidence: float = RATIO_CONFIDENCE) -> tuple[float, float] | None:
        """The ``confidence`` interval of candidate ``i``'s ratio (``median_interval`` of its
        rounds' ratios): where a re-timing of the two is expected to land. None without
        enough rounds of both, or if it failed."""
        return median_interval(self._round_ratios(i), confidence)

    def ratio_uncertain(self, i: int) -> bool:
        """Whether candidate ``i``'s ratio interval reaches more than ``RATIO_TOLERANCE`` of
        its ratio to either side (or there is none): its figure may not be reproducible
        within that tolerance."""
        ratios = self._round_ratios(i)
        return bool(ratios) and interval_holds(ratios) is not True

    def _round_ratios(self, i: int) -> list[float]:
        """Candidate ``i``'s ratio in each round behind its figure (none if it failed)."""
        return [] if i in self.errors else round_ratios(self.rounds_of(i), self.anchor_rounds_of(i) or [])


def pick_candidates(history, n: int) -> list[tuple[Config, float]]:
    """The ``n`` fastest distinct configs among the ok trials of ``history`` (config, search cost)."""
    best: dict[str, tuple[Config, float]] = {}
    for trial in history:
        if trial.result.ok:
            known = best.get(trial.config.hash)
            if known is None or trial.result.cost < known[1]:
                best[trial.config.hash] = (trial.config, trial.result.cost)
    return sorted(best.values(), key=lambda item: item[1])[:n]


def final_timing(task, builder, runner, candidates: list[tuple[Config, float]],
                 options: FinalTimingOptions) -> FinalFigures:
    """Build ``candidates`` (the pool, fastest first) again (the compile cache makes that
    cheap), screen them when they are more than ``options.candidates``, and time the fastest
    with the anchor in the measuring process (``runner.time_final``). A build or a screening
    round that fails now is that candidate's error; the figures list the candidates timed
    with the anchor and those that failed. Raises NotImplementedError when the runner has no
    final timing."""
    builds = builder.build([MeasureInput(task, c) for c, _ in candidates])
    errors = {i: f"{b.status.value}: {b.error}" for i, b in enumerate(builds) if b.status != Status.OK}
    ok = [i for i in range(len(builds)) if i not in errors]
    screened = 0
    if len(ok) > options.candidates:
        screening = runner.time_final(task, [builds[i] for i in ok], options.screening())
        errors.update({ok[slot]: message for slot, message in screening.errors.items()})
        kept = {ok[slot] for slot in fastest_in_rounds(screening, options.candidates)}
        screened, ok = len(ok), [i for i in ok if i in kept]
        # From here on the figures list the kept candidates and the failed ones, in search order.
        listed = sorted(set(ok) | set(errors))
        position = {i: n for n, i in enumerate(listed)}
        candidates, builds = [candidates[i] for i in listed], [builds[i] for i in listed]
        errors = {position[i]: message for i, message in errors.items()}
        ok = [position[i] for i in ok]
    # With a confirmation to follow, these rounds only pick the leader: no more than ``rounds``.
    picking = dataclasses.replace(options, max_rounds=options.rounds) if options.confirm else options
    times = runner.time_final(task, [builds[i] for i in ok], picking)
    round_costs: list[list[float]] = [[] for _ in candidates]
    for slot, i in enumerate(ok):
        round_costs[i] = times.candidates[slot]
        if slot in times.errors:
            errors[i] = times.errors[slot]
    figures = FinalFigures([c for c, _ in candidates], [cost for _, cost in candidates], round_costs, errors,
                           _anchor_name(task, times), times.anchor, task.flops, screened=screened, where=times.where)
    if options.confirm:
        try:
            confirm_leader(figures, lambda group: runner.time_final(task, [builds[i] for i in group], options))
        except RuntimeError:  # the measuring machine went away: the figures so far stand, unconfirmed
            pass
    return figures


def confirm_leader(figures: FinalFigures, time_again: Callable[[list[int]], InterleavedTimes]) -> None:
    """Time the leader again (``time_again(group)``: the candidates of ``group`` and the anchor,
    interleaved, in that order) until a confirmed candidate leads: each confirmation replaces
    the candidate's figure (a failure now is its failure); each candidate is confirmed at most
    once. The first confirmation is the leader's alone; when it no longer leads, the unconfirmed
    candidates whose figures beat the best confirmed one are confirmed together."""
    while True:
        leader = figures.winner
        if leader is None or leader in figures.confirmed:
            return
        costs = figures.costs
        best_confirmed = min((costs[i] for i in figures.confirmed if costs[i] is not None), default=None)
        group = [leader] if best_confirmed is None else [
            i for i, c in enumerate(costs) if c is not None and i not in figures.confirmed and c < best_confirmed]
        again = time_again(group)
        for slot, i in enumerate(group):
            if slot in again.errors:
                figures.errors[i] = again.errors[slot]
            else:
                figures.confirmed[i] = (list(again.candidates[slot]), again.anchor)


def _anchor_name(task, times: InterleavedTimes) -> str | None:
    """The anchor's name when it was timed (the target kind's anchor), else None."""
    if times.anchor is None:
        return None
    from . import targets

    return targets.parts_for(task.target).anchor.label(task)


def _failure_status(error: str) -> Status:
    """The status a final timing's failure message starts with ("wrong_answer: ..."; builds
    fail as "compile_error: ..."), else runtime_error."""
    word = error.split(":", 1)[0]
    return Status(word) if word in {s.value for s in Status} - {Status.OK.value} else Status.RUNTIME_ERROR


def store_final(db, task, target, figures: FinalFigures, tool_version: str) -> int:
    """Store ``figures`` as a run of tuner ``FINAL_TUNER``: one record per candidate
    (``FinalFigures.result``), the anchor's GFLOP/s and the interval of the winner's ratio
    to it on the run. Returns the run's id."""
    from .loop import Trial
    from .tuning import record_of

    run_id = db.start_run(task.key, task.workload_name, task.params, target, FINAL_TUNER, None, len(figures.configs),
                          tool_version, dag_json=task.dag_json, dag_hash=task.workload.dag_hash,
                          anchor_gflops=figures.anchor_gflops,
                          ratio_interval=None if figures.winner is None else figures.ratio_interval(figures.winner))
    db.add_records(run_id, [record_of(task, target, Trial(i, config, figures.result(i)), tool_version)
                            for i, config in enumerate(figures.configs)])
    db.finish_run(run_id, "finished")
    figures.run_id = run_id
    return run_id

