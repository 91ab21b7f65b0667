"""Reusing tuned schedules at build time: which database is active, and its best record.

    with tuning_db.apply_best(db):            # active inside the block only
        f = autotune.build(task)              # calls lookup_best(key, "cpu", device)

    tuning_db.apply_best(db)                  # or: active from here on, in this context

The active database is a ``contextvars.ContextVar``, so it is per thread and per asyncio
task, nested blocks restore the outer database on exit, and nothing is global.
``lookup_best`` answers None, with a ``NoTunedConfigWarning``, when no database is active
or it has no ok record for the workload on the target; the builder then uses its
default schedule.
"""
from __future__ import annotations

import logging
import warnings
from contextvars import ContextVar

from .database import Database
from .records import MeasureRecord, TargetInfo

log = logging.getLogger(__name__)

_ACTIVE: ContextVar[Database | None] = ContextVar("tuning_db_active_database", default=None)


class NoTunedConfigWarning(UserWarning):
    """A build found no tuned config and falls back to the default schedule."""


class apply_best:
    """Make ``db`` the active database: at once, and until the ``with`` block ends if used as one.

    ``apply_best(None)`` deactivates. Nested ``with`` blocks restore the outer database.
    """

    def __init__(self, db: Database | None):
        if db is not None and not isinstance(db, Database):
            raise TypeError(f"apply_best needs a tuning_db.Database or None, got {db!r}")
        self.db = db
        self._token = _ACTIVE.set(db)

    def __enter__(self) -> Database | None:
        return self.db

    def __exit__(self, *exc_info) -> None:
        _ACTIVE.reset(self._token)


def active_database() -> Database | None:
    """The database ``apply_best`` made active in this context, or None."""
    return _ACTIVE.get()


def lookup_best(workload_key: str, target_kind: str, device: str | None = None,
                former_devices: tuple[str, ...] = ()) -> MeasureRecord | None:
    """The fastest ok record of a workload on a target in the active database, or None.

    ``device`` None matches any device of ``target_kind``. ``former_devices``: less precise
    names earlier versions stored the same device under, tried in order when ``device``
    has no record; one found that way comes with a warning to retune (it may have been
    measured on another device of that name).
    """
    target = TargetInfo(target_kind, device or "")
    db = _ACTIVE.get()
    best = db.best(workload_key, target) if db is not None else None
    for former in former_devices if db is not None and best is None and device else ():
        best = db.best(workload_key, TargetInfo(target_kind, former))
        if best is not None:
            warnings.warn(f"using record {best.id} for {workload_key}, stored for {former!r} before devices were "
                          f"described as {device!r}; it may come from another CPU generation: retune to be sure",
                          NoTunedConfigWarning, stacklevel=2)
            return best
    if best is None:
        why = "no tuning database is active" if db is None else f"none in {db.location}"
        message = f"no tuned config for {workload_key} on {target.describe()}; using the default schedule ({why})"
        log.info(message)
        warnings.warn(message, NoTunedConfigWarning, stacklevel=2)
    return best
