"""The runner: times built candidates in a separate process, one status per trial.

``LocalRunner`` keeps one measuring process (``runner_worker.serve``) per task. A
candidate that kills it (a segfault) is recorded as ``runtime_error`` with the signal,
one that exceeds the timeout as ``timeout`` (the process is killed); either way a new
process takes over for the next candidate, so one bad kernel costs one trial.
Candidates run one after another with nothing else measuring: timings stay quiet.

Rounds. On a shared machine a neighbour can slow a kernel down for a few hundred
milliseconds at a time (no steal time shows; the cores' caches and memory bandwidth
are shared), which is longer than one candidate's measurement: every repeat of that
window is slow, and no statistic over it recovers. Such noise only ever slows a kernel
down, so the batch can be measured in ``TimingOptions.rounds`` passes, alternately
forward and backward, seconds apart, and each candidate keeps its fastest round (the
round with the lowest median). Only candidates within ``recheck_within`` of the best
known cost get the later rounds: a kernel 3x slower than the best ranks the same either
way. From the third round on, a candidate whose rounds so far agree (within
``settled_within``) is not measured again. A failure in a later round (a wrong answer
from a racy kernel, a crash) is the candidate's result: it was not reliable.

The default is one round. Late in a run nearly every candidate is within a few per cent
of the best, and there two measurements of the same configs order only 0.5-0.65 of the
pairs alike whatever the protocol: one round, three, or the final timing's five
interleaved rounds. Three rounds cost over twice the measuring time and did not pick
faster configs; the final timing (``autotune.final_timing``) re-times the leaders, so
the figure a run reports does not rest on them. Three rounds remain for a machine whose
neighbours are loud. Both sides of that choice are measured in ``bench/RESULTS.md``
("Measuring rounds").
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from multiprocessing.connection import Connection

from .measure import BuildResult, MeasureResult, Runner, Status
from .timing_protocol import quiet_threads_env


@dataclass
class TimingOptions:
    """How long to measure each candidate (see runner_worker for the protocol).

    ``min_time``, ``min_repeats`` and ``max_repeats`` are per round; ``rounds`` passes
    over the batch (one by default: see the module docstring), the later ones only for
    candidates within ``recheck_within`` times the best cost, and from the third on only
    for those whose rounds so far differ by more than ``settled_within`` (two rounds that
    agree leave a third nothing to correct); ``slow_factor``: a candidate whose first
    call is that much slower than the best stops after it.
    """

    min_time: float = 0.035
    min_repeats: int = 3
    max_repeats: int = 20
    slow_factor: float = 3.0
    rounds: int = 1
    recheck_within: float = 2.0
    settled_within: float = 0.03

    def __post_init__(self):
        if not isinstance(self.rounds, int) or self.rounds < 1:
            raise ValueError(f"TimingOptions.rounds must be an int >= 1, got {self.rounds!r}")
        if self.recheck_within < 1.0:
            raise ValueError(f"TimingOptions.recheck_within must be >= 1, got {self.recheck_within!r}")
        if self.settled_within < 0.0:
            raise ValueError(f"TimingOptions.settled_within must be >= 0, got {self.settled_within!r}")


class LocalRunner(Runner):
    """Runs candidates of one task at a time in a child process, with a per-candidate timeout.

    The measuring process loads shared objects: this is the runner of the CPU kinds
    (``autotune.targets``). ``run`` first asks the target's parts whether it can be
    measured here and raises ``targets.MeasureUnavailable`` with the reason if not.
    """

    #: The module the measuring process runs (``python -m``): a runner of another device
    #: speaks the same protocol through its own (``runner_cuda``).
    worker_module = "autotune.runner_worker"

    def __init__(self, timeout: float = 10.0, options: TimingOptions | None = None, seed: int = 0,
                 setup_timeout: float = 300.0):
        self.timeout = timeout
        self.options = options or TimingOptions()
        self.seed = seed
        self.setup_timeout = setup_timeout
        self._proc: subprocess.Popen | None = None
        self._send: Connection | None = None
        self._conn: Connection | None = None
        self._task_key = None

    # ------------------------------------------------------------ worker lifecycle

    def _start(self, task) -> None:
        """Start ``python -m <worker_module>`` with two pipes for messages.

        A fresh interpreter (not fork) keeps the worker free of the tuner's threads and
        OpenMP state, and unlike multiprocessing's spawn it never re-imports the
        user's main script. The worker dies with this process (``backends.process.
        die_with_parent``; on Linux, with the thread that starts it), even when this
        process is killed with SIGKILL and cannot stop it.
        """
        to_child_r, to_child_w = os.pipe()
        to_parent_r, to_parent_w = os.pipe()
        package_root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        env = quiet_threads_env(dict(os.environ))
        env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH")) if p)
        proc = subprocess.Popen(
            [sys.executable, "-m", self.worker_module, str(to_child_r), str(to_parent_w), str(os.getpid())],
            pass_fds=(to_child_r, to_parent_w), env=env, stdin=subprocess.DEVNULL,
        )
        os.close(to_child_r)
        os.close(to_parent_w)
        self._proc = proc
        self._send = Connection(to_child_w, readable=False)
        self._conn = Connection(to_parent_r, writable=False)
        try:
            self._send.send(("setup", task.dag_json, self.seed))  # the DAG itself: see runner_worker
            status, payload = self._wait(self.setup_timeout)
        except BaseException:  # an interrupt during the set-up: stop the worker too
            self.close()
            raise
        if status != "ready":
            self.close()
            raise RuntimeError(f"the measuring process failed to set up {task.key}: {payload}")
        self._task_key = task.key

    def _ensure(self, task) -> None:
        if self._proc is None or self._proc.poll() is not None or self._task_key != task.key:
            self.close()
            self._start(task)

    def close(self) -> None:
        """Stop the measuring process: asked to exit, killed if it has not within 2 s or if
        the wait is interrupted (Ctrl-C), so that no path leaves it running."""
        proc = self._proc
        try:
            if proc is not None and proc.poll() is None:
                try:
                    self._send.send(("exit",))
                    proc.wait(timeout=2)
                except (OSError, subprocess.TimeoutExpired):
                    pass
        finally:
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait()
            for conn in (self._send, self._conn):
                if conn is not None:
                    conn.close()
            self._proc = self._send = self._conn = self._task_key = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # ------------------------------------------------------------ measuring

    def run(self, task, builds: list[BuildResult], best_cost: float | None = None) -> list[MeasureResult]:
        """One MeasureResult per build, in order; builds that failed pass their status through.

        ``best_cost`` (seconds, the best measured before this batch) lets hopeless
        candidates stop early and picks who gets the later rounds.
        """
        from .targets import require_measurable

        require_measurable(task.target)

        def measure(i: int, best: float | None) -> MeasureResult:
            build = builds[i]
            if build.status != Status.OK:
                return MeasureResult(build.status, error=build.error, build_s=build.build_s)
            return self._run_one(task, build, best)

        return measure_in_rounds(len(builds), measure, self.options, best_cost)

    def _run_one(self, task, build: BuildResult, best_cost: float | None) -> MeasureResult:
        options = dict(vars(self.options), best_cost=best_cost)
        t0 = time.perf_counter()
        self._ensure(task)
        self._send.send(("run", build.artifact, "kernel", options))
        status, payload = self._reply(self.timeout)
        run_s = time.perf_counter() - t0
        if status == Status.OK:
            return MeasureResult(Status.OK, costs=list(payload), build_s=build.build_s, run_s=run_s)
        return MeasureResult(status, error=payload, build_s=build.build_s, run_s=run_s)

    def _reply(self, timeout: float):
        """The worker's (status, payload) for the message sent (``_wait``). A worker that
        found its device unusable says it is leaving (a third element, "exiting"): it is
        stopped here, so the next message goes to a new one."""
        status, payload, *leaving = self._wait(timeout)
        if leaving:
            self.close()
        return status, payload

    def time_final(self, task, builds: list[BuildResult], options):
        """The final timing in the measuring process (``runner_worker``'s "final" message);
        a crash or hang of it raises RuntimeError: the kernels all measured ok before."""
        from .targets import require_measurable

        require_measurable(task.target)
        self._ensure(task)
        self._send.send(("final", [b.artifact for b in builds], "kernel", vars(options)))
        status, payload = self._reply(self.timeout * (len(builds) + 1) * options.round_limit + self.setup_timeout)
        if status != Status.OK:
            raise RuntimeError(f"the final timing failed: {payload}")
        return payload

    def _wait(self, timeout: float):
        """The worker's reply, or a status for a crash or a hang (the worker is then stopped)."""
        deadline = time.monotonic() + timeout
        while True:
            if self._conn.poll(0.05):
                try:
                    return self._conn.recv()
                except (EOFError, OSError):
                    return self._crashed()
            if self._proc.poll() is not None:
                return self._crashed()
            if time.monotonic() > deadline:
                self._proc.kill()
                self._proc.wait()
                self.close()
                return Status.TIMEOUT, f"no result within {timeout:g} s; the measuring process was killed"

    def _crashed(self):
        try:
            code = self._proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            code = self._proc.wait()
        self.close()
        if code < 0:
            try:
                name = signal.Signals(-code).name
            except ValueError:
                name = f"signal {-code}"
            return Status.RUNTIME_ERROR, f"the kernel crashed the measuring process ({name})"
        return Status.RUNTIME_ERROR, f"the measuring process exited with code {code}"


def measure_in_rounds(count: int, measure, options: TimingOptions,
                      best_cost: float | None = None) -> list[MeasureResult]:
    """The rounds rule (see the module docstring), apart from any process or clock.

    ``measure(i, best_cost)`` measures candidate ``i`` once and returns its
    MeasureResult. The first round measures every candidate in order; each later
    round runs backward, then forward, over the candidates still ok and within
    ``options.recheck_within`` of the best cost so far (from the third round on, only
    those whose rounds differ by more than ``options.settled_within``), and keeps each
    one's faster round (a failure in a later round wins).
    """
    results = []
    for i in range(count):
        result = measure(i, best_cost)
        if result.ok and (best_cost is None or result.cost < best_cost):
            best_cost = result.cost
        results.append(result)
    if best_cost is None:
        return results  # nothing measured ok: nothing to measure again
    slowest = [r.cost for r in results]  # each candidate's slowest ok round (its fastest is its cost)
    for round_ in range(1, options.rounds):
        best_cost = min([best_cost] + [r.cost for r in results if r.ok])
        indices = range(count) if round_ % 2 == 0 else range(count - 1, -1, -1)
        for i in indices:
            first = results[i]
            if not first.ok or first.cost > options.recheck_within * best_cost:
                continue
            if round_ >= 2 and slowest[i] <= (1.0 + options.settled_within) * first.cost:
                continue  # its rounds agree: another one would not change its figure
            again = measure(i, best_cost)
            if again.ok:
                slowest[i] = max(slowest[i], again.cost)
            results[i] = keep_faster_round(first, again)
    return results


def keep_faster_round(kept: MeasureResult, again: MeasureResult) -> MeasureResult:
    """Merge a later round into a candidate's result: the faster round's repeats, both
    rounds' run time; a failure in the later round replaces the result."""
    merged = dict(build_s=kept.build_s, run_s=kept.run_s + again.run_s, timestamp=kept.timestamp, where=kept.where,
                  rounds=kept.rounds + 1)
    if not again.ok:
        return MeasureResult(again.status, error=f"in a later measuring round (an earlier one succeeded): "
                                                 f"{again.error}", **merged)
    return MeasureResult(Status.OK, costs=min(kept, again, key=lambda r: r.cost).costs, **merged)
