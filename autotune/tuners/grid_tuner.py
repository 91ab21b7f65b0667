"""Grid search: the space's valid configs in ``space.enumerate()`` order."""
from __future__ import annotations

from schedule.config import Config

from .base import Tuner


class GridTuner(Tuner):
    """Walks ``space.enumerate()`` in order, skipping configs already measured (e.g. on resume)."""

    def __init__(self, space, seed: int = 0):
        super().__init__(space, seed)
        self._iter = iter(self.space.enumerate())
        self._peeked: Config | None = None

    def _peek(self) -> Config | None:
        """The next unvisited config of the walk, without taking it."""
        if self._peeked is not None and self.visited(self._peeked):
            self._peeked = None  # measured meanwhile (reported through update)
        while self._peeked is None and not self._exhausted:
            config = next(self._iter, None)
            if config is None:
                self._exhausted = True
            elif not self.visited(config):
                self._peeked = config
        return self._peeked

    def next_batch(self, n: int) -> list[Config]:
        out: list[Config] = []
        while len(out) < n and self._peek() is not None:
            config, self._peeked = self._peeked, None
            if self._mark(config):
                out.append(config)
        return out

    def has_next(self) -> bool:
        return self._peek() is not None
