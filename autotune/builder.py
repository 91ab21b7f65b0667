"""The builder: configs to compiled kernels, in parallel, each failure one status.

For a batch it applies each config to a fresh schedule, lowers it and generates the
target's source in this process (a few milliseconds each), then compiles the distinct
sources with the target's backend (gcc for cpu, NVRTC for cuda: ``backends.backend_for``),
one compilation per worker slot at a time, each with a timeout. Identical sources in a
batch (knobs that change nothing) compile once, and the backends' content-addressed
compile cache makes a source seen in an earlier run or process free.

Failures map to statuses by their type (``backends.errors``):

    schedule.config.ConfigError, backends.ResourceLimitError   invalid
    backends.BuildTimeout                                      timeout
    backends.BuildError, te.TEError, NotImplementedError       compile_error
"""
from __future__ import annotations

import hashlib
import os
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor

from backends import BuildError, BuildTimeout, ResourceLimitError, backend_for
from schedule.config import ConfigError
from te.errors import TEError

from .measure import BuildResult, Builder, MeasureInput, Status


class LocalBuilder(Builder):
    """Compiles candidates of any target with ``n_workers`` concurrent compilations
    (default: one per core)."""

    def __init__(self, n_workers: int | None = None, timeout: float = 60.0):
        self.n_workers = n_workers or os.cpu_count() or 1
        self.timeout = timeout
        self._backends: dict = {}

    def backend(self, target):
        """The backend of ``target`` (one object per target, reused across batches)."""
        if target not in self._backends:
            self._backends[target] = backend_for(target)
        return self._backends[target]

    def build(self, inputs: list[MeasureInput]) -> list[BuildResult]:
        results: list[BuildResult | None] = [None] * len(inputs)
        jobs: dict[str, tuple] = {}  # source key -> (backend, source)
        pending: dict[str, list[int]] = {}
        codegen_s: dict[int, float] = {}
        for n, inp in enumerate(inputs):
            t0 = time.perf_counter()
            try:
                source = self.source(inp)
            except (ConfigError, ResourceLimitError) as exc:
                results[n] = BuildResult(Status.INVALID, error=str(exc), build_s=time.perf_counter() - t0)
                continue
            except (TEError, NotImplementedError, BuildError) as exc:
                results[n] = BuildResult(Status.COMPILE_ERROR, error=f"{type(exc).__name__}: {exc}",
                                         build_s=time.perf_counter() - t0)
                continue
            backend = self.backend(inp.task.target)
            key = hashlib.sha256(f"{backend.target}\0{source}".encode()).hexdigest()[:24]
            jobs[key] = (backend, source)
            pending.setdefault(key, []).append(n)
            codegen_s[n] = time.perf_counter() - t0  # added to the compile time below
        with ThreadPoolExecutor(max_workers=self.n_workers) as pool:
            futures = {key: pool.submit(self._compile, *jobs[key]) for key in pending}
            for key, future in futures.items():
                status, artifact, error, seconds = future.result()
                for n in pending[key]:
                    results[n] = BuildResult(status, artifact, key, error, build_s=codegen_s[n] + seconds)
        return results  # type: ignore[return-value]

    def source(self, inp: MeasureInput) -> str:
        """The source of one candidate in its target's language (lowering checks the config first)."""
        return self.backend(inp.task.target).generate_source(inp.task.lower(inp.config))

    def _compile(self, backend, source: str):
        t0 = time.perf_counter()
        try:
            artifact = backend.compile_source(source, timeout=self.timeout)
        except BuildTimeout as exc:
            return Status.TIMEOUT, None, str(exc), time.perf_counter() - t0
        except ResourceLimitError as exc:
            return Status.INVALID, None, str(exc), time.perf_counter() - t0
        except BuildError as exc:
            return Status.COMPILE_ERROR, None, str(exc), time.perf_counter() - t0
        except (OSError, subprocess.SubprocessError) as exc:
            return Status.COMPILE_ERROR, None, f"{type(exc).__name__}: {exc}", time.perf_counter() - t0
        return Status.OK, str(artifact), None, time.perf_counter() - t0
