"""Ctrl-C and SIGTERM wait for the database transaction in progress to end.

A KeyboardInterrupt raised inside SQLAlchemy (while a pooled connection is rolled back
on its return, say) is caught there, logged with a traceback to stderr, and raised again:
the user who pressed Ctrl-C sees a stack trace instead of the tool's one-line message,
and the connection is thrown away half reset. ``interrupts_deferred`` holds the signal
until the ``with`` block ends and raises it then, where the caller handles it.

A second signal in the same block is raised at once: a transaction that never ends (a
PostgreSQL server that stopped answering) can still be interrupted. Only Python-level
handlers are held: a signal ignored or left to the operating system stays so, and outside
the main thread (where Python runs no handlers) the block changes nothing.
"""
from __future__ import annotations

import signal
import threading
from contextlib import contextmanager
from typing import Iterator

HELD_SIGNALS = (signal.SIGINT, signal.SIGTERM)


@contextmanager
def interrupts_deferred() -> Iterator[None]:
    """Run the block with SIGINT and SIGTERM held; the first one that came is handled after it."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    pending: list[int] = []

    def hold(signum, frame):
        if pending:            # the user insists: stop now
            signal.default_int_handler(signum, frame)
        pending.append(signum)

    replaced = {}
    for signum in HELD_SIGNALS:
        handler = signal.getsignal(signum)
        if callable(handler):
            replaced[signum] = handler
            signal.signal(signum, hold)
    try:
        yield
    finally:
        for signum, handler in replaced.items():
            signal.signal(signum, handler)
        if pending:
            replaced[pending[0]](pending[0], None)
