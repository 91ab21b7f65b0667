"""What a replay of several tuners over many seeds shows: curves, a table, JSON and a plot.

    report = autotune.replay(recording, ["xgb", "ga"], seeds=20, trials=1000)
    report.summary()                # per tuner: trials and seconds to 0.9x / 0.95x / 1.0x
    report.trial_curves()           # best-so-far over seeds per trial: median, p25, p75, min, max
    report.time_curves()            # the same against simulated seconds
    report.to_json(); report.plot("strategies.svg")

Quality is *relative performance*: the recorded optimum's cost over the best cost
found so far (1.0 = the recorded optimum; 0 until a trial succeeded), so "0.9x" means
within 1/0.9 of the fastest recorded time. A run that ended early (space or misses
exhausted) keeps its last value in the curves. "Trials to 0.9x" over seeds is the
lower median with a run that never got there counted as never (so the median itself
is "never" when more than half the runs did not get there), beside how many got there.

Over the recorded configs alone (``restrict``), random search needs no replay: it draws
the recorded configs uniformly without repeats, so its trials to a fraction follow
from how many recorded configs reach it (``random_trials_percentiles``). Twenty sampled
random runs scatter around those exact figures; a comparison with random reads both.
"""
from __future__ import annotations

import bisect
import math
import statistics
from dataclasses import dataclass, field
from pathlib import Path

#: The fractions of the recorded optimum the summary reports time to.
FRACTIONS = (0.9, 0.95, 1.0)
PLOT_FORMATS = ("png", "svg")
#: The percentiles over seeds ``trials_percentiles`` reports by default.
PERCENTS = (25, 50, 75)


@dataclass
class ReplayReport:
    """Replayed runs per tuner against one recording (``autotune.replaying.replay`` makes it)."""

    workload_key: str
    target: str
    recorded: int            # configs in the recording
    recorded_ok: int
    optimum_s: float         # the fastest recorded cost
    trials: int              # the budget of every run
    miss: str
    runs: dict = field(default_factory=dict)   # tuner -> [ReplayRun], one per seed
    restrict: bool = False   # searched the recorded configs only
    left_out: int = 0        # records outside the current space or rejected by its rules
    costs: tuple = ()        # every recorded config's cost (inf: failed), for exact random figures

    @classmethod
    def from_runs(cls, recording, runs: dict, *, trials: int, miss: str, restrict: bool = False) -> "ReplayReport":
        costs = tuple(t.cost for t in recording.trials.values())
        return cls(recording.task.key, recording.task.target_kind, len(recording), recording.n_ok,
                   recording.optimum_s, trials, miss, runs, restrict, recording.unusable, costs)

    # ------------------------------------------------------------ per run

    def relative(self, cost: float) -> float:
        """The recorded optimum's cost over ``cost`` (0 for a failure or nothing yet)."""
        return self.optimum_s / cost if math.isfinite(cost) and cost > 0 else 0.0

    def _trial_curve(self, run, length: int) -> list[float]:
        curve = [self.relative(c) for c in run.best_so_far()]
        return curve + [curve[-1] if curve else 0.0] * (length - len(curve))

    def _time_curve(self, run, grid: list[float]) -> list[float]:
        elapsed, best = run.elapsed(), run.best_so_far()
        out = []
        for t in grid:
            done = bisect.bisect_right(elapsed, t)
            out.append(self.relative(best[done - 1]) if done else 0.0)
        return out

    # ------------------------------------------------------------ over seeds

    def trial_curves(self) -> dict:
        """{tuner: {"median", "p25", "p75", "min", "max": [one value per trial]}}."""
        length = max((len(r.costs) for runs in self.runs.values() for r in runs), default=0)
        return {tuner: _spread([self._trial_curve(r, length) for r in runs]) for tuner, runs in self.runs.items()}

    def time_grid(self, points: int = 200) -> list[float]:
        """Simulated seconds from 0 to the longest run's end, ``points`` steps."""
        end = max((r.elapsed()[-1] for runs in self.runs.values() for r in runs if r.seconds), default=0.0)
        return [end * n / (points - 1) for n in range(points)] if end > 0 else [0.0]

    def time_curves(self, points: int = 200) -> dict:
        """{"seconds": the grid, tuner: {"median", "p25", ...: [one value per grid point]}}."""
        grid = self.time_grid(points)
        out: dict = {"seconds": grid}
        for tuner, runs in self.runs.items():
            out[tuner] = _spread([self._time_curve(r, grid) for r in runs])
        return out

    def summary(self) -> list[dict]:
        """One row per tuner: seeds, median final relative performance, and per fraction of
        ``FRACTIONS`` the median trials and simulated seconds to reach it and how many runs did."""
        rows = []
        for tuner, runs in self.runs.items():
            row = {"tuner": tuner, "seeds": len(runs),
                   "final": statistics.median(self.relative(min(r.costs, default=math.inf)) for r in runs),
                   "misses": statistics.median(r.misses for r in runs),
                   "model_s": sum(r.model_s for r in runs), "search_s": sum(r.search_s for r in runs)}
            for f in FRACTIONS:
                target = self.optimum_s / f
                row[f"trials_{f:g}"] = _median_or_none([r.trials_to(target) for r in runs])
                row[f"seconds_{f:g}"] = _median_or_none([r.seconds_to(target) for r in runs])
                row[f"reached_{f:g}"] = sum(r.trials_to(target) is not None for r in runs)
            rows.append(row)
        return rows

    def trials_percentiles(self, fraction: float, percents=PERCENTS) -> dict[str, list[int | None]]:
        """{tuner: trials to ``fraction`` of the recorded optimum at each of ``percents``
        over seeds} (nearest rank, lower; a run that never got there counts as never, so a
        percentile is None when more runs than it allows never got there)."""
        target = self.optimum_s / fraction
        return {tuner: [_percentile_or_none([r.trials_to(target) for r in runs], p) for p in percents]
                for tuner, runs in self.runs.items()}

    def random_trials_percentiles(self, fraction: float, percents=PERCENTS) -> list[int | None]:
        """Trials random search needs to ``fraction`` of the recorded optimum at each of
        ``percents``, exactly: the first trial count whose chance of having drawn one of
        the k configs that reach it, among the n recorded (uniformly, no repeats), is at
        least the percentile: 1 - C(n-k, t) / C(n, t). None beyond the trial budget.
        Only a replay over the recorded configs (``restrict``) draws that way."""
        if not self.restrict:
            raise ValueError("exact random figures hold for a replay over the recorded configs only (restrict)")
        target = self.optimum_s / fraction
        return exact_random_percentiles(len(self.costs), sum(c <= target for c in self.costs),
                                        percents, self.trials)

    def table(self) -> list[str]:
        """The summary as text lines (a header, one line per tuner)."""
        headers = ["tuner", "seeds", "final"]
        for f in FRACTIONS:
            headers += [f"trials to {f:g}x", f"sim s to {f:g}x", "reached"]
        headers += ["misses", "model s", "search s"]
        lines = []
        for row in self.summary():
            cells = [row["tuner"], str(row["seeds"]), f"{row['final']:.3f}"]
            for f in FRACTIONS:
                cells += [_num(row[f"trials_{f:g}"]), _num(row[f"seconds_{f:g}"]),
                          f"{row[f'reached_{f:g}']}/{row['seeds']}"]
            cells += [_num(row["misses"]), _num(row["model_s"]), _num(row["search_s"])]
            lines.append(cells)
        widths = [max([len(h)] + [len(c[n]) for c in lines]) for n, h in enumerate(headers)]

        def fmt(cells: list[str]) -> str:  # the tuner left-aligned, numbers right-aligned
            return "  ".join(c.rjust(w) if n else c.ljust(w) for n, (c, w) in enumerate(zip(cells, widths)))

        return [fmt(headers).rstrip()] + [fmt(c).rstrip() for c in lines]

    def header(self) -> str:
        return (f"replay of {self.workload_key} on {self.target}: {self.recorded} recorded configs "
                f"({self.recorded_ok} ok{self._left_out_note()}), optimum {self.optimum_s * 1e3:.4g} ms, "
                f"{self.trials} trials per run, "
                + ("searching the recorded configs only" if self.restrict else f"misses {self.miss}"))

    def _left_out_note(self) -> str:
        return f"; {self.left_out} records outside the current space left out" if self.left_out else ""

    def to_json(self, points: int = 200) -> dict:
        """Everything above plus each run's trials, as plain JSON values (inf as null)."""
        return _finite({
            "workload": self.workload_key, "target": self.target, "recorded": self.recorded,
            "recorded_ok": self.recorded_ok, "left_out": self.left_out, "optimum_s": self.optimum_s, "trials": self.trials,
            "miss": self.miss, "restrict": self.restrict, "fractions": list(FRACTIONS), "summary": self.summary(),
            "trial_curves": self.trial_curves(), "time_curves": self.time_curves(points),
            "runs": [{"tuner": r.tuner, "seed": r.seed, "stopped": r.stopped, "misses": r.misses,
                      "model_s": r.model_s, "search_s": r.search_s, "costs": r.costs, "seconds": r.seconds}
                     for runs in self.runs.values() for r in runs],
        })

    # ------------------------------------------------------------ the plot

    def plot(self, path: str | Path) -> None:
        """Best-so-far relative performance (median line, p25-p75 band, one colour per tuner)
        against trials and against simulated seconds; PNG or SVG by ``path``'s suffix."""
        fmt = Path(path).suffix.lower().lstrip(".")
        if fmt not in PLOT_FORMATS:
            raise ValueError(f"cannot tell the plot format of {str(path)!r}: end it in .png or .svg")
        import matplotlib

        matplotlib.use("Agg")
        from matplotlib import pyplot as plt

        fig, (by_trial, by_time) = plt.subplots(1, 2, figsize=(12, 4.5), dpi=100)
        trial_curves, time_curves = self.trial_curves(), self.time_curves()
        for n, tuner in enumerate(self.runs):
            colour = f"C{n % 10}"
            curve = trial_curves[tuner]
            xs = list(range(1, len(curve["median"]) + 1))
            _band(by_trial, xs, curve, colour, tuner)
            _band(by_time, time_curves["seconds"], time_curves[tuner], colour, tuner)
        by_trial.set_xlabel("trials")
        by_time.set_xlabel("simulated seconds (recorded build + run)")
        for ax in (by_trial, by_time):
            ax.set_ylabel("best / recorded optimum")
            ax.set_ylim(0, 1.05)
            ax.grid(alpha=0.3)
            ax.legend(loc="lower right")
        fig.suptitle(f"{self.workload_key} on {self.target}: median and p25-p75 over seeds", fontsize=9)
        fig.tight_layout()
        try:
            fig.savefig(path, format=fmt)
        finally:
            plt.close(fig)


def _band(ax, xs, curve: dict, colour: str, label: str) -> None:
    if not xs:
        return
    ax.step(xs, curve["median"], where="post", color=colour, label=label)
    ax.fill_between(xs, curve["p25"], curve["p75"], step="post", color=colour, alpha=0.2, linewidth=0)


def exact_random_percentiles(n: int, k: int, percents=PERCENTS, budget: int | None = None) -> list[int | None]:
    """For draws without repeats from ``n`` items of which ``k`` are good: per percent p,
    the fewest draws t whose chance of holding a good one, 1 - C(n-k, t) / C(n, t), is
    at least p/100 (None when that exceeds ``budget`` or nothing is good)."""
    if not 0 <= k <= n:
        raise ValueError(f"need 0 <= k <= n, got k={k}, n={n}")
    wanted = sorted((p / 100, i) for i, p in enumerate(percents))
    out: list[int | None] = [None] * len(wanted)
    if k == 0:
        return out
    none_good, t, w = 1.0, 0, 0  # none_good: chance that the first t draws hold no good item
    limit = n if budget is None else min(n, budget)
    while w < len(wanted) and t < limit:
        none_good *= (n - k - t) / (n - t)
        t += 1
        while w < len(wanted) and 1.0 - none_good >= wanted[w][0] - 1e-12:
            out[wanted[w][1]] = t
            w += 1
    return out


def _spread(curves: list[list[float]]) -> dict:
    """Per position over ``curves`` (of equal length): median, quartiles, min and max."""
    columns = list(zip(*curves))
    return {"median": [statistics.median(c) for c in columns],
            "p25": [_quantile(c, 0.25) for c in columns], "p75": [_quantile(c, 0.75) for c in columns],
            "min": [min(c) for c in columns], "max": [max(c) for c in columns]}


def _quantile(values, q: float) -> float:
    """Linear-interpolated quantile (numpy's default) of a non-empty sequence."""
    ordered = sorted(values)
    pos = q * (len(ordered) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def _percentile_or_none(values: list, percent: float) -> float | None:
    """The lower nearest-rank percentile with None as "never"; None when it is never
    (``percent=50`` is ``_median_or_none``)."""
    if not values:
        return None
    ranked = sorted(math.inf if v is None else v for v in values)
    value = ranked[int(percent / 100 * (len(ranked) - 1))]
    return None if math.isinf(value) else value


def _median_or_none(values: list) -> float | None:
    """Median with None as "never" (larger than anything); None when the median is never."""
    if not values:
        return None
    median = statistics.median_low([math.inf if v is None else v for v in values])
    return None if math.isinf(median) else median


def _num(value) -> str:
    if value is None:
        return "never"
    if isinstance(value, int) or float(value).is_integer():
        return str(int(value))
    return f"{value:.3g}"


def _finite(value):
    """``value`` with inf/nan floats as None (JSON has no infinity)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value
