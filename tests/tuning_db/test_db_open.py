"""Opening a database: where it lives, SQLite settings, and clear errors for bad files."""
from __future__ import annotations

import os
import re
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

import tuning_db
from tuning_db import Database, DatabaseError
from tdb_helpers import make_record, start


@pytest.fixture
def clean_env(monkeypatch, tmp_path):
    monkeypatch.delenv("AUTOTUNE_DB", raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    return monkeypatch


def test_default_location_is_the_user_cache(clean_env, tmp_path):
    expected = tmp_path / "home" / ".cache" / "autotune" / "tuning.db"
    assert tuning_db.default_path() == expected
    assert tuning_db.resolve_url(None).database == str(expected)
    with Database() as db:
        assert db.path == expected and expected.exists()


def test_default_location_respects_xdg_cache_home(clean_env, tmp_path):
    clean_env.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert tuning_db.default_path() == tmp_path / "xdg" / "autotune" / "tuning.db"
    clean_env.setenv("XDG_CACHE_HOME", "relative/dir")     # invalid per the XDG spec: ignored
    assert tuning_db.default_path() == tmp_path / "home" / ".cache" / "autotune" / "tuning.db"


def test_autotune_db_may_be_a_url_or_a_path(clean_env, tmp_path):
    clean_env.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    clean_env.setenv("AUTOTUNE_DB", f"sqlite:///{tmp_path}/from_url.db")
    with Database() as db:
        assert db.path == tmp_path / "from_url.db"
    clean_env.setenv("AUTOTUNE_DB", str(tmp_path / "nested" / "dir" / "from_path.db"))
    with Database() as db:
        assert db.path == tmp_path / "nested" / "dir" / "from_path.db" and db.path.exists()
    assert not (tmp_path / "xdg").exists()


def test_plain_paths_and_urls(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # "~" must not reach the real home directory
    with Database("relative.db") as db:
        assert db.path == tmp_path / "relative.db"
    with Database("~/sub/y.db") as db:
        assert db.path == tmp_path / "home" / "sub" / "y.db"
    with Database("sqlite://") as db:           # in memory: nothing on disk, still one database
        assert db.path is None
        db.add_records(start(db), [make_record(0)])
        assert len(db.list_workloads()) == 1


def test_sqlite_connections_are_set_up_for_concurrent_writers(sqlite_db):
    with sqlite_db._engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
        assert conn.exec_driver_sql("PRAGMA busy_timeout").scalar() >= 10_000
        assert conn.exec_driver_sql("PRAGMA synchronous").scalar() == 1     # NORMAL
        assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1


def _execute(url: str, sql: str) -> list[tuple]:
    """Run one statement on the database at ``url`` (outside tuning_db), committed; its rows."""
    engine = create_engine(url)
    try:
        with engine.begin() as conn:
            result = conn.execute(text(sql))
            return [tuple(row) for row in result] if result.returns_rows else []
    finally:
        engine.dispose()


def test_schema_version_is_stored_and_a_newer_one_refused(db_url):
    Database(db_url).close()
    where = Database(db_url).location
    assert _execute(db_url, "SELECT value FROM meta WHERE key='schema_version'") == [(str(tuning_db.SCHEMA_VERSION),)]
    newer = str(tuning_db.SCHEMA_VERSION + 1)
    _execute(db_url, f"UPDATE meta SET value = '{newer}' WHERE key = 'schema_version'")
    with pytest.raises(DatabaseError) as info:
        Database(db_url)
    message = str(info.value)
    assert message.startswith(where) and f"schema version {newer} is newer" in message and "\n" not in message
    _execute(db_url, "UPDATE meta SET value = 'banana'")
    with pytest.raises(DatabaseError, match="unknown schema version 'banana'"):
        Database(db_url)


def test_reopening_keeps_the_records(tmp_path):
    path = tmp_path / "t.db"
    with Database(path) as db:
        db.add_records(start(db), [make_record(0), make_record(1)])
    with Database(f"sqlite:///{path}") as db:
        assert len(db.history(1)) == 2


@pytest.mark.parametrize("content", [os.urandom(4096), b"SQLite format 3\x00" + b"\xff" * 4000])
def test_corrupt_file_names_the_file(tmp_path, content):
    path = tmp_path / "garbage.db"
    path.write_bytes(content)
    with pytest.raises(DatabaseError) as info:
        Database(path)
    message = str(info.value)
    assert message.startswith(str(path)) and "\n" not in message
    assert "not a SQLite database, or the file is corrupt" in message


def test_other_sqlite_file_is_not_a_tuning_database(tmp_path):
    path = tmp_path / "other.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT)")
    with pytest.raises(DatabaseError, match=f"{path}: not a tuning database"):
        Database(path)


def test_unwritable_location(tmp_path):
    blocker = tmp_path / "a_file"
    blocker.write_text("not a directory")
    with pytest.raises(DatabaseError, match=f"{blocker}/sub/t.db: cannot create directory"):
        Database(blocker / "sub" / "t.db")
    (tmp_path / "dir.db").mkdir()
    with pytest.raises(DatabaseError, match="is a directory"):
        Database(tmp_path / "dir.db")


#: Opens argv[1] as a database in a child process; prints the DatabaseError and exits 3.
_OPEN_AS_CHILD = """import sys
from tuning_db import Database, DatabaseError
try:
    Database(sys.argv[1])
except DatabaseError as exc:
    print(exc)
    sys.exit(3)
"""


def _open_on_a_read_only_mount(path: Path) -> str:
    """Open ``path`` in a child whose view of ``path.parent`` is a read-only tmpfs, mounted in a
    mount namespace of its own (nothing outside the child sees it): root may write into any
    directory whatever its mode, and CI runs as root, but not onto a read-only file system.
    The message of the DatabaseError the child got."""
    if shutil.which("unshare") is None:
        pytest.skip("needs unshare(1) to mount a read-only file system as root")
    repo = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(repo), os.environ.get("PYTHONPATH")) if p)}
    script = 'mount -t tmpfs -o ro,size=64k tmpfs "$1" || exit 97; shift; exec "$@"'
    proc = subprocess.run(["unshare", "--mount", "sh", "-c", script, "sh", str(path.parent),
                           sys.executable, "-c", _OPEN_AS_CHILD, str(path)],
                          env=env, capture_output=True, text=True, timeout=60)
    if proc.returncode == 97 or "unshare failed" in proc.stderr:
        pytest.skip(f"cannot mount a read-only file system here: {proc.stderr.strip()}")
    assert proc.returncode == 3, f"exit {proc.returncode}\n{proc.stdout}{proc.stderr}"
    return proc.stdout.strip()


def test_read_only_directory(tmp_path):
    locked = tmp_path / "locked"
    locked.mkdir()
    path = locked / "t.db"
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        message = _open_on_a_read_only_mount(path)
    else:
        locked.chmod(0o500)
        try:
            with pytest.raises(DatabaseError) as info:
                Database(path)
        finally:
            locked.chmod(0o700)
        message = str(info.value)
    assert re.fullmatch(rf"{re.escape(str(path))}: directory {re.escape(str(locked))} is not writable", message)
    assert list(locked.iterdir()) == []


def test_bad_urls_and_closed_databases_raise_database_error(tmp_path):
    with pytest.raises(DatabaseError, match="nosuchdialect://x: cannot open"):
        Database("nosuchdialect://x")
    db = Database(tmp_path / "t.db")
    db.close()
    with pytest.raises(DatabaseError, match="t.db: the database is closed"):
        db.best("matmul{}")


def test_opening_to_read_creates_nothing(tmp_path):
    missing = tmp_path / "no" / "such" / "t.db"
    with pytest.raises(DatabaseError) as info:
        Database(missing, create=False)
    assert str(info.value) == f"{missing}: no tuning database here (the file does not exist)"
    assert not (tmp_path / "no").exists()
    (tmp_path / "dir.db").mkdir()
    with pytest.raises(DatabaseError, match="is a directory"):
        Database(tmp_path / "dir.db", create=False)


def test_opening_to_read_leaves_a_foreign_file_untouched(tmp_path):
    empty = tmp_path / "empty.db"
    empty.write_bytes(b"")                       # a valid, empty SQLite file: no tables to read
    with pytest.raises(DatabaseError, match=f"{empty}: not a tuning database"):
        Database(empty, create=False)
    assert empty.read_bytes() == b""


def test_opening_to_read_reads_an_existing_database(tmp_path):
    path = tmp_path / "t.db"
    with Database(path) as db:
        db.add_records(start(db), [make_record(0)])
    with Database(path, create=False) as db:
        assert len(db.history(1)) == 1
