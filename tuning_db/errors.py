"""The exceptions the tuning database raises to its users.

Every failure a user can cause or meet (a corrupt file, a newer schema, an unwritable
directory, a malformed JSON-lines file, a lock held too long) surfaces as a
``DatabaseError`` whose message is one line naming the database and what is wrong, never
as a raw SQLAlchemy or sqlite3 traceback. Programming mistakes in arguments (an unknown
status, a naive datetime) are ``ValueError``s raised where the value is built.
"""
from __future__ import annotations


class DatabaseError(Exception):
    """The tuning database cannot do what was asked; the message says why, on one line."""


class NoDatabaseError(DatabaseError):
    """A database opened only to read does not exist (nothing was created)."""


class RecordFormatError(DatabaseError, ValueError):
    """A JSON-lines record file is malformed; the message names the file and the line."""


def one_line(exc: BaseException) -> str:
    """A short, single-line description of ``exc`` for wrapping into a ``DatabaseError``.

    SQLAlchemy's messages carry the SQL statement and a documentation link on further
    lines; the driver's own message (``exc.orig``) is what the user needs.
    """
    inner = getattr(exc, "orig", None) or exc
    text = str(inner).strip() or type(inner).__name__
    return text.splitlines()[0]
