"""Ctrl-C and SIGTERM end any ``autotune`` command the same way: one line, status 130.

Every command runs inside ``signals_interrupt()`` (``AutotuneGroup.invoke``): SIGTERM
raises KeyboardInterrupt as Ctrl-C does, and SIGINT gets Python's handler explicitly, since
a process started in the background of a script inherits SIGINT as ignored and Python keeps
it ignored (the signal would be lost). A command that has more to say catches the
interrupt itself (tuning: how many trials are stored, how to resume); any other ends with
``autotune.console.INTERRUPTED`` instead of click's "Aborted!" and status 1.
"""
from __future__ import annotations

import signal
import threading
from contextlib import contextmanager
from typing import Iterator


def _raise_interrupt(signum, frame):
    raise KeyboardInterrupt


@contextmanager
def signals_interrupt() -> Iterator[None]:
    """SIGINT and SIGTERM raise KeyboardInterrupt inside the block; the handlers before it
    come back after. Outside the main thread (a command invoked from a thread of a program,
    where Python runs no handlers) it changes nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous_term = signal.signal(signal.SIGTERM, _raise_interrupt)
    previous_int = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous_term)
        signal.signal(signal.SIGINT, previous_int)
