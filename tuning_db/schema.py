"""Creating the tables, and checking and migrating the schema version of an existing file.

The version lives in ``meta.schema_version``. Opening a database:

    no meta table            -> create every table and write the current version
    version == SCHEMA_VERSION -> nothing to do (a read-only check: read-only files open)
    older version             -> run MIGRATIONS[v] for v = stored .. current-1, in one transaction
                                 (a read-only file of an older version cannot be opened)
    newer or unreadable       -> DatabaseError: an older tool must not misread newer rows

Creation and migration run in a write transaction (``BEGIN IMMEDIATE`` on SQLite, an advisory
lock on PostgreSQL: ``engine.serialize``) and look at the version again inside it, so two
processes opening a new database at once create it once. PostgreSQL runs the DDL inside that
transaction too: a process killed half-way leaves no half-made schema.
"""
from __future__ import annotations

import re
from typing import Callable

from sqlalchemy import Connection, DateTime, Double, Integer, String, Text, inspect, select, text
from sqlalchemy.engine import Engine
from sqlalchemy.types import TypeEngine

from .engine import SCHEMA_LOCK, serialize
from .errors import DatabaseError
from .models import SCHEMA_VERSION, Base, MetaRow


def _add_columns(conn: Connection, table: str, columns: dict[str, TypeEngine]) -> None:
    """``ALTER TABLE ... ADD COLUMN`` for nullable columns, types spelled by the connection's dialect.

    A migration names its column types itself rather than reading them from ``models``,
    so it keeps doing the same thing when the models change later.
    """
    for name, kind in columns.items():
        conn.execute(text(f"ALTER TABLE {table} ADD COLUMN {name} {kind.compile(dialect=conn.dialect)}"))


def _v1_to_v2(conn: Connection) -> None:
    """Runs record their process and a heartbeat (stale-run detection) and what they resumed."""
    _add_columns(conn, "tuning_runs", {
        "pid": Integer(), "host": String(), "heartbeat_at": DateTime(),
        "resumed_from": Integer(), "baseline_gflops": Double(),
    })


def _v2_to_v3(conn: Connection) -> None:
    """Workloads keep their DAG (te.serialize JSON), so any process can rebuild them; older
    rows have none (their workloads are rebuilt by name and params, as they were tuned)."""
    _add_columns(conn, "workloads", {"dag_json": Text(), "dag_hash": String(16), "dag_stored_at": DateTime()})


#: The records' status check of versions 1-3, and from version 4 (spelled here, not read
#: from ``records.STATUSES``, so the migration keeps doing the same thing later).
_V3_RECORD_STATUSES = ("ok", "compile_error", "runtime_error", "wrong_answer", "timeout", "invalid")
_V4_RECORD_STATUSES = _V3_RECORD_STATUSES + ("worker_lost",)


def _v3_to_v4(conn: Connection) -> None:
    """Records may have the status ``worker_lost``: the status check of ``records`` is widened."""
    check = "status IN (" + ", ".join(f"'{s}'" for s in _V4_RECORD_STATUSES) + ")"
    if conn.dialect.name == "sqlite":
        _replace_sqlite_check(conn, "records", "ck_records_status", check)
    else:
        conn.execute(text("ALTER TABLE records DROP CONSTRAINT ck_records_status"))
        conn.execute(text(f"ALTER TABLE records ADD CONSTRAINT ck_records_status CHECK ({check})"))


def _v4_to_v5(conn: Connection) -> None:
    """Final timing runs keep the anchor's GFLOP/s measured with them."""
    _add_columns(conn, "tuning_runs", {"anchor_gflops": Double()})


def _v5_to_v6(conn: Connection) -> None:
    """Final timing runs keep the interval of the winner's ratio to the anchor."""
    _add_columns(conn, "tuning_runs", {"ratio_low": Double(), "ratio_high": Double()})


def _replace_sqlite_check(conn: Connection, table: str, name: str, check: str) -> None:
    """Give ``table``'s CHECK constraint ``name`` the condition ``check``, in place.

    SQLite has no ALTER TABLE for constraints; its documented way of loosening a CHECK
    (which changes nothing stored, unlike rebuilding the table) edits the table's SQL in
    ``sqlite_master`` with ``writable_schema`` and bumps ``schema_version`` so that every
    connection re-reads it. Only loosening is safe this way: existing rows are not checked.
    """
    sql = conn.execute(text("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = :t"), {"t": table}).scalar()
    pattern = re.compile(rf"CONSTRAINT {name} CHECK \((?:[^()]|\([^()]*\))*\)")
    if sql is None or len(pattern.findall(sql)) != 1:
        raise DatabaseError(f"cannot migrate table {table}: its constraint {name} is not where it should be")
    new_sql = pattern.sub(lambda _: f"CONSTRAINT {name} CHECK ({check})", sql)
    version = conn.exec_driver_sql("PRAGMA schema_version").scalar()
    conn.exec_driver_sql("PRAGMA writable_schema = ON")
    try:
        conn.execute(text("UPDATE sqlite_master SET sql = :sql WHERE type = 'table' AND name = :t"),
                     {"sql": new_sql, "t": table})
        conn.exec_driver_sql(f"PRAGMA schema_version = {int(version) + 1}")
    finally:
        conn.exec_driver_sql("PRAGMA writable_schema = OFF")


# MIGRATIONS[v] upgrades a version-v database to version v+1.
MIGRATIONS: dict[int, Callable[[Connection], None]] = {1: _v1_to_v2, 2: _v2_to_v3, 3: _v3_to_v4, 4: _v4_to_v5,
                                                   5: _v5_to_v6}


def ensure_schema(reader: Engine, writer: Engine, where: str) -> None:
    """Create the tables of a new database, or migrate an older one (see the module docstring)."""
    with reader.connect() as conn:
        if stored_version(conn, where) == SCHEMA_VERSION:
            return
    with writer.begin() as conn:
        serialize(conn, SCHEMA_LOCK)
        version = stored_version(conn, where)
        if version is None:
            Base.metadata.create_all(conn)
            conn.execute(MetaRow.__table__.insert().values(key="schema_version", value=str(SCHEMA_VERSION)))
            return
        for v in range(version, SCHEMA_VERSION):
            MIGRATIONS[v](conn)
        conn.execute(MetaRow.__table__.update().where(MetaRow.key == "schema_version")
                     .values(value=str(SCHEMA_VERSION)))


def stored_version(conn: Connection, where: str) -> int | None:
    """The schema version in ``meta``; None for a database without our tables."""
    if not inspect(conn).has_table(MetaRow.__tablename__):
        return None
    value = conn.execute(select(MetaRow.value).where(MetaRow.key == "schema_version")).scalar()
    if value is None:
        raise DatabaseError(f"{where}: not a tuning database (its meta table has no schema_version)")
    try:
        version = int(value)
    except ValueError:
        raise DatabaseError(f"{where}: unknown schema version {value!r}") from None
    if version > SCHEMA_VERSION:
        raise DatabaseError(
            f"{where}: schema version {version} is newer than this autotune-te supports "
            f"({SCHEMA_VERSION}); upgrade autotune-te to open it"
        )
    if version < 1 or any(v not in MIGRATIONS for v in range(version, SCHEMA_VERSION)):
        raise DatabaseError(f"{where}: unknown schema version {version}; no migration to {SCHEMA_VERSION}")
    return version
