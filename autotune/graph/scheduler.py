"""Which task of a network gets the next batch of trials: Ansor's gradient task scheduler.

    scheduler = GradientScheduler([TaskState(weight=2, flops=..., similar="dense"), ...], seed=0)
    i = scheduler.next_task()                  # the task to tune next
    scheduler.record(i, trials=128, best=1.9e-3)   # its trials so far and best seconds

The network's latency is ``f = sum_i w_i g_i`` (task i's best time g_i, run w_i times).
After a round-robin warm-up (every task gets one batch, so every g_i is known), each batch
goes to the task whose next trials are expected to reduce f the most (Ansor, section 6):

    df/dt_i ~ w_i (alpha (g_i(t_i) - g_i(t_i - dt)) / dt
                   + (1 - alpha) min(-g_i(t_i) / t_i, beta C_i / max_k V_k - g_i(t_i)))

The first term is the recent improvement rate; the second an optimistic guess: either the
task keeps improving at its average rate so far, or it can reach ``beta`` times the best
throughput V_k (flops per second) of the similar tasks k (same op kinds), C_i being its
flops. The most negative derivative wins; with probability ``epsilon`` a random task does
instead (the estimates are noisy), and a task with no valid schedule yet goes first.
``RoundRobinScheduler`` is the baseline it is compared with.
"""
from __future__ import annotations

import math
import random
from dataclasses import dataclass, field


@dataclass
class TaskState:
    """What the scheduler knows of one task: its weight, flops and similarity class, the
    trials given so far and the best seconds after each batch (``curve``)."""

    weight: int
    flops: int
    similar: str
    trials: int = 0
    curve: list[tuple[int, float]] = field(default_factory=list)

    @property
    def best(self) -> float:
        return self.curve[-1][1] if self.curve else math.inf


class RoundRobinScheduler:
    """Each task in turn."""

    def __init__(self, tasks: list[TaskState]):
        if not tasks:
            raise ValueError("a scheduler needs at least one task")
        self.tasks = tasks
        self._turn = 0

    def next_task(self) -> int:
        i = self._turn % len(self.tasks)
        self._turn += 1
        return i

    def record(self, i: int, trials: int, best: float) -> None:
        state = self.tasks[i]
        state.trials = trials
        state.curve.append((trials, best))


class GradientScheduler(RoundRobinScheduler):
    """Ansor's gradient rule (the module docstring)."""

    def __init__(self, tasks: list[TaskState], alpha: float = 0.2, beta: float = 2.0, epsilon: float = 0.05,
                 seed: int = 0):
        super().__init__(tasks)
        self.alpha, self.beta, self.epsilon = alpha, beta, epsilon
        self.rng = random.Random(seed)

    def next_task(self) -> int:
        for i, t in enumerate(self.tasks):
            if t.trials == 0:
                return i  # the warm-up round
        for i, t in enumerate(self.tasks):
            if math.isinf(t.best):
                return i  # nothing valid yet: its latency is unknown, and dominates
        if self.rng.random() < self.epsilon:
            return self.rng.randrange(len(self.tasks))
        return min(range(len(self.tasks)), key=self.gradient)

    def gradient(self, i: int) -> float:
        """The estimated change of the network's latency per trial given to task ``i``."""
        t = self.tasks[i]
        recent = 0.0
        if len(t.curve) >= 2:
            (t0, g0), (t1, g1) = t.curve[-2], t.curve[-1]
            recent = (g1 - g0) / max(t1 - t0, 1)
        optimistic = -t.best / t.trials
        throughputs = [s.flops / s.best for s in self.tasks if s.similar == t.similar and s.best > 0]
        if throughputs and t.flops:
            optimistic = min(optimistic, self.beta * t.flops / max(throughputs) - t.best)
        return t.weight * (self.alpha * recent + (1 - self.alpha) * optimistic)
