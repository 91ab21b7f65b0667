"""Errors raised when an expression, tensor or workload is malformed.

All derive from ``TEError`` (itself a ``ValueError``) so callers can catch the whole
family, and each message names the offending object and what to do instead.
"""


class TEError(ValueError):
    """Base class of every user-facing error of the expression language."""


class DTypeError(TEError, TypeError):
    """Two dtypes meet with no rule to combine them, or a dtype is unsupported."""


class ShapeError(TEError):
    """A shape, extent or index arity is wrong."""


class ReductionError(TEError):
    """A reduction or reduce axis is used where it has no meaning."""


class WorkloadError(TEError, KeyError):
    """An unknown workload name or bad workload parameters."""

    def __str__(self):  # KeyError would quote the message; keep it readable.
        return str(self.args[0]) if self.args else ""
