"""Genetic search over the knobs, with measured throughput as the fitness.

Steady state, elitist: the parents of every batch are the ``pop_size`` fastest configs
measured so far (failures have fitness 0), so good configs stay until better ones
replace them. A batch is bred as

    elites     each of the ``elite_num`` fastest configs gets one mutated child
               (local refinement around the best)
    offspring  two parents by tournament (``tournament`` contestants, the fastest
               wins), uniform crossover with probability ``crossover_prob``, then
               mutations (one knob each) while a coin with ``mutation_prob`` says so

A child that is invalid (``space.check``) or already proposed/measured is mutated
again, a few times, and then replaced by a random config. Until two configs have run
successfully there is nothing to breed from and batches are random.
"""
from __future__ import annotations

from schedule.config import Config

from .base import Tuner


class GATuner(Tuner):
    """Genetic search (see the module docstring); fitness is the measured throughput."""

    def __init__(self, space, seed: int = 0, pop_size: int = 64, elite_num: int = 4,
                 tournament: int = 3, crossover_prob: float = 0.9, mutation_prob: float = 0.5,
                 max_retries: int = 8):
        super().__init__(space, seed)
        if pop_size < 2:
            raise ValueError("GATuner: pop_size must be at least 2")
        self.pop_size = pop_size
        self.elite_num = min(elite_num, pop_size)
        self.tournament = max(1, tournament)
        self.crossover_prob = crossover_prob
        self.mutation_prob = mutation_prob
        self.max_retries = max_retries

    def _population(self) -> list[Config]:
        """The parents: the fastest ``pop_size`` successful configs, fastest first."""
        return [c for c, _ in self.measured(finite_only=True)[:self.pop_size]]

    def next_batch(self, n: int) -> list[Config]:
        pop = self._population()
        if len(pop) < 2:
            return self._starting_then_random(n)
        out: list[Config] = []
        for elite in pop[:self.elite_num]:
            if len(out) >= n:
                break
            child = self._settle(self.space.mutate(elite, self.rng))
            if child is not None:
                out.append(child)
        while len(out) < n:
            a, b = self._select(pop), self._select(pop)
            child = self.space.crossover(a, b, self.rng) if self.rng.random() < self.crossover_prob else a
            while self.rng.random() < self.mutation_prob:
                child = self.space.mutate(child, self.rng)
            child = self._settle(child)
            if child is None:  # the neighbourhood is used up: explore at random instead
                more = self._random_fresh(1)
                if not more:
                    break
                child = more[0]
            out.append(child)
        return out

    def _select(self, pop: list[Config]) -> Config:
        """Tournament: the best (lowest index: ``pop`` is sorted fastest first) of a few."""
        return pop[min(self.rng.randrange(len(pop)) for _ in range(self.tournament))]

    def _settle(self, child: Config) -> Config | None:
        """``child`` made valid and new by further mutation, and marked; None if that fails."""
        for _ in range(self.max_retries):
            if self.space.check(child) is None and self._mark(child):
                return child
            child = self.space.mutate(child, self.rng)
        return None

