"""The tuning database: every measurement of every tuning run, and the best ones reused.

    db = tuning_db.Database()                        # or Database("sqlite:///t.db"), any SQLAlchemy URL
    run = db.start_run(key, name, params, target, tuner, seed, trials_requested, tool_version)
    db.add_records(run, [tuning_db.MeasureRecord(...), ...])
    db.finish_run(run)
    db.best(key, target); db.top_k(key, 5, target); db.history(run)
    db.export_jsonl("records.jsonl"); db.import_jsonl("records.jsonl")
    with tuning_db.apply_best(db):
        tuning_db.lookup_best(key, "cpu")            # what the builder calls

Modules, one job each: ``records`` (the plain dataclasses callers see), ``models`` (ORM
tables), ``location`` (where the database is), ``engine`` (SQLite settings for concurrent
writers), ``schema`` (versioning), ``rows`` (rows <-> records), ``database`` (the API),
``jsonl`` (export/import), ``dispatch`` (apply_best / lookup_best), ``liveness`` (is a
"running" run still running?), ``errors``.
This package imports nothing else of the project: workload keys come from ``te`` as strings.

The names backed by SQLAlchemy load on first use (PEP 562 ``__getattr__``): the measuring
process needs only ``records.Status`` and starts without importing SQLAlchemy.
"""
import importlib
from .errors import DatabaseError, NoDatabaseError, RecordFormatError
from .liveness import STALE_AFTER, run_state
from .records import (
    ERROR_STATUSES, FINAL_TUNER, MAX_ERROR_CHARS, RUN_STATUSES, STATUSES, MeasureRecord, RunInfo, Status, TargetInfo,
    TargetSummary, WorkloadSummary, check_target_kind, config_hash,
)

__all__ = [
    "Database", "DatabaseError", "NoDatabaseError", "RecordFormatError", "MeasureRecord", "TargetInfo", "RunInfo",
    "WorkloadSummary", "TargetSummary", "FINAL_TUNER", "STATUSES", "ERROR_STATUSES", "RUN_STATUSES", "Status",
    "check_target_kind", "run_state", "STALE_AFTER",
    "MAX_ERROR_CHARS", "SCHEMA_VERSION", "config_hash", "apply_best", "lookup_best", "active_database",
    "NoTunedConfigWarning", "ENV_VAR", "default_path", "resolve_url",
]

#: name -> module of the names loaded on first use (they import SQLAlchemy).
_LAZY = {
    "Database": "database", "NoTunedConfigWarning": "dispatch", "active_database": "dispatch",
    "apply_best": "dispatch", "lookup_best": "dispatch", "ENV_VAR": "location", "default_path": "location",
    "resolve_url": "location", "SCHEMA_VERSION": "models",
}


def __getattr__(name: str):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value
