"""The runner of the ``cuda`` kind: candidates measured on the GPU by a process that owns it.

``CudaRunner`` is ``runner.LocalRunner`` with the GPU's measuring process
(``runner_worker_cuda``): the same pipes and messages, the same per-candidate timeout
(a hung kernel's process is killed), the same rounds rule (``runner.measure_in_rounds``)
and the same final timing, here next to cuBLAS. A kernel that faults takes its process
and CUDA context with it; the next candidate gets a fresh one, so it costs one trial.
``run`` raises ``targets.MeasureUnavailable`` where no GPU is visible.

``SimulatedCudaRunner`` measures the ``cuda_sim`` kind the same way, with the emulator
standing in for the GPU (``runner_worker_sim``): what CI runs the loop with.
"""
from __future__ import annotations

from .runner import LocalRunner


class CudaRunner(LocalRunner):
    """Measures CUDA builds (CUBINs with their launch manifests) of one task at a time."""

    worker_module = "autotune.runner_worker_cuda"


class SimulatedCudaRunner(LocalRunner):
    """Measures ``cuda_sim`` builds: the emulator checks each candidate against the
    reference, an analytic model gives its time (``backends.cuda_sim``); never a GPU."""

    worker_module = "autotune.runner_worker_sim"
