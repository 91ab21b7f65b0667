"""The tables of the tuning database, as SQLAlchemy 2 ORM classes.

    workloads    one row per workload key (op name + canonical parameters, or name + DAG
                 hash), with the workload's DAG as te.serialize JSON once a run stored it
    targets      one row per distinct (kind, device, compiler, flags, host)
    tuning_runs  one row per tuning session of a workload on a target
    records      one row per measured trial, failures included
    meta         key/value pairs; ``schema_version`` says which layout this file has

JSON fields (params, config, costs) are stored as canonical JSON text on SQLite, so the files
stay readable with the sqlite3 shell, and as ``jsonb`` on PostgreSQL; ``rows.json_field``
queries a field inside them on either. Timestamps are stored as naive UTC and handed back
timezone-aware. Nothing outside this package sees these rows:
``database.py`` converts them to the dataclasses of ``records.py``.
"""
from __future__ import annotations

import json
from datetime import datetime, timezone
from typing import Any

from sqlalchemy import (
    CheckConstraint, DateTime, Double, ForeignKey, Index, Integer, MetaData, String, Text,
    TypeDecorator, UniqueConstraint,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from .records import RUN_STATUSES, STATUSES, canonical_json

# Bump when the layout changes, and add a step to schema.MIGRATIONS.
#   1  the first layout
#   2  tuning_runs: pid, host, heartbeat_at (stale-run detection), resumed_from, baseline_gflops
#   3  workloads: dag_json, dag_hash, dag_stored_at (the workload's DAG, so any process can rebuild it)
#   4  records: the status "worker_lost" (a build or measurement whose machine went away)
#   5  tuning_runs: anchor_gflops (a final timing run's anchor)
#   6  tuning_runs: ratio_low, ratio_high (a final timing run's interval of its winner's ratio to the anchor)
SCHEMA_VERSION = 6


class JSONText(TypeDecorator):
    """A JSON value: canonical JSON text, or ``jsonb`` on PostgreSQL (which parses and
    serialises it itself, and can index into it)."""

    impl = Text
    cache_ok = True

    def load_dialect_impl(self, dialect):
        return dialect.type_descriptor(JSONB() if _is_postgresql(dialect) else Text())

    def process_bind_param(self, value: Any, dialect) -> Any:
        if value is None or _is_postgresql(dialect):
            return value
        return canonical_json(value)

    def process_result_value(self, value: Any, dialect) -> Any:
        if value is None or _is_postgresql(dialect):
            return value
        return json.loads(value)


def _is_postgresql(dialect) -> bool:
    return dialect.name == "postgresql"


class UTCDateTime(TypeDecorator):
    """A timezone-aware UTC datetime, stored naive (SQLite has no time zones)."""

    impl = DateTime
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError(f"refusing to store a naive datetime {value!r}")
        return value.astimezone(timezone.utc).replace(tzinfo=None)

    def process_result_value(self, value: datetime | None, dialect) -> datetime | None:
        return None if value is None else value.replace(tzinfo=timezone.utc)


def _in(column: str, values: tuple[str, ...]) -> str:
    return f"{column} IN ({', '.join(repr(v) for v in values)})"


class Base(DeclarativeBase):
    # Named constraints, so that future migrations can refer to them on every backend.
    metadata = MetaData(naming_convention={
        "ix": "ix_%(table_name)s_%(column_0_N_name)s",
        "uq": "uq_%(table_name)s_%(column_0_N_name)s",
        "ck": "ck_%(table_name)s_%(constraint_name)s",
        "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
        "pk": "pk_%(table_name)s",
    })


class WorkloadRow(Base):
    __tablename__ = "workloads"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    key: Mapped[str] = mapped_column(String, unique=True)      # te.Workload.key
    name: Mapped[str] = mapped_column(String, index=True)      # op name, for similar-workload queries
    params: Mapped[dict] = mapped_column(JSONText)
    # Since version 3 (None on older rows, and on rows imported from JSON lines): the workload
    # as te.serialize JSON text, kept as written (not re-encoded), its hash, and when it was stored.
    dag_json: Mapped[str | None] = mapped_column(Text)
    dag_hash: Mapped[str | None] = mapped_column(String(16))
    dag_stored_at: Mapped[datetime | None] = mapped_column(UTCDateTime)


class TargetRow(Base):
    __tablename__ = "targets"
    __table_args__ = (UniqueConstraint("kind", "device", "compiler", "flags", "host"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    kind: Mapped[str] = mapped_column(String(16))
    device: Mapped[str] = mapped_column(String, default="")
    compiler: Mapped[str] = mapped_column(String, default="")
    flags: Mapped[str] = mapped_column(String, default="")
    host: Mapped[str] = mapped_column(String, default="")


class RunRow(Base):
    __tablename__ = "tuning_runs"
    __table_args__ = (
        Index(None, "workload_id", "target_id"),
        CheckConstraint(_in("status", RUN_STATUSES), name="status"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    workload_id: Mapped[int] = mapped_column(ForeignKey("workloads.id"))
    target_id: Mapped[int] = mapped_column(ForeignKey("targets.id"))
    tuner: Mapped[str] = mapped_column(String)
    seed: Mapped[int | None] = mapped_column(Integer)
    trials_requested: Mapped[int] = mapped_column(Integer)
    tool_version: Mapped[str] = mapped_column(String)
    started_at: Mapped[datetime] = mapped_column(UTCDateTime)
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    status: Mapped[str] = mapped_column(String(16))
    # Since version 2 (None on older runs and on imported ones). The tuning process and the
    # last time it stored something, so that a killed run can be told from a live one:
    pid: Mapped[int | None] = mapped_column(Integer)
    host: Mapped[str | None] = mapped_column(String)
    heartbeat_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    # A resumed run: the run it continues, and the best GFLOP/s stored before it began
    # (its best-so-far curve starts there). A plain id, not a foreign key: added by ALTER TABLE.
    resumed_from: Mapped[int | None] = mapped_column(Integer)
    baseline_gflops: Mapped[float | None] = mapped_column(Double)
    # Since version 5: a final timing run (tuner "final"): the anchor's GFLOP/s, timed in the
    # same interleaved rounds as the run's records (None without an anchor, and on other runs).
    anchor_gflops: Mapped[float | None] = mapped_column(Double)
    # Since version 6: a final timing run: the 90 % confidence interval of its winner's speed
    # ratio to the anchor, from the rounds' ratios (None without an anchor, and on other runs).
    ratio_low: Mapped[float | None] = mapped_column(Double)
    ratio_high: Mapped[float | None] = mapped_column(Double)


class RecordRow(Base):
    __tablename__ = "records"
    __table_args__ = (
        # best / top-k of a workload on a target: WHERE status='ok' ORDER BY median_s
        Index(None, "workload_id", "target_id", "status", "median_s"),
        # measured configs of a task (--resume, duplicate checks)
        Index(None, "workload_id", "target_id", "config_hash"),
        # history of a run in trial order
        Index(None, "run_id", "trial"),
        CheckConstraint(_in("status", STATUSES), name="status"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("tuning_runs.id"))
    workload_id: Mapped[int] = mapped_column(ForeignKey("workloads.id"))
    target_id: Mapped[int] = mapped_column(ForeignKey("targets.id"))
    trial: Mapped[int] = mapped_column(Integer)
    config: Mapped[dict] = mapped_column(JSONText)
    config_hash: Mapped[str] = mapped_column(String(64))
    status: Mapped[str] = mapped_column(String(16))
    costs: Mapped[list] = mapped_column(JSONText)              # seconds per timed repeat
    median_s: Mapped[float | None] = mapped_column(Double)     # None for failures
    spread: Mapped[float | None] = mapped_column(Double)       # relative
    gflops: Mapped[float | None] = mapped_column(Double)
    build_s: Mapped[float] = mapped_column(Double)
    run_s: Mapped[float] = mapped_column(Double)
    error: Mapped[str | None] = mapped_column(Text)            # cut to a few KB
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    tool_version: Mapped[str] = mapped_column(String)


class MetaRow(Base):
    __tablename__ = "meta"

    key: Mapped[str] = mapped_column(String, primary_key=True)
    value: Mapped[str] = mapped_column(Text)
