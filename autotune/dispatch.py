"""Building a task with its best tuned schedule: the "apply best" side of the database.

    with tuning_db.apply_best(db):
        f = autotune.build(task)          # the fastest stored config for this workload and device
    f = autotune.build(task, db=db)       # the same, without the context
    f(a, b, c); f.config; f.record        # NumPy arrays; the Config used; its MeasureRecord or None

Which config: ``tuning_db.lookup_best(task.key, task.target_kind, device)`` on the active database
(a task from tensors has the key of its name and DAG hash: the same tensors built again, in
any process, find the records a run stored for them),
matched on the target kind and this machine's device (a schedule tuned on another CPU
model is not reused). With no record, or one from another version of the schedule space,
the build falls back to a deterministic default, ``task.space.sample(random.Random(0))``,
and says so with a ``tuning_db.NoTunedConfigWarning``: a default schedule is correct but
may be slow, and silence would hide that.
"""
from __future__ import annotations

import contextlib
import random
import warnings

from schedule.config import Config, ConfigError
from tuning_db import NoTunedConfigWarning, apply_best, lookup_best

from . import targets
from .task import Task

#: The seed of the fallback schedule (a fixed one, so untuned builds are reproducible).
DEFAULT_CONFIG_SEED = 0


def default_config(task: Task) -> Config:
    """The schedule used when nothing is tuned: the first valid sample of a fixed seed."""
    return task.space.sample(random.Random(DEFAULT_CONFIG_SEED))


def best_config(task: Task, db=None):
    """(config, record) for ``task``: the best stored one, or (default config, None)."""
    scope = apply_best(db) if db is not None else contextlib.nullcontext()
    device = targets.describe(task.target).device
    with scope:
        record = lookup_best(task.key, task.target_kind, device or None, targets.former_devices(task.target))
    if record is None:
        return default_config(task), None
    try:
        config = Config.from_json(record.config)
        reason = task.space.check(config)
    except ConfigError as exc:
        reason = str(exc)
    if reason is not None:
        warnings.warn(
            f"record {record.id} for {task.key} does not fit this version of the schedule space "
            f"({reason}); using the default schedule", NoTunedConfigWarning, stacklevel=3,
        )
        return default_config(task), None
    return config, record


def build(task: Task, db=None):
    """Compile ``task`` with its best tuned config (see the module docstring).

    Returns the backend's module, callable with arrays in the workload's argument order,
    with ``.config`` (the Config used) and ``.record`` (its MeasureRecord, None for the default).
    """
    config, record = best_config(task, db)
    return build_config(task, config, record)


def build_config(task: Task, config: Config, record=None, candidates: bool = True):
    """Compile ``task`` with ``config`` (``candidates``: see ``ConfigSpace.apply``); the module
    carries ``.config`` and ``.record`` (the record it came from, if any)."""
    from backends import backend_for

    module = backend_for(task.target).build(task.lower(config, candidates))
    module.config, module.record = config, record
    return module


def packed_input(module, name: str, array):
    """Input ``name`` of a built ``module`` packed once into the layout its schedule chose
    (``CPUModule.pack``), to pass in the array's place; the array itself for a backend that
    packs nothing."""
    pack = getattr(module, "pack", None)
    return array if pack is None else pack(name, array)
