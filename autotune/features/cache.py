"""Features per (task, config), lowered and extracted once; in a pool of processes when many are new.

    cache = FeatureCache(workers=4)
    x = cache.get(task, config)             # float32[FEATURE_DIM], read-only
    xs = cache.get_many(task, configs)      # (len(configs), FEATURE_DIM)

Lowering costs about ten times more than extracting, and a model-guided search scores
the same configs again and again, hence the cache.
"""
from __future__ import annotations

import time
from collections import OrderedDict

import numpy as np

from schedule.config import ConfigError

from .extract import extract
from .layout import FEATURE_DIM

#: Fewest new configs worth sending to the worker pool.
PARALLEL_MIN = 32
_WORKER_TASKS: dict = {}


def _extractor(task):
    """The feature extractor of the task's target kind (``autotune.targets``)."""
    from ..targets import parts_for

    return parts_for(task.target).features or extract


def _lower_and_extract(job) -> np.ndarray | None:
    """Pool worker: features of one config (None if it does not lower)."""
    from schedule.config import Config

    from ..task import Task

    dag_json, target, config_json = job
    key = (dag_json, target)
    task = _WORKER_TASKS.get(key)
    if task is None:
        task = _WORKER_TASKS[key] = Task.from_json(dag_json, target)
    try:
        return _extractor(task)(task.lower(Config.from_json(config_json), verify=False))
    except Exception:  # noqa: BLE001 - a broken config must not stop a search
        return None


def _key(task, config) -> tuple:
    """The cache key of ``config``'s features: the task and the schedule the config builds
    (``SearchSpace.schedule_key``), so configs that build one schedule are lowered once."""
    try:
        return task.key, task.target, task.space.schedule_key(config)
    except (ConfigError, KeyError, TypeError, ValueError):  # not a config of this space: it fails to lower too
        return task.key, task.target, config.hash


class FeatureCache:
    """Features per (task, config), lowered and extracted once; LRU beyond ``max_entries``.

    Keys are the task's workload key and target plus the schedule the config builds, so
    one cache can serve several tasks. A config that fails to lower gets an all-zero vector
    (counted in ``failures``): the tuner never proposes such configs on purpose, and a
    search must not die on one. ``lower_s``/``extract_s`` accumulate the time spent.
    """

    def __init__(self, max_entries: int = 50_000, workers: int = 1):
        self.max_entries = max_entries
        self.workers = workers
        self._pool = None
        self._data: OrderedDict[tuple, np.ndarray] = OrderedDict()
        self.hits = self.misses = self.failures = 0
        self.lower_s = self.extract_s = 0.0

    def __len__(self) -> int:
        return len(self._data)

    @property
    def seconds(self) -> float:
        """Time spent lowering and extracting, in all."""
        return self.lower_s + self.extract_s

    def get(self, task, config) -> np.ndarray:
        return self._get(task, config, _key(task, config))

    def _get(self, task, config, key: tuple) -> np.ndarray:
        x = self._data.get(key)
        if x is not None:
            self.hits += 1
            self._data.move_to_end(key)
            return x
        self.misses += 1
        t0 = time.perf_counter()
        try:
            func = task.lower(config, verify=False)
        except Exception:  # noqa: BLE001 - a broken config must not stop a search
            self.failures += 1
            func = None
        t1 = time.perf_counter()
        x = _extractor(task)(func) if func is not None else np.zeros(FEATURE_DIM, dtype=np.float32)
        self.lower_s += t1 - t0
        self.extract_s += time.perf_counter() - t1
        x.setflags(write=False)
        self._data[key] = x
        if len(self._data) > self.max_entries:
            self._data.popitem(last=False)
        return x

    def get_many(self, task, configs) -> np.ndarray:
        """Features of ``configs`` as a (len(configs), FEATURE_DIM) array.

        Lowering is the cost (milliseconds per config); when many configs are new and
        ``workers`` > 1, they are lowered and extracted in a pool of processes.
        """
        if not configs:
            return np.zeros((0, FEATURE_DIM), dtype=np.float32)
        keys = [_key(task, c) for c in configs]
        missing = {key: c for key, c in zip(keys, configs) if key not in self._data}
        if self.workers > 1 and len(missing) >= PARALLEL_MIN:
            self._extract_in_pool(task, missing)
        return np.stack([self._get(task, c, key) for key, c in zip(keys, configs)])

    def _extract_in_pool(self, task, configs: dict) -> None:
        """Lower and extract ``configs`` (by their cache keys) in the worker pool."""
        t0 = time.perf_counter()
        if self._pool is None:
            from ..worker_pool import start_pool

            # Jobs carry the workload's JSON, so a worker needs no registry.
            self._pool = start_pool(self.workers, preload=[__name__])
        jobs = [(task.dag_json, task.target, c.to_json()) for c in configs.values()]
        chunk = max(1, len(jobs) // (4 * self.workers))
        for key, x in zip(configs, self._pool.map(_lower_and_extract, jobs, chunksize=chunk)):
            if x is None:
                self.failures += 1
                x = np.zeros(FEATURE_DIM, dtype=np.float32)
            x.setflags(write=False)
            self._data[key] = x
        self.misses += len(configs)
        self.lower_s += time.perf_counter() - t0
        while len(self._data) > self.max_entries:
            self._data.popitem(last=False)

    def __getstate__(self) -> dict:
        """What another process gets: the features and counters, not the worker pool."""
        state = self.__dict__.copy()
        state["_pool"] = None
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        for x in self._data.values():
            x.setflags(write=False)

    def work_alone(self) -> None:
        """Lower new configs in this process, never in a pool (in a worker whose siblings
        have the other CPUs)."""
        self.workers = 1

    def close(self) -> None:
        """Stop the worker pool (if one was started)."""
        if self._pool is not None:
            from ..worker_pool import stop_pool

            stop_pool(self._pool)
            self._pool = None

    def feature_fn(self, task):
        """``config -> features`` for ``task``: what ``XGBTuner`` takes."""
        return lambda config: self.get(task, config)
