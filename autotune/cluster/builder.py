"""Builds on the cluster: sources generated here, compiled as Ray tasks on the measuring nodes.

Lowering and code generation stay in the driver (milliseconds a candidate, and only the
driver holds the schedule); each distinct source is compiled by a Ray task (one CPU)
pinned to one of the pool's nodes in turn, so a kernel built with ``-march=native`` is
built on the kind of machine that runs it. Results stream back with ``ray.wait`` as they
finish; the kernel's bytes come with them and travel to whichever node measures it.

A compile whose node goes away is retried once on another node; lost twice, it is
``worker_lost``. A compiler error is a result like on one machine (``compile_error``,
``timeout``, ``invalid``).
"""
from __future__ import annotations

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

    def compile_all(self, jobs: dict[str, tuple]) -> dict[str, BuildResult]:
        import ray
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        done: dict[str, BuildResult] = {}
        attempts = dict.fromkeys(jobs, 0)
        in_flight: dict = {}  # object ref -> (key, node)

        def submit(key: str, avoid=None) -> None:
            node = self.pool.next_alive(avoid)
            if node is None:
                done[key] = BuildResult(Status.WORKER_LOST, source_hash=key,
                                        error="no node of the cluster is left to compile on")
                return
            backend, source = jobs[key]
            strategy = NodeAffinitySchedulingStrategy(node.info.node_id, soft=False)
            ref = self.compile_task.options(scheduling_strategy=strategy).remote(backend.target, source,
                                                                                 self.timeout)
            in_flight[ref] = (key, node)

        for key in jobs:
            submit(key)
        try:
            while in_flight:
                ready, _ = ray.wait(list(in_flight), num_returns=1)
                for ref in ready:
                    key, node = in_flight.pop(ref)
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
                        if attempts[key] <= self.retries:
                            submit(key, avoid=node)
                        else:
                            done[key] = BuildResult(Status.WORKER_LOST, source_hash=key,
                                                    error=f"compile lost with its node {attempts[key]} times: "
                                                          f"{type(exc).__name__}: {exc}"[:2000])
                        continue
                    done[key] = BuildResult(Status(status), artifact=None, source_hash=key, error=error,
                                            build_s=seconds, blob=blob)
        except BaseException:  # interrupted: nothing keeps compiling for a run that is over
            for ref in in_flight:
                ray.cancel(ref, force=True)
            raise
        return done
