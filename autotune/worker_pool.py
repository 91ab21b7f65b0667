"""Pools of worker processes that start clean, leave Ctrl-C to their owner and die with it.

    pool = start_pool(4, preload=[__name__], initializer=set_up, initargs=(data,))
    try:
        results = list(pool.map(job, items))
    finally:
        stop_pool(pool, kill=interrupted)

Why "forkserver" and not "fork". The owner may run threads that hold locks at the moment
of a fork (a Ray driver's gRPC threads, a measuring thread, a feature pool's queue
threads, an OpenMP runtime's team), and a child that inherits such a lock hangs for
ever. The fork server is a fresh single-threaded process that preloads ``preload`` (not
the caller's ``__main__``, which need not guard its top level); each worker forks from it,
and it exits when its owner and the workers have.

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
from concurrent.futures import ProcessPoolExecutor
from typing import Callable, Sequence


def start_pool(workers: int, *, preload: Sequence[str], initializer: Callable | None = None,
               initargs: tuple = ()) -> ProcessPoolExecutor:
    """A pool of ``workers`` processes forked from a fork server that imported ``preload``
    (module names); each runs ``initializer(*initargs)`` (pickled to it) once, first."""
    import multiprocessing

    context = multiprocessing.get_context("forkserver")
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
