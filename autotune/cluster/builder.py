"""Builds on the cluster: sources generated here, compiled as Ray tasks on the measuring nodes.

Lowering and code generation stay in the driver (milliseconds a candidate, and only the
driver holds the schedule); each distinct source is compiled by a Ray task (one CPU)
pinned to a pool node with a CPU free (the next compile goes out as one finishes), so a
kernel built with ``-march=native`` is built on the kind of machine that runs it. Results
stream back with ``ray.wait`` as they finish; the kernel's bytes come with them and travel
to whichever node measures it.

A compile whose node goes away is retried once on another node; lost twice, it is
``worker_lost``. A compiler error is a result like on one machine (``compile_error``,
``timeout``, ``invalid``).
"""
from __future__ import annotations

from collections import Counter, deque

from ..builder import LocalBuilder
from ..measure import BuildResult, Status
from .pool import NodePool, is_lost


class RayBuilder(LocalBuilder):
    """``LocalBuilder`` whose compiles run on the nodes of ``pool`` (see the module docstring).

    ``compile_task`` is ``nodes.compile_source`` wrapped by ``ray.remote`` (the executor
    makes it); ``retries`` is how often a compile lost with its node is tried again.
    """

    def __init__(self, pool: NodePool, compile_task, *, timeout: float = 60.0, retries: int = 1,
                 n_workers: int | None = None, **limits):
        super().__init__(n_workers=n_workers, timeout=timeout, **limits)
        self.pool = pool
        self.compile_task = compile_task
        self.retries = retries

    def compile_all(self, jobs) -> dict[str, BuildResult]:
        import ray
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        jobs = dict(jobs)  # (key, (backend, source)) pairs: all of them before dispatching
        done: dict[str, BuildResult] = {}
        attempts = dict.fromkeys(jobs, 0)
        queue = deque(jobs)
        in_flight: dict = {}  # object ref -> (key, node)
        busy: Counter = Counter()  # node id -> compiles running there
        lost_on: dict[str, str] = {}  # source key -> the node it was lost with (its retry goes elsewhere)

        def dispatch() -> None:
            """Hand queued compiles to nodes with a free CPU, one at a time (compile times
            vary tenfold, so a split made in advance would leave one node idle early)."""
            while queue:
                free = [n for n in self.pool.alive() if busy[n.info.node_id] < n.cpus + 1]
                if not free:
                    if not self.pool.alive():
                        for key in queue:
                            done[key] = BuildResult(Status.WORKER_LOST, source_hash=key,
                                                    error="no node of the cluster is left to compile on")
                        queue.clear()
                    return
                key = queue.popleft()
                node = min(free, key=lambda n: (n.info.node_id == lost_on.get(key), busy[n.info.node_id] / n.cpus))
                backend, source = jobs[key]
                strategy = NodeAffinitySchedulingStrategy(node.info.node_id, soft=False)
                ref = self.compile_task.options(scheduling_strategy=strategy).remote(backend.target, source,
                                                                                     self.timeout)
                in_flight[ref] = (key, node)
                busy[node.info.node_id] += 1

        dispatch()
        try:
            while in_flight:
                ready, _ = ray.wait(list(in_flight), num_returns=1)
                for ref in ready:
                    key, node = in_flight.pop(ref)
                    busy[node.info.node_id] -= 1
                    try:
                        status, blob, error, seconds = ray.get(ref)
                    except Exception as exc:  # noqa: BLE001 - sorted below: lost node or our bug
                        if not is_lost(exc):
                            done[key] = BuildResult(Status.COMPILE_ERROR, source_hash=key,
                                                    error=f"the compile task failed: {type(exc).__name__}: {exc}")
                            continue
                        self.pool.lost_builds += 1
                        self.pool.check(node, f"lost while compiling: {type(exc).__name__}")
                        attempts[key] += 1
                        lost_on[key] = node.info.node_id
                        if attempts[key] <= self.retries:
                            queue.appendleft(key)
                        else:
                            done[key] = BuildResult(Status.WORKER_LOST, source_hash=key,
                                                    error=f"compile lost with its node {attempts[key]} times: "
                                                          f"{type(exc).__name__}: {exc}"[:2000])
                        continue
                    done[key] = BuildResult(Status(status), artifact=None, source_hash=key, error=error,
                                            build_s=seconds, blob=blob)
                dispatch()
        except BaseException:  # interrupted: nothing keeps compiling for a run that is over
            for ref in in_flight:
                ray.cancel(ref, force=True)
            raise
        return done
