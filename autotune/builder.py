"""The builder: configs to compiled kernels, in parallel, each failure one status.

For a batch it applies each config to a fresh schedule, lowers it and generates C in
this process (a few milliseconds each), then compiles the distinct sources with gcc,
one compiler process per worker slot at a time, each with a timeout. Identical
sources in a batch (knobs that change nothing) compile once, and the content-addressed
compile cache makes a source seen in an earlier run or process free.
"""
from __future__ import annotations

import hashlib
import os
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor

from backends import cpu
from schedule.config import ConfigError
from te.errors import TEError

from .measure import COMPILE_ERROR, INVALID, OK, TIMEOUT, BuildResult, MeasureInput


class LocalBuilder:
    """Compiles candidates with ``n_workers`` concurrent gcc processes (default: one per core)."""

    def __init__(self, n_workers: int | None = None, timeout: float = 60.0):
        self.n_workers = n_workers or os.cpu_count() or 1
        self.timeout = timeout

    def build(self, inputs: list[MeasureInput]) -> list[BuildResult]:
        results: list[BuildResult | None] = [None] * len(inputs)
        sources: dict[str, str] = {}
        pending: dict[str, list[int]] = {}
        codegen_s: dict[int, float] = {}
        for n, inp in enumerate(inputs):
            t0 = time.perf_counter()
            try:
                source = self.source(inp)
            except ConfigError as exc:
                results[n] = BuildResult(INVALID, error=str(exc))
                continue
            except (TEError, NotImplementedError, cpu.BuildError) as exc:
                results[n] = BuildResult(COMPILE_ERROR, error=f"{type(exc).__name__}: {exc}",
                                         build_s=time.perf_counter() - t0)
                continue
            key = hashlib.sha256(source.encode()).hexdigest()[:24]
            sources[key] = source
            pending.setdefault(key, []).append(n)
            codegen_s[n] = time.perf_counter() - t0  # added to the compile time below
        with ThreadPoolExecutor(max_workers=self.n_workers) as pool:
            futures = {key: pool.submit(self._compile, sources[key]) for key in pending}
            for key, future in futures.items():
                status, artifact, error, seconds = future.result()
                for n in pending[key]:
                    results[n] = BuildResult(status, artifact, key, error, build_s=codegen_s[n] + seconds)
        return results  # type: ignore[return-value]

    def source(self, inp: MeasureInput) -> str:
        """The C source of one candidate (lowering checks the config first)."""
        return cpu.generate_source(inp.task.lower(inp.config))

    def _compile(self, source: str):
        t0 = time.perf_counter()
        try:
            path = cpu.compile_source(source, timeout=self.timeout)
        except cpu.BuildError as exc:
            status = TIMEOUT if "timed out" in str(exc) else COMPILE_ERROR
            return status, None, str(exc), time.perf_counter() - t0
        except (OSError, subprocess.SubprocessError) as exc:
            return COMPILE_ERROR, None, f"{type(exc).__name__}: {exc}", time.perf_counter() - t0
        return OK, str(path), None, time.perf_counter() - t0
