"""Where the tuning database lives: turning ``Database(url)``'s argument into a URL.

    None                  -> $AUTOTUNE_DB if set, else $XDG_CACHE_HOME/autotune/tuning.db
                             (~/.cache/autotune/tuning.db when XDG_CACHE_HOME is unset)
    "sqlite:///t.db", "postgresql://host/db", ...   -> used as given (any SQLAlchemy URL)
    "runs/t.db", Path("~/t.db")                     -> a SQLite file at that path

``AUTOTUNE_DB`` may itself be a URL or a plain path. Opened to write, the directory of a
SQLite file is created when missing (``prepare_sqlite_file``); a location that cannot be
created or written is reported as a ``DatabaseError`` naming it. Opened to read only, a
missing file is such an error and nothing is created (``require_sqlite_file``): a
mistyped path must not leave an empty database behind.
"""
from __future__ import annotations

import os
from pathlib import Path

from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError

from .errors import DatabaseError, NoDatabaseError

ENV_VAR = "AUTOTUNE_DB"


def default_path() -> Path:
    """``$XDG_CACHE_HOME/autotune/tuning.db``, falling back to ``~/.cache`` (XDG spec:
    a relative XDG_CACHE_HOME is invalid and ignored)."""
    cache = os.environ.get("XDG_CACHE_HOME", "")
    base = Path(cache) if cache and os.path.isabs(cache) else Path.home() / ".cache"
    return base / "autotune" / "tuning.db"


def resolve_url(url: str | os.PathLike | URL | None = None) -> URL:
    """The SQLAlchemy URL ``Database(url)`` opens (see the module docstring)."""
    if url is None:
        url = os.environ.get(ENV_VAR) or default_path()
    if isinstance(url, URL):
        return url
    if isinstance(url, os.PathLike) or "://" not in url:
        path = Path(url).expanduser()
        if not str(path):
            raise DatabaseError("empty database path")
        return URL.create("sqlite", database=str(path.absolute()))
    try:
        return make_url(url)
    except ArgumentError as exc:
        raise DatabaseError(f"invalid database URL {url!r}: {exc}") from None


def sqlite_file(url: URL) -> Path | None:
    """The file behind a SQLite URL; None for other databases and in-memory SQLite."""
    if url.get_backend_name() != "sqlite":
        return None
    database = url.database or ""
    if database in ("", ":memory:") or database.startswith("file:"):
        return None
    return Path(database)


def describe(url: URL) -> str:
    """How messages name the database: the file path, or the URL without its password."""
    path = sqlite_file(url)
    return str(path) if path is not None else url.render_as_string(hide_password=True)


def prepare_sqlite_file(path: Path) -> None:
    """Create the directory of ``path`` and check that the file can be created there."""
    parent = path.parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise DatabaseError(f"{path}: cannot create directory {parent}: {reason}") from None
    if not parent.is_dir():
        raise DatabaseError(f"{path}: {parent} is not a directory")
    if path.exists():
        if path.is_dir():
            raise DatabaseError(f"{path}: is a directory, not a database file")
    elif not os.access(parent, os.W_OK | os.X_OK):
        raise DatabaseError(f"{path}: directory {parent} is not writable")


def require_sqlite_file(path: Path) -> None:
    """Check that the database file ``path`` exists (to read it), creating nothing."""
    if path.is_dir():
        raise DatabaseError(f"{path}: is a directory, not a database file")
    if not path.exists():
        raise NoDatabaseError(f"{path}: no tuning database here (the file does not exist)")
