"""The simulated GPU's measuring process: runs candidates on the emulator, times them by model.

It speaks ``runner_worker``'s protocol (started by ``runner_cuda.SimulatedCudaRunner``,
``python -m autotune.runner_worker_sim INBOX OUTBOX TUNER_PID``) for the ``cuda_sim``
kind (``backends.cuda_sim``):

    ("setup", workload_json, seed)          -> ("ready", None)
    ("run", artifact, function, options)    -> (status, payload)
    ("final", artifacts, function, options) -> (status, payload)

"run" executes the candidate's emulation on outputs prefilled with NaN and compares them
with the NumPy reference, exactly as a GPU candidate is checked (a wrong answer is
``wrong_answer``, an out-of-bounds access ``runtime_error``), and then reports the
model's seconds per launch as the repeats: deterministic, so every round agrees. "final"
reports the same figure for every round and no anchor: there is no simulated cuBLAS.
"""
from __future__ import annotations

import sys

from tuning_db.records import Status

from .runner_worker import Workspace, main, prefill

#: Repeats reported per round (the model's figure each time).
REPEATS = 3


def _checked(ws: Workspace, artifact: str):
    """(status, payload): the model's seconds if the emulation matches the reference."""
    from backends.cuda_sim import EmulatedLauncher
    from backends.emulator import EmulationFault

    launcher = EmulatedLauncher(artifact)
    prefill(ws.outputs)
    try:
        launcher(ws.inputs + ws.outputs)
    except EmulationFault as exc:
        return Status.RUNTIME_ERROR, f"the emulator caught an out-of-bounds access: {exc}"
    problem = ws.mismatch(ws.outputs)
    if problem is not None:
        return Status.WRONG_ANSWER, problem
    return Status.OK, launcher.sim.seconds


def _run(ws: Workspace, artifact: str, function: str, options: dict):
    status, payload = _checked(ws, artifact)
    return (status, [payload] * REPEATS) if status is Status.OK else (status, payload)


def _final(ws: Workspace, artifacts: list[str], function: str, options: dict):
    from .final_timing import InterleavedTimes

    times = InterleavedTimes([[] for _ in artifacts], None)
    for i, artifact in enumerate(artifacts):
        status, payload = _checked(ws, artifact)
        if status is Status.OK:
            times.candidates[i] = [payload] * options["rounds"]
        else:
            times.errors[i] = f"{status.value}: {payload}"
    return Status.OK, times


if __name__ == "__main__":
    main(sys.argv[1:], run=_run, final=_final)
