"""Random search: uniformly sampled valid configs, never one twice."""
from __future__ import annotations

from schedule.config import Config

from .base import Tuner


class RandomTuner(Tuner):
    """Uniform valid configs (``space.sample``), skipping any proposed or measured before."""

    def next_batch(self, n: int) -> list[Config]:
        return self._random_fresh(n)
