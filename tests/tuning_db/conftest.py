"""Fixtures for the tuning database tests: every ``db`` test runs on SQLite and on PostgreSQL.

    db_url         a fresh, empty database: a SQLite file, or a new database on the session's
                   PostgreSQL server (parametrized: each test using it runs once per backend)
    db             a ``tuning_db.Database`` opened on ``db_url``, closed after the test
    sqlite_db      a SQLite file database only, for the tests of SQLite files themselves

``postgres_url`` and ``postgres_server`` come from the tests' top conftest.
"""
from __future__ import annotations

import pytest

import tuning_db

BACKENDS = ["sqlite", "postgres"]


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
