"""Fixtures for the tuning database tests."""
from __future__ import annotations

import pytest

import tuning_db


@pytest.fixture
def db(tmp_path):
    """A fresh SQLite file database, closed after the test."""
    with tuning_db.Database(tmp_path / "tuning.db") as database:
        yield database
