"""What runs on the cluster's nodes: a compile task, and the measuring actor of a node.

Nothing here talks to the driver but through return values; the driver side is
``builder`` (compiles), ``runner`` (measurements) and ``executor`` (which nodes).
These are plain classes and functions: ``executor`` wraps them with ``ray.remote``, so
this module imports without Ray and its parts are testable in one process.

``NodeInfo`` says what a node is. Two nodes whose ``fingerprint`` differs (CPU model or
ISA, usable cores, compiler, flags, tool version) time the same kernel differently, so
their timings are never one population: the executor measures on one fingerprint only.
"""
from __future__ import annotations

import os
import platform
from dataclasses import dataclass, replace

from backends import backend_for
from backends.cpu import cache_dir
from schedule.targets import Target, parse_target
from tuning_db.records import default_tool_version

from ..measure import BuildResult, MeasureResult, Status


@dataclass(frozen=True)
class NodeInfo:
    """One node as its measuring actor sees it.

    ``target`` is the target spec parsed on the node (its facts: ISA, vector width,
    usable cores, caches); ``described`` the ``tuning_db.TargetInfo`` its records carry,
    whose host names the node (``hostname/ray node id``), so two nodes of one machine
    stay apart.
    """

    node_id: str
    target: Target
    described: object  # tuning_db.TargetInfo
    tool_version: str
    niceness: int = 0  # of the measuring actor: above 0, anything else on the node runs first

    @property
    def fingerprint(self) -> tuple:
        """What must be equal for two nodes' timings to be compared."""
        d = self.described
        return (d.kind, d.device, d.compiler, d.flags, self.target.facts, self.tool_version)

    def summary(self) -> str:
        d = self.described
        return f"{d.host}: {d.describe()}, {d.compiler}, {d.flags}, autotune {self.tool_version}"


def host_label(node_id: str) -> str:
    """The host a node's records carry: the machine's name and the Ray node's id (short)."""
    return f"{platform.node()}/{node_id[:12]}"


def describe_node(spec: str, node_id: str) -> NodeInfo:
    """``NodeInfo`` of this node for the target spec ``spec`` (e.g. ``cpu``, ``cpu:avx2``)."""
    from .. import targets

    target = parse_target(spec)
    described = replace(targets.describe(target), host=host_label(node_id))
    return NodeInfo(node_id, target, described, default_tool_version())


def compile_source(target: Target, source: str, timeout: float) -> tuple:
    """Compile ``source`` for ``target`` on this node: ``(status, kernel bytes, error,
    seconds)`` (``builder.compile_with_status``). The bytes travel to the measuring actor,
    which may be on another node."""
    from ..builder import compile_with_status

    status, artifact, error, seconds = compile_with_status(backend_for(target), source, timeout)
    blob = None
    if artifact is not None:
        try:
            with open(artifact, "rb") as f:
                blob = f.read()
        except OSError as exc:
            return Status.COMPILE_ERROR.value, None, f"{type(exc).__name__}: {exc}", seconds
    return status.value, blob, error, seconds


def _undo_worker_niceness() -> int:
    """Run at the default priority again, if allowed; the niceness left.

    Ray starts its workers at niceness 15 (``RAY_worker_niceness``) so that its own daemons
    come first; a kernel timed at that niceness is preempted by every other process on the
    node. Lowering niceness needs privileges (root, CAP_SYS_NICE); without them it stays,
    and the executor warns (start the nodes with ``RAY_worker_niceness=0``)."""
    try:
        if os.getpriority(os.PRIO_PROCESS, 0) > 0:
            os.setpriority(os.PRIO_PROCESS, 0, 0)
    except (OSError, AttributeError):
        pass
    try:
        return os.getpriority(os.PRIO_PROCESS, 0)
    except (OSError, AttributeError):
        return 0


class MeasuringActor:
    """The one measurer of a node: a ``runner.LocalRunner`` (a measuring process that a
    crashing kernel takes down alone) fed with kernels sent as bytes.

    One per node and one call at a time, so two measurements never share a machine. Its
    measuring process runs the kernels' OpenMP threads on every core the node lets it
    use (Ray would otherwise set ``OMP_NUM_THREADS=1`` for it), at the default priority
    when it may (``_undo_worker_niceness``).
    """

    def __init__(self, spec: str, node_id: str):
        niceness = _undo_worker_niceness()
        self.info = replace(describe_node(spec, node_id), niceness=niceness)
        cores = getattr(self.info.target.facts, "cores", None)
        if cores:
            os.environ["OMP_NUM_THREADS"] = str(cores)
        self._dir = cache_dir() / "received"  # kernels built on other nodes, by source hash
        self._dir.mkdir(parents=True, exist_ok=True)
        self._runner = None
        self._task = None

    def describe(self) -> NodeInfo:
        return self.info

    def pids(self) -> list[int]:
        """This actor's process id, and its measuring process's when one runs."""
        proc = self._runner._proc if self._runner is not None else None
        return [os.getpid()] + ([proc.pid] if proc is not None and proc.poll() is None else [])

    def setup(self, dag_json: str, target: Target, seed: int, timeout: float, options) -> str:
        """Make the task ``dag_json`` the one measured next (its inputs are made by the
        measuring process on the first measurement); returns its key."""
        from ..runner import LocalRunner
        from ..task import Task

        task = Task.from_json(dag_json, target)
        if self._task is None or self._task.key != task.key or self._runner.seed != seed:
            self.close()
            self._runner = LocalRunner(timeout=timeout, options=options, seed=seed)
        self._runner.timeout, self._runner.options = timeout, options
        self._task = task
        return task.key

    def measure(self, source_hash: str, blob: bytes, build_s: float, best_cost: float | None) -> MeasureResult:
        """Verify and time one kernel (one round: the driver asks again for later rounds)."""
        build = self._received(source_hash, blob, build_s)
        (result,) = self._runner.run(self._task, [build], best_cost)
        result.where = self.info.described
        return result

    def time_final(self, kernels: list[tuple[str, bytes, float]], options):
        """The final timing of ``kernels`` (source hash, bytes, build seconds) with the
        anchor, on this node (``LocalRunner.time_final``)."""
        builds = [self._received(*kernel) for kernel in kernels]
        times = self._runner.time_final(self._task, builds, options)
        times.where = self.info.described
        return times

    def _received(self, source_hash: str, blob: bytes, build_s: float) -> BuildResult:
        """A kernel sent as bytes, as a build of this node (written once per source hash)."""
        path = self._dir / f"k_{source_hash}.so"
        if not path.exists():
            partial = path.with_name(f"{path.name}.{os.getpid()}.part")
            partial.write_bytes(blob)
            os.replace(partial, path)
        return BuildResult(Status.OK, artifact=str(path), source_hash=source_hash, build_s=build_s)

    def close(self) -> None:
        """Stop the measuring process (it also dies with this actor: ``LocalRunner``)."""
        if self._runner is not None:
            self._runner.close()
            self._runner = None
