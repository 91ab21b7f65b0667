"""The GPU's measuring process: loads CUBINs, verifies them, times them with CUDA events.

It speaks ``runner_worker``'s protocol over the same two pipes (started by
``runner_cuda.CudaRunner``: ``python -m autotune.runner_worker_cuda INBOX OUTBOX
TUNER_PID``), and dies with the tuner like it:

    ("setup", workload_json, seed)          -> ("ready", None)
    ("run", artifact, function, options)    -> (status, payload)
    ("final", artifacts, function, options) -> (status, payload)

It owns the GPU of the run (``CUDA_VISIBLE_DEVICES`` chooses which): the inputs are made
on the host from the seed, copied to the device once, and the references computed once
by the NumPy evaluator (``te.Workload.reference``), so every candidate is checked against
the same arrays. An artifact is a CUBIN with its launch manifest beside it
(``backends.cuda_launch``).

Protocol per candidate ("run"): outputs prefilled with NaN (a sentinel for integers) on
the device, one launch, copied back and compared with the reference (``verify``), then
one round of ``backends.cuda_timing.do_bench``: warm-up, repeats each after an L2 flush
outside the CUDA events, until ``min_repeats`` and ``min_time``; a candidate whose first
estimate is ``slow_factor`` times the best so far stops there. The runner asks for
rounds as on the CPU (``runner.measure_in_rounds``).

A failed launch (an illegal address, a launch error) leaves the CUDA context unusable:
the trial is a ``runtime_error``, and this process exits after replying, so the runner
starts a fresh one for the next candidate.

"final" times the kernels and cuBLAS (``anchor.cupy_equivalent_on``, on the same device
arrays) in ``final_timing.interleaved_rounds``, each reading a ``do_bench`` round's median.
"""
from __future__ import annotations

import statistics
import sys

from tuning_db.records import Status

from .runner_worker import Workspace, main, prefill


class _DeviceWorkspace(Workspace):
    """The task's inputs and output buffers on the device, its references on the host."""

    def __init__(self, workload_json: str, seed: int):
        import cupy

        super().__init__(workload_json, seed)
        self.inputs = [cupy.asarray(a) for a in self.inputs]
        self.outputs = [cupy.empty(r.shape, dtype=r.dtype) for r in self.references]


def _checked_launch(ws: _DeviceWorkspace, launcher) -> str | None:
    """Launch once on prefilled outputs; how they differ from the references (None: they match)."""
    import cupy

    prefill(ws.outputs)
    launcher.launch(ws.inputs + ws.outputs)
    cupy.cuda.Device().synchronize()
    return ws.mismatch([cupy.asnumpy(out) for out in ws.outputs])


def _round(fn, options: dict, give_up_above: float | None = None) -> list[float]:
    from backends.cuda_timing import do_bench

    return do_bench(fn, warmup_ms=10.0, rep_ms=1e3 * options["min_time"], min_repeats=options["min_repeats"],
                    max_repeats=options["max_repeats"], give_up_above=give_up_above)


def _run(ws: _DeviceWorkspace, artifact: str, function: str, options: dict):
    from backends.cuda_launch import CubinLauncher

    launcher = CubinLauncher.load(artifact)
    problem = _checked_launch(ws, launcher)
    if problem is not None:
        return Status.WRONG_ANSWER, problem
    best = options.get("best_cost")
    give_up = None if best is None else options["slow_factor"] * best
    arrays = ws.inputs + ws.outputs
    return Status.OK, _round(lambda: launcher.launch(arrays), options, give_up)


def _final(ws: _DeviceWorkspace, artifacts: list[str], function: str, options: dict):
    """Verify each kernel once, then time them with cuBLAS in interleaved rounds."""
    from backends.cuda_launch import CubinLauncher

    from .anchor import cupy_equivalent_on
    from .final_timing import interleaved_rounds, until_precise

    launchers = [CubinLauncher.load(path) for path in artifacts]
    anchor = cupy_equivalent_on(ws.workload, ws.inputs) if options["anchor"] else None
    arrays = ws.inputs + ws.outputs
    verified: set[int] = set()

    def time_candidate(i: int) -> float:
        if i not in verified:
            problem = _checked_launch(ws, launchers[i])
            if problem is not None:
                raise ValueError(f"{Status.WRONG_ANSWER.value}: {problem}")
            verified.add(i)
        return statistics.median(_round(lambda: launchers[i].launch(arrays), options))

    time_anchor = (lambda: statistics.median(_round(anchor, options))) if anchor is not None else None
    return Status.OK, interleaved_rounds(len(launchers), time_candidate, time_anchor, options["rounds"],
                                         pause=options["pause"], settle=0.0, **until_precise(options))


def _context_lost(exc: BaseException) -> bool:
    """Whether ``exc`` came from the CUDA driver or runtime (the context may be unusable)."""
    import cupy

    return isinstance(exc, (cupy.cuda.driver.CUDADriverError, cupy.cuda.runtime.CUDARuntimeError))


if __name__ == "__main__":
    main(sys.argv[1:], workspace_class=_DeviceWorkspace, run=_run, final=_final, fatal=_context_lost)
