"""The measuring process: loads compiled kernels, verifies them, times them.

It runs apart from the tuner (``python -m autotune.runner_worker INBOX OUTBOX TUNER_PID``,
started by ``runner.LocalRunner`` with two pipes), so a kernel that crashes or hangs takes
only this process down; ``runner.LocalRunner`` notices, records the trial and starts a new
one. It dies with the tuner, even one killed with SIGKILL (``backends.process.
die_with_parent``), and leaves when its inbox closes. Messages over a pipe:

    ("setup", workload_json, seed)          -> ("ready", None)
    ("run", artifact, function, options)    -> (status, payload)
    ("final", artifacts, function, options) -> (status, payload)

where status is a ``tuning_db.Status``: ok (payload: list of seconds; for "final" an
``final_timing.InterleavedTimes``), wrong_answer or runtime_error (payload: a message). A
reply may carry a third element, "exiting": the process found its device unusable (a
GPU's after a fault) and exits; the runner starts another for the next message.
"final" times the given kernels and the anchor (NumPy's version of the workload, on the
same inputs) in interleaved rounds, on copies of the arrays placed anew for every round
(``final_timing``). ``workload_json`` is the task's workload as
``te.serialize`` writes it (``Workload.dag_json``): the DAG is rebuilt from it here, never
looked up by name, so workloads registered in the user's script, or made from tensors,
measure like the library's.

Timing protocol (CPU): inputs the kernel takes packed at build time (its shared object's
prepack table, ``backends.cpu.read_prepacks``: dense's weights in panels) are packed once,
untimed, as a user packs them once; then one verification call on outputs prefilled with NaN (or a
sentinel), compared with the reference; then one round of ``timing_protocol.time_round``
(a warm-up, then repeats until ``min_repeats`` and ``min_time``, each after the kernel's
arrays were evicted from the caches: ``timing_protocol.evicting_flush``), the
protocol the anchors use too. A candidate already ``slow_factor`` times slower than the
best so far stops after a call: it cannot win, and its one timing ranks it. The runner
asks for several rounds of the same kernel and keeps the fastest (see ``runner``).
"""
from __future__ import annotations

import ctypes
import os
import statistics
import time
import traceback

import numpy as np

from backends.cache_eviction import prepare as prepare_eviction
from tuning_db.records import Status

from .timing_protocol import anchor_with_flush, evicting_flush, time_round


class Workspace:
    """Inputs, references and output buffers of the current task (on the host; the GPU's
    measuring process moves inputs and outputs to the device, the simulated one uses it
    as it is)."""

    def __init__(self, workload_json: str, seed: int):
        import te

        from .verify import reference_checks

        wl = te.workload_from_json(workload_json)
        self.workload = wl
        self.inputs = wl.random_inputs(seed)
        self.references = wl.reference(*self.inputs)
        self.checks = reference_checks(wl.outputs, self.references)
        self.outputs = [np.empty(r.shape, dtype=r.dtype) for r in self.references]

    def mismatch(self, outputs) -> str | None:
        """How host ``outputs`` differ from the references, the first that does (None: they match)."""
        for out, check in zip(outputs, self.checks):
            problem = check(out)
            if problem is not None:
                return problem
        return None


class CpuWorkspace(Workspace):
    """The CPU measuring process's workspace: it also builds the routine that evicts a
    kernel's arrays before each timed repeat (``timing_protocol.evicting_flush``) while the
    process sets up, so that no candidate's timeout pays for that compile."""

    def __init__(self, workload_json: str, seed: int):
        super().__init__(workload_json, seed)
        prepare_eviction()


def prefill(outputs: list[np.ndarray]) -> None:
    """Fill output buffers with what no kernel computes (NaN, or the integer maximum), so
    that an element a kernel leaves unwritten is caught by the comparison."""
    for out in outputs:
        if out.dtype.kind == "f":
            out.fill(np.nan)
        else:
            out.fill(np.iinfo(out.dtype).max if out.dtype.kind in "iu" else 1)


def _kernel(lib, function: str, n_args: int):
    """The kernel ``function`` of a loaded library, taking ``n_args`` data pointers."""
    fn = getattr(lib, function)
    fn.argtypes = [ctypes.c_void_p] * n_args
    fn.restype = None
    return fn


def _checked_call(ws: Workspace, fn, ptrs: list[int], outputs: list[np.ndarray]) -> tuple[float, str | None]:
    """One call of ``fn`` on outputs prefilled with what no kernel computes: its seconds, and
    how ``outputs`` differ from the references (None when they match)."""
    prefill(outputs)
    t0 = time.perf_counter()
    fn(*ptrs)
    seconds = time.perf_counter() - t0
    return seconds, ws.mismatch(outputs)


def _run(ws: Workspace, artifact: str, function: str, options: dict):
    from backends.cpu import packed_arrays

    lib = ctypes.CDLL(artifact)
    try:
        arrays = packed_arrays(lib, function, ws.inputs + ws.outputs)  # inputs packed at build time: untimed
        fn = _kernel(lib, function, len(arrays))
        ptrs = [a.ctypes.data for a in arrays]
        first, problem = _checked_call(ws, fn, ptrs, ws.outputs)
        if problem is not None:
            return Status.WRONG_ANSWER, problem
        # The verifying call is the round's warm-up; one too slow to win ends the round.
        return Status.OK, time_round(fn, ptrs, min_repeats=options["min_repeats"],
                                     max_repeats=options["max_repeats"], min_time=options["min_time"],
                                     flush=evicting_flush(arrays), best_cost=options.get("best_cost"),
                                     slow_factor=options["slow_factor"], warmed_up=first)
    finally:
        _dlclose(lib)


def _final(ws: Workspace, artifacts: list[str], function: str, options: dict):
    """Verify each kernel once, then time them with the anchor in interleaved rounds, the
    arrays placed anew for every round (``final_timing.placed_copies``)."""
    import random

    from backends.cpu import packed_arrays

    from .anchor import numpy_equivalent_on, workload_has_numpy_anchor
    from .final_timing import interleaved_rounds, placed_copies, until_precise

    n_args = len(ws.inputs) + len(ws.outputs)
    has_anchor = options["anchor"] and workload_has_numpy_anchor(ws.workload)
    libs = [ctypes.CDLL(path) for path in artifacts]
    try:
        kernels = [_kernel(lib, function, n_args) for lib in libs]
        verified: set[int] = set()
        rng = random.Random(0)
        now: dict = {}  # this round's arrays and the anchor on them

        def start_round(round_: int) -> None:
            inputs, outputs = (placed_copies(ws.inputs, rng), placed_copies(ws.outputs, rng))
            now.update(inputs=inputs, outputs=outputs,
                       anchor=anchor_with_flush(numpy_equivalent_on(ws.workload, inputs), inputs)
                       if has_anchor else None)  # (the anchor's call, its flush)

        def one_round(fn, flush, args=()) -> float:
            return statistics.median(time_round(fn, args, min_repeats=options["min_repeats"],
                                                max_repeats=options["max_repeats"], min_time=options["min_time"],
                                                flush=flush))

        def time_candidate(i: int) -> float:
            # Its inputs packed at build time are packed now, outside the timing, and dropped
            # after it (``arrays`` holds them while the kernel reads their raw pointers): the
            # final timing's pool of candidates holds one packed copy of the weights at a time.
            arrays = packed_arrays(libs[i], function, now["inputs"] + now["outputs"])
            pointers = [a.ctypes.data for a in arrays]
            if i not in verified:
                _, problem = _checked_call(ws, kernels[i], pointers, now["outputs"])
                if problem is not None:
                    raise ValueError(f"{Status.WRONG_ANSWER.value}: {problem}")
                verified.add(i)
            return one_round(kernels[i], evicting_flush(arrays), pointers)

        time_anchor = (lambda: one_round(*now["anchor"])) if has_anchor else None
        return Status.OK, interleaved_rounds(len(kernels), time_candidate, time_anchor, options["rounds"],
                                             pause=options["pause"], settle=options["settle"],
                                             start_round=start_round, **until_precise(options))
    finally:
        for lib in libs:
            _dlclose(lib)


def _dlclose(lib) -> None:
    try:
        import _ctypes

        _ctypes.dlclose(lib._handle)
    except (AttributeError, OSError):
        pass


def serve(inbox, outbox, workspace_class=None, run=None, final=None, fatal=lambda exc: False) -> None:
    """Answer setup/run/final messages from ``inbox`` on ``outbox`` until the inbox closes.

    The handlers default to this module's (the CPU's); another device's measuring process
    passes its own (``runner_worker_cuda``, ``runner_worker_sim``). ``fatal(exc)``: whether
    a candidate's exception leaves this process unusable: it replies with a third element,
    "exiting", and exits (the runner starts a new one).
    """
    workspace_class, run, final = workspace_class or Workspace, run or _run, final or _final
    workspace = None
    while True:
        try:
            message = inbox.recv()
        except (EOFError, OSError):
            return
        kind = message[0]
        try:
            if kind == "setup":
                workspace = workspace_class(*message[1:])
                outbox.send(("ready", None))
            elif kind == "run":
                outbox.send(run(workspace, *message[1:]))
            elif kind == "final":
                outbox.send(final(workspace, *message[1:]))
            elif kind == "exit":
                return
        except Exception as exc:  # a failure of this candidate, reported, never fatal to the run
            message = traceback.format_exc(limit=3)[-2000:]
            if fatal(exc):  # say so, so that the runner stops this process and starts another
                outbox.send((Status.RUNTIME_ERROR, message, "exiting"))
                os._exit(3)  # at once: cleaning up a broken device context only raises more errors
            outbox.send((Status.RUNTIME_ERROR, message))


def _pin_openmp_runtime() -> None:
    """Load libgomp once for good: kernels are unloaded after measuring, and the last
    one to go must not take the OpenMP runtime (whose threads live on) with it."""
    try:
        ctypes.CDLL("libgomp.so.1", mode=ctypes.RTLD_GLOBAL)
    except OSError:
        pass


def main(argv: list[str], **handlers) -> None:
    """Serve the pipes named in ``argv`` (INBOX OUTBOX TUNER_PID) with ``handlers`` (``serve``'s)."""
    import signal
    from multiprocessing.connection import Connection

    from backends.process import die_with_parent

    die_with_parent(int(argv[2]))  # nobody else would stop us if the tuner were killed
    _pin_openmp_runtime()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the tuner's to handle; it stops us
    inbox = Connection(int(argv[0]), writable=False)
    outbox = Connection(int(argv[1]), readable=False)
    os.dup2(2, 1)  # stray prints from kernels or libraries must not reach the tuner
    serve(inbox, outbox, **handlers)


if __name__ == "__main__":
    import sys

    main(sys.argv[1:], workspace_class=CpuWorkspace)
