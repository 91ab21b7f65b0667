"""A Ctrl-C (or SIGTERM turned into one) during a database transaction is raised when the
transaction has ended: what it wrote is stored, SQLAlchemy logs no traceback, and the
database stays usable (see tuning_db/interrupts.py)."""
from __future__ import annotations

import logging
import os
import signal
import threading

import pytest
from sqlalchemy import event

from tuning_db.interrupts import interrupts_deferred
from tdb_helpers import make_record, start


def _interrupt_this_process(*_args) -> None:
    os.kill(os.getpid(), signal.SIGINT)


def _let_handlers_run() -> None:
    """Python runs a signal's handler between bytecodes of the main thread: give it some."""
    for _ in range(1000):
        pass


def test_ctrl_c_in_a_block_is_raised_when_the_block_ends():
    reached_end = False
    with pytest.raises(KeyboardInterrupt):
        with interrupts_deferred():
            _interrupt_this_process()
            _let_handlers_run()
            reached_end = True
    assert reached_end
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_a_second_ctrl_c_in_the_block_is_raised_at_once():
    reached_end = False
    with pytest.raises(KeyboardInterrupt):
        with interrupts_deferred():
            _interrupt_this_process()
            _let_handlers_run()
            _interrupt_this_process()
            _let_handlers_run()
            reached_end = True
    assert not reached_end
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_sigterm_is_held_and_handled_by_its_own_handler():
    seen = []
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: seen.append(signum))
    try:
        with interrupts_deferred():
            os.kill(os.getpid(), signal.SIGTERM)
            _let_handlers_run()
            assert seen == []
        assert seen == [signal.SIGTERM]
    finally:
        signal.signal(signal.SIGTERM, previous)


def test_an_ignored_signal_stays_ignored():
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        with interrupts_deferred():
            assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
            _interrupt_this_process()
            _let_handlers_run()
    finally:
        signal.signal(signal.SIGINT, previous)


def test_outside_the_main_thread_the_block_changes_nothing():
    failures = []

    def body():
        try:
            with interrupts_deferred():
                pass
        except BaseException as exc:   # signal.signal would raise ValueError in this thread
            failures.append(exc)

    thread = threading.Thread(target=body)
    thread.start()
    thread.join()
    assert failures == []


def test_ctrl_c_while_a_batch_is_written_stores_the_batch_then_interrupts(db):
    run = start(db)
    event.listen(db._writer, "commit", _interrupt_this_process)
    try:
        with pytest.raises(KeyboardInterrupt):
            db.add_records(run, [make_record(0), make_record(1)])
    finally:
        event.remove(db._writer, "commit", _interrupt_this_process)
    assert [r.trial for r in db.history(run)] == [0, 1]


def test_ctrl_c_while_a_connection_is_returned_logs_no_traceback(db, caplog):
    run = start(db)
    db.add_records(run, [make_record(0)])
    event.listen(db._engine, "reset", _interrupt_this_process)
    try:
        with caplog.at_level(logging.ERROR, logger="sqlalchemy"), pytest.raises(KeyboardInterrupt):
            db.history(run)
    finally:
        event.remove(db._engine, "reset", _interrupt_this_process)
    assert [r.getMessage() for r in caplog.records if r.name.startswith("sqlalchemy")] == []
    assert [r.trial for r in db.history(run)] == [0]
