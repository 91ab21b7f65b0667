"""The SQLAlchemy engine, set up so several processes can write one SQLite file at once.

Every SQLite connection gets (in a ``connect`` event, so pooled and new connections alike):

    busy_timeout = 30 s   wait for another writer's lock instead of failing at once
    journal_mode = WAL    readers never block the writer, the writer never blocks readers
    synchronous = NORMAL  in WAL mode a process crash (even SIGKILL) never loses a
                          committed transaction; only a power cut can drop the last ones
    foreign_keys = ON

Transactions are begun by us rather than by the sqlite3 module (which starts them
late and lets a read transaction be upgraded to a write one; in WAL mode that upgrade
fails at once with "database is locked" if another process wrote in between, and
busy_timeout cannot help). Readers use a plain ``BEGIN``; writers use the engine from
``writer()``, whose transactions start with ``BEGIN IMMEDIATE``: they take the write lock
up front, waiting up to busy_timeout for it, so concurrent writers queue instead of failing.
Other databases (PostgreSQL for shared use) get none of this: a server runs concurrent
transactions itself. The few transactions that must not run side by side there (creating
the schema, importing records) take a transaction-scoped advisory lock (``serialize``),
which on SQLite the write lock taken at ``BEGIN IMMEDIATE`` already is.

``open_engine(url, create=False)`` connects to an existing SQLite file only (SQLite's
``mode=rw``, which never creates the file), for the commands that only read; it leaves
the journal mode as it is (a file made by a writer is in WAL mode already, for good).

Switching a new file to WAL is the one step busy_timeout does not cover: while another
process is switching (or creating the file), SQLite answers ``PRAGMA journal_mode = WAL``
with "database is locked" at once, without calling the busy handler. Two runs started
together on a fresh file would then see one of them fail to open it, so that pragma is
retried (with a short random back-off) until busy_timeout has passed.
"""
from __future__ import annotations

import functools
import random
import sqlite3
import time
from pathlib import Path
from urllib.parse import quote

from sqlalchemy import Connection, create_engine, event, text
from sqlalchemy.engine import URL, Engine
from sqlalchemy.orm import Session
from sqlalchemy.pool import StaticPool

from .location import sqlite_file

BUSY_TIMEOUT_S = 30.0
_BEGIN_OPTION = "tuning_db_sqlite_begin"

#: PostgreSQL advisory lock keys (fixed 63-bit numbers of this package) for ``serialize``.
SCHEMA_LOCK = 0x6175_746F_7475_6E01   # creating or migrating the tables
IMPORT_LOCK = 0x6175_746F_7475_6E02   # importing JSON-lines records (their duplicate check)


def is_sqlite(engine: Engine) -> bool:
    return engine.dialect.name == "sqlite"


def open_engine(url: URL, create: bool = True) -> Engine:
    """The engine of ``url``; ``create=False``: a SQLite file must exist already."""
    if url.get_backend_name() != "sqlite":
        return create_engine(url, pool_pre_ping=True)
    path = sqlite_file(url)
    if path is None:
        # In-memory: one shared connection, or every session would see its own empty database.
        engine = create_engine(url, poolclass=StaticPool, connect_args={"check_same_thread": False})
    elif create:
        engine = create_engine(url, connect_args={"timeout": BUSY_TIMEOUT_S})
    else:
        engine = create_engine(url, creator=functools.partial(_connect_existing, path))
    event.listen(engine, "connect", _configure_sqlite_connection if create else _configure_sqlite_reader)
    event.listen(engine, "begin", _begin_sqlite_transaction)
    return engine


def _connect_existing(path: Path) -> sqlite3.Connection:
    """A connection to the file ``path`` that fails, rather than create it, when it is missing."""
    return sqlite3.connect(f"file:{quote(str(path))}?mode=rw", uri=True, timeout=BUSY_TIMEOUT_S)


def serialize(conn: Connection | Session, key: int) -> None:
    """Make the transactions that call this with the same ``key`` run one at a time.

    On PostgreSQL: a transaction-scoped advisory lock (``pg_advisory_xact_lock``), held until
    the transaction ends, so whatever it reads before writing cannot be changed by another
    such transaction in between. On SQLite nothing: a writer's ``BEGIN IMMEDIATE`` holds the
    whole file's write lock already.
    """
    bind = conn.get_bind() if isinstance(conn, Session) else conn
    if bind.dialect.name == "postgresql":
        conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": key})


def writer(engine: Engine) -> Engine:
    """The same engine (same pool), but its SQLite transactions take the write lock at BEGIN."""
    if not is_sqlite(engine):
        return engine
    return engine.execution_options(**{_BEGIN_OPTION: "BEGIN IMMEDIATE"})


def _configure_sqlite_connection(dbapi_connection, connection_record, wal: bool = True) -> None:
    dbapi_connection.isolation_level = None  # the sqlite3 module must not issue BEGIN itself
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
        if wal:
            _switch_to_wal(cursor)
        cursor.execute("PRAGMA synchronous = NORMAL")
        cursor.execute("PRAGMA foreign_keys = ON")
    finally:
        cursor.close()


def _configure_sqlite_reader(dbapi_connection, connection_record) -> None:
    """``_configure_sqlite_connection`` for an existing file opened to read: no journal switch."""
    _configure_sqlite_connection(dbapi_connection, connection_record, wal=False)


def _switch_to_wal(cursor) -> None:
    """``PRAGMA journal_mode = WAL``, retried while another connection holds the file's lock."""
    deadline = time.monotonic() + BUSY_TIMEOUT_S
    while True:
        try:
            cursor.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            busy = getattr(exc, "sqlite_errorcode", 0) & 0xFF in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)
            if not busy or time.monotonic() >= deadline:
                raise
        time.sleep(random.uniform(0.005, 0.05))


def _begin_sqlite_transaction(connection) -> None:
    connection.exec_driver_sql(connection.get_execution_options().get(_BEGIN_OPTION, "BEGIN"))
