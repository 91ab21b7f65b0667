"""Fixtures shared by several test directories.

    postgres_server  a real PostgreSQL server on 127.0.0.1, one per session (pg_server.py)
    postgres_url     a fresh database on it, dropped after the test

Without the PostgreSQL binaries or driver the PostgreSQL cases skip with the reason, unless
``$AUTOTUNE_REQUIRE_POSTGRES`` is set (CI), where they fail instead.
"""
from __future__ import annotations

import atexit
import itertools

import pytest

import pg_server

_database_numbers = itertools.count(1)


@pytest.fixture(scope="session")
def postgres_server():
    """One PostgreSQL server for the whole session, stopped (and its files removed) at its end."""
    bindir, why_not = pg_server.find_binaries()
    if bindir is None:
        if pg_server.required():
            pytest.fail(f"${pg_server.REQUIRE_ENV} is set but no PostgreSQL server can be started: {why_not}")
        pytest.skip(why_not)
    server = pg_server.PostgresServer.start(bindir)
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
