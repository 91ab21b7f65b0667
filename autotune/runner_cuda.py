"""The runner of the ``cuda`` kind: its interface, and a refusal until GPU measuring exists.

The tuning loop builds CUDA candidates (NVRTC, ``LocalBuilder``) but does not yet time
them on a GPU: measuring needs a worker that loads the CUBINs through CuPy, verifies and
times them with CUDA events (``backends.cuda_timing``). Until then ``CudaRunner.run``
raises ``MeasureUnavailable`` with the reason (no GPU here, or not supported yet), so no
run records made-up timings. ``bench/gpu_matmul.py`` tunes matmul on a GPU meanwhile.
"""
from __future__ import annotations

from .measure import BuildResult, MeasureResult, Runner
from .targets import measure_problem, MeasureUnavailable


class CudaRunner(Runner):
    """Measures CUDA builds of one task at a time (interface only; see the module docstring)."""

    def __init__(self, timeout: float = 10.0, options=None, seed: int = 0):
        self.timeout = timeout
        self.options = options
        self.seed = seed

    def run(self, task, builds: list[BuildResult], best_cost: float | None = None) -> list[MeasureResult]:
        problem = measure_problem(task.target) or "GPU measuring is not implemented yet"
        raise MeasureUnavailable(f"cannot measure on {task.target}: {problem}")
