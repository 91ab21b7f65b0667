"""Pools of worker processes that start clean, leave Ctrl-C to their owner and die with it.

    pool = start_pool(4, preload=[__name__], initializer=set_up, initargs=(data,))
    try:
        results = list(pool.map(job, items))
    finally:
        stop_pool(pool, kill=interrupted)

Why "forkserver" and not "fork". The owner may run threads that hold locks at the moment
of a fork (a Ray driver's gRPC threads, a measuring thread, a feature pool's queue
threads, an OpenMP runtime's team), and a child that inherits such a lock hangs for
ever. The fork server is a fresh single-threaded process that preloads ``preload``; each
worker forks from it, and it exits when its owner and the workers have.

Why the workers do not import the owner's ``__main__``. Multiprocessing runs the main
script again in every new worker (as ``__mp_main__``) so that functions defined there can
be unpickled; a user's script that calls ``tune()`` at its top level, with no
``if __name__ == "__main__":`` guard, would tune again in each worker. The jobs sent here
are functions of this package's modules, so the workers leave the main script alone.

Why a ``ProcessPoolExecutor``. A worker that dies in the middle of a job (a crash, the
OOM killer) breaks the pool: the owner's ``map`` raises ``BrokenProcessPool`` where a
``multiprocessing.Pool`` would wait for the lost result for ever.

Why the workers ignore SIGINT and die with the owner. A Ctrl-C reaches the whole
process group, workers included; the owner alone handles it and stops the pool. The
workers' parent is the fork server, which lives as long as any worker does (each holds
its keep-alive pipe), so they watch the owner itself (``die_with``), or the two would
wait on each other for ever after an owner killed with SIGKILL.
"""
from __future__ import annotations

import os
import threading
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import context as mp_context
from multiprocessing import spawn
from typing import Callable, Sequence

# Set while this thread starts one of the pool's workers: its preparation data then leaves
# out the main module.
_starting_worker = threading.local()


def _preparation_data(name: str, _original=spawn.get_preparation_data) -> dict:
    data = _original(name)
    if getattr(_starting_worker, "active", False):
        data.pop("init_main_from_path", None)
        data.pop("init_main_from_name", None)
    return data


# The fork server's process launcher asks ``spawn.get_preparation_data`` what a new process
# needs (sys.path, the working directory, the main module). Wrapped once; it changes
# nothing for processes other than the pool's workers.
if not getattr(spawn.get_preparation_data, "_leaves_out_main", False):
    _preparation_data._leaves_out_main = True
    spawn.get_preparation_data = _preparation_data


class _WorkerProcess(mp_context.ForkServerProcess):
    """A fork-server process that does not import the main script."""

    @staticmethod
    def _Popen(process_obj):
        _starting_worker.active = True
        try:
            return mp_context.ForkServerProcess._Popen(process_obj)
        finally:
            _starting_worker.active = False


class _WorkerContext(mp_context.ForkServerContext):
    Process = _WorkerProcess


def start_pool(workers: int, *, preload: Sequence[str], initializer: Callable | None = None,
               initargs: tuple = ()) -> ProcessPoolExecutor:
    """A pool of ``workers`` processes forked from a fork server that imported ``preload``
    (module names); each runs ``initializer(*initargs)`` (pickled to it) once, first.
    ``initializer`` and the jobs must be functions of importable modules, not of the main
    script (which the workers do not import)."""
    context = _WorkerContext()
    context.set_forkserver_preload(list(preload))
    return ProcessPoolExecutor(workers, mp_context=context, initializer=_start_worker,
                               initargs=(os.getpid(), initializer, initargs))


def stop_pool(pool: ProcessPoolExecutor, *, kill: bool = False) -> None:
    """Stop ``pool``: jobs not started are cancelled; the ones running are finished, or with
    ``kill`` (the owner was interrupted or failed) their workers are killed at once."""
    if kill:
        # The executor has no public way to stop a running job before Python 3.14
        # (``terminate_workers``); its ``_processes`` maps pid -> Process.
        for process in list((getattr(pool, "_processes", None) or {}).values()):
            process.kill()
    pool.shutdown(wait=not kill, cancel_futures=True)


def _start_worker(owner_pid: int, initializer: Callable | None, initargs: tuple) -> None:
    import signal

    from backends.process import die_with

    die_with(owner_pid)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if initializer is not None:
        initializer(*initargs)
