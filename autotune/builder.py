"""The builder: configs to compiled kernels, in parallel, each failure one status.

For a batch it applies each config to a fresh schedule, lowers it and generates the
target's source in this process (a few milliseconds each), and compiles the distinct
sources with the target's backend (gcc for cpu, NVRTC for cuda: ``backends.backend_for``),
one compilation per worker slot at a time, each with a timeout. A source compiles as soon
as it is generated, so the compilers run while the rest of the batch is lowered. Identical
sources in a batch (knobs that change nothing) compile once, and the backends'
content-addressed compile cache makes a source seen in an earlier run or process free.

Candidates too big to be worth compiling are pruned before the compiler starts: more
than ``max_unrolled`` copies of a loop body from nested unrolled loops, or a source
longer than ``max_source_chars`` (``invalid``, the message names the cap). A compiler
that runs past the timeout is killed with every process it started
(``backends.process.run_group``), and an interrupted build (Ctrl-C) kills the compiles
in flight instead of waiting for them.

Failures map to statuses by their type (``backends.errors``):

    schedule.config.ConfigError, backends.ResourceLimitError   invalid (BuildLimitError: a cap above)
    backends.BuildTimeout                                      timeout
    backends.BuildError, te.TEError, NotImplementedError       compile_error
"""
from __future__ import annotations

import hashlib
import os
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Iterable, Iterator

from backends import BuildError, BuildTimeout, ResourceLimitError, backend_for
from backends.errors import BuildLimitError
from backends.process import kill_running_groups
from schedule import ir
from schedule.passes import StmtVisitor
from schedule.config import ConfigError
from te.errors import TEError

from .measure import BuildResult, Builder, MeasureInput, Status


#: Most copies of one statement that nested unrolled loops may make. The spaces' unroll
#: budgets stay far below; a hand-made or pathological schedule above it would keep the
#: compiler busy for minutes.
MAX_UNROLLED = 4096
#: Longest generated source a candidate may have, in characters (generated kernels are a
#: few thousand).
MAX_SOURCE_CHARS = 1 << 20


class LocalBuilder(Builder):
    """Compiles candidates of any target with ``n_workers`` concurrent compilations
    (default: one per core), each within ``timeout`` seconds; candidates over
    ``max_unrolled`` or ``max_source_chars`` are ``invalid`` without compiling."""

    def __init__(self, n_workers: int | None = None, timeout: float = 60.0, max_unrolled: int = MAX_UNROLLED,
                 max_source_chars: int = MAX_SOURCE_CHARS):
        self.n_workers = n_workers or os.cpu_count() or 1
        self.timeout = timeout
        self.max_unrolled = max_unrolled
        self.max_source_chars = max_source_chars
        self._backends: dict = {}

    def backend(self, target):
        """The backend of ``target`` (one object per target, reused across batches)."""
        if target not in self._backends:
            self._backends[target] = backend_for(target)
        return self._backends[target]

    def build(self, inputs: list[MeasureInput]) -> list[BuildResult]:
        results: list[BuildResult | None] = [None] * len(inputs)
        generated: dict[int, tuple[str, float]] = {}  # input -> (source key, seconds to generate it)
        compiled = self.compile_all(self._sources(inputs, results, generated))
        for n, (key, codegen_s) in generated.items():
            results[n] = replace(compiled[key], build_s=codegen_s + compiled[key].build_s)
        return results  # type: ignore[return-value]

    def _sources(self, inputs: list[MeasureInput], results: list, generated: dict) -> Iterator:
        """``(key, (backend, source))`` for each distinct source of ``inputs``, as it is
        generated: the compiles of the first run while the later ones are lowered. An input
        that fails before compiling gets its result in ``results``; one that does, its
        source's key and its seconds of lowering and generating in ``generated``."""
        seen: set[str] = set()
        for n, inp in enumerate(inputs):
            t0 = time.perf_counter()
            try:
                source = self.source(inp)
                self._check_source_size(source)
            except (ConfigError, ResourceLimitError) as exc:
                results[n] = BuildResult(Status.INVALID, error=str(exc), build_s=time.perf_counter() - t0)
                continue
            except (TEError, NotImplementedError, BuildError) as exc:
                results[n] = BuildResult(Status.COMPILE_ERROR, error=f"{type(exc).__name__}: {exc}",
                                         build_s=time.perf_counter() - t0)
                continue
            backend = self.backend(inp.task.target)
            key = hashlib.sha256(f"{backend.target}\0{source}".encode()).hexdigest()[:24]
            generated[n] = (key, time.perf_counter() - t0)  # added to the compile time
            if key not in seen:
                seen.add(key)
                yield key, (backend, source)

    def compile_all(self, jobs: Iterable[tuple[str, tuple]]) -> dict[str, BuildResult]:
        """Compile each distinct source (``(key, (backend, source))`` pairs, taken as they
        come): ``{key: BuildResult}`` whose ``build_s`` is the compile time alone. Here: a
        thread per worker slot, each running the compiler as a child process, a compile
        starting as soon as its source is there (``autotune.cluster`` compiles on other
        machines)."""
        futures = {}
        with ThreadPoolExecutor(max_workers=self.n_workers) as pool:
            try:
                for key, job in jobs:
                    futures[key] = pool.submit(compile_with_status, *job, self.timeout)
                done: dict[str, BuildResult] = {}
                for key, future in futures.items():
                    status, artifact, error, seconds = future.result()
                    done[key] = BuildResult(status, artifact, key, error, build_s=seconds)
            except BaseException:  # interrupted: the pool must not wait for the compiles in flight
                for future in futures.values():
                    future.cancel()
                kill_running_groups()
                raise
        return done

    def source(self, inp: MeasureInput) -> str:
        """The source of one candidate in its target's language (lowering checks the config
        first; a candidate over ``max_unrolled`` raises ``BuildLimitError``)."""
        func = inp.task.lower(inp.config)
        copies = unrolled_copies(func)
        if copies > self.max_unrolled:
            raise BuildLimitError(f"unrolled loops make {copies} copies of a statement, over the builder's "
                                  f"cap of {self.max_unrolled} (LocalBuilder max_unrolled)")
        return self.backend(inp.task.target).generate_source(func)

    def _check_source_size(self, source: str) -> None:
        if len(source) > self.max_source_chars:
            raise BuildLimitError(f"the source has {len(source)} characters, over the builder's cap of "
                                  f"{self.max_source_chars} (LocalBuilder max_source_chars)")

def compile_with_status(backend, source: str, timeout: float) -> tuple:
    """Compile ``source`` with ``backend``: ``(status, artifact path or None, error, seconds)``,
    each failure mapped to its status by type (the module docstring). The cluster's compile
    task runs it on other machines (``autotune.cluster.nodes``)."""
    t0 = time.perf_counter()
    try:
        artifact = backend.compile_source(source, timeout=timeout)
    except BuildTimeout as exc:
        return Status.TIMEOUT, None, str(exc), time.perf_counter() - t0
    except ResourceLimitError as exc:
        return Status.INVALID, None, str(exc), time.perf_counter() - t0
    except BuildError as exc:
        return Status.COMPILE_ERROR, None, str(exc), time.perf_counter() - t0
    except (OSError, subprocess.SubprocessError) as exc:
        return Status.COMPILE_ERROR, None, f"{type(exc).__name__}: {exc}", time.perf_counter() - t0
    return Status.OK, str(artifact), None, time.perf_counter() - t0


def unrolled_copies(func: ir.LoweredFunc) -> int:
    """The most copies of one statement that unrolling makes: the largest product of the
    trip counts of nested unrolled loops (a loop of unknown trip count is not unrolled)."""
    counter = _UnrolledCopies()
    counter.visit(func.body)
    return counter.most


class _UnrolledCopies(StmtVisitor):
    """At each store, the product of the trip counts of the unrolled loops around it."""

    def __init__(self):
        super().__init__()
        self.most = 1

    def visit_BufferStore(self, s: ir.BufferStore) -> None:
        copies = 1
        for loop in self.loops:
            if loop.kind == ir.UNROLLED:
                copies *= ir.max_trip_count(loop.extent) or 1
        self.most = max(self.most, copies)
