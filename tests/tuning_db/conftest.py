"""Fixtures for the tuning database tests: every ``db`` test runs on SQLite and on PostgreSQL.

    db_url         a fresh, empty database: a SQLite file, or a new database on the session's
                   PostgreSQL server (parametrized: each test using it runs once per backend)
    db             a ``tuning_db.Database`` opened on ``db_url``, closed after the test
    sqlite_db      a SQLite file database only, for the tests of SQLite files themselves
    postgres_url   a fresh database on the PostgreSQL server only
    postgres_server  the server (one per session, see tdb_postgres.py)

Without the PostgreSQL binaries or driver the PostgreSQL cases skip with the reason, unless
``$AUTOTUNE_REQUIRE_POSTGRES`` is set (CI), where they fail instead.
"""
from __future__ import annotations

import atexit
import itertools

import pytest

import tuning_db
import tdb_postgres

BACKENDS = ["sqlite", "postgres"]
_database_numbers = itertools.count(1)


@pytest.fixture(scope="session")
def postgres_server():
    """One PostgreSQL server for the whole session, stopped (and its files removed) at its end."""
    bindir, why_not = tdb_postgres.find_binaries()
    if bindir is None:
        if tdb_postgres.required():
            pytest.fail(f"${tdb_postgres.REQUIRE_ENV} is set but no PostgreSQL server can be started: {why_not}")
        pytest.skip(why_not)
    server = tdb_postgres.PostgresServer.start(bindir)
    atexit.register(server.stop)        # also when the session dies before fixture teardown
    try:
        yield server
    finally:
        server.stop()
        atexit.unregister(server.stop)


@pytest.fixture
def postgres_url(postgres_server):
    """A new database on the session's server (``CREATE DATABASE``), dropped after the test."""
    name = f"tuning_test_{next(_database_numbers)}"
    url = postgres_server.create_database(name)
    yield url
    postgres_server.drop_database(name)


@pytest.fixture(params=BACKENDS)
def db_url(request, tmp_path):
    """A fresh database URL on each backend."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'tuning.db'}"
    return request.getfixturevalue("postgres_url")


@pytest.fixture
def db(db_url):
    """A fresh database on each backend, closed after the test."""
    with tuning_db.Database(db_url) as database:
        yield database


@pytest.fixture
def sqlite_db(tmp_path):
    """A fresh SQLite file database, closed after the test."""
    with tuning_db.Database(tmp_path / "tuning.db") as database:
        yield database
