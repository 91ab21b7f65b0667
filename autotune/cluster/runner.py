"""Measurements on the cluster: each candidate to one node's measuring actor, results as they come.

The batch is spread over the pool's measuring actors (``nodes.MeasuringActor``, one per
node, one measurement at a time each), at most ``in_flight`` candidates queued per actor,
so a node that dies takes at most that many with it. The rounds rule of one machine
(``runner`` module docstring) holds: after the first round, the candidates within
``recheck_within`` of the best are measured again, each on the node that measured it
first, and keep their fastest round.

A candidate whose actor dies (its node removed, its process killed) is ``worker_lost``
for a moment: it goes to another node, once; lost again, that is its result. A node
lost is not sent work again in this run. A crash, hang or wrong answer of the kernel
itself is the actor's local measuring process's business, as on one machine.
"""
from __future__ import annotations

import math
import time
from collections import deque

from ..measure import BuildResult, MeasureResult, Runner, Status
from ..runner import TimingOptions, keep_faster_round
from .pool import Node, NodePool, is_lost


class RayRunner(Runner):
    """Measures a task's builds on the actors of ``pool`` (see the module docstring).

    ``timeout`` bounds one candidate on its node (the actor's measuring process is killed
    past it, as on one machine); a call that does not come back within twice ``timeout``
    (it may wait behind another candidate) plus ``grace`` seconds counts its actor as lost (the default leaves room for the first
    measurement of a task, which also makes its inputs and reference: ``LocalRunner``'s
    ``setup_timeout``).
    """

    def __init__(self, pool: NodePool, *, timeout: float = 10.0, options: TimingOptions | None = None,
                 seed: int = 0, retries: int = 1, in_flight: int = 2, grace: float = 300.0):
        self.pool = pool
        self.timeout = timeout
        self.options = options or TimingOptions()
        self.seed = seed
        self.retries = retries
        self.in_flight = in_flight
        self.grace = grace
        self._ready_for: dict[str, str] = {}  # node id -> key of the task its actor is set up for

    def run(self, task, builds: list[BuildResult], best_cost: float | None = None) -> list[MeasureResult]:
        results: list[MeasureResult | None] = [None] * len(builds)
        measurable = []
        for i, build in enumerate(builds):
            if build.status is Status.OK:
                measurable.append(i)
            else:
                results[i] = MeasureResult(build.status, error=build.error, build_s=build.build_s)
        self._set_up(task)
        placed: dict[int, Node] = {}
        first = self._measure(builds, measurable, best_cost, placed)
        for i, result in first.items():
            results[i] = result
        best = min([best_cost or math.inf] + [r.cost for r in first.values()])
        for round_ in range(1, self.options.rounds):
            if math.isinf(best):
                break
            again = [i for i in measurable if results[i].ok and results[i].cost <= self.options.recheck_within * best
                     and placed[i].alive]
            if round_ % 2 == 1:
                again.reverse()
            for i, result in self._measure(builds, again, best, placed, same_node=True).items():
                results[i] = keep_faster_round(results[i], result)
            best = min([best] + [r.cost for r in results if r is not None and r.ok])
        return results  # type: ignore[return-value]

    def time_final(self, task, builds: list[BuildResult], options):
        """The final timing on one node of the pool (they are alike: ``choose_pool``), the
        first alive one; a node lost meanwhile raises RuntimeError (the run keeps the
        search's best)."""
        import ray

        self._set_up(task)
        alive = self.pool.alive()
        if not alive:
            raise RuntimeError("no node of the cluster is left to time the final candidates")
        node = alive[0]
        kernels = [(b.source_hash, b.blob, b.build_s) for b in builds]
        ref = node.actor.time_final.remote(kernels, options)
        try:
            return ray.get(ref, timeout=self.timeout * (len(builds) + 1) * options.round_limit + self.grace)
        except Exception as exc:  # noqa: BLE001
            if not is_lost(exc):
                raise
            self.pool.mark_lost(node, f"lost during the final timing: {type(exc).__name__}")
            raise RuntimeError(f"node {node.info.node_id} was lost during the final timing") from None

    # ------------------------------------------------------------ the parts

    def _set_up(self, task) -> None:
        """Every alive actor gets the task (its measuring process starts on the first
        measurement); an actor that fails to answer is lost."""
        import ray

        one_round = TimingOptions(**{**vars(self.options), "rounds": 1})
        calls = {}
        for node in self.pool.alive():
            if self._ready_for.get(node.info.node_id) != task.key:
                calls[node.actor.setup.remote(task.dag_json, task.target, self.seed, self.timeout, one_round)] = node
        for ref, node in calls.items():
            try:
                self._ready_for[node.info.node_id] = ray.get(ref, timeout=self.grace)
            except Exception as exc:  # noqa: BLE001
                if not is_lost(exc):
                    raise
                self.pool.mark_lost(node, f"lost while setting up {task.key}: {type(exc).__name__}")

    def _measure(self, builds: list[BuildResult], indices: list[int], best_cost: float | None,
                 placed: dict[int, Node], same_node: bool = False) -> dict[int, MeasureResult]:
        """Measure ``builds[i]`` for each i once, spread over the alive actors (or each on
        ``placed[i]`` with ``same_node``); lost ones retried once; ``placed`` learns where."""
        import ray

        out: dict[int, MeasureResult] = {}
        queue = deque(indices)
        attempts = dict.fromkeys(indices, 0)
        flying: dict = {}  # ref -> (i, node, deadline)
        load = self.pool.in_flight
        best = math.inf if best_cost is None else best_cost

        def lost(i: int, node: Node, why: str) -> None:
            self.pool.lost_measurements += 1
            attempts[i] += 1
            if attempts[i] <= self.retries and not same_node and self.pool.alive():
                queue.appendleft(i)
            else:
                out[i] = MeasureResult(Status.WORKER_LOST, build_s=builds[i].build_s,
                                       error=f"the measurement was lost with its node {attempts[i]} time(s): {why}",
                                       where=node.info.described)

        try:
            while queue or flying:
                for _ in range(len(queue)):
                    i = queue[0]
                    node = placed[i] if same_node else self._least_loaded(load)
                    if node is None or not node.alive:
                        queue.popleft()
                        if node is None:
                            out[i] = MeasureResult(Status.WORKER_LOST, build_s=builds[i].build_s,
                                                   error="no measuring node of the cluster is left")
                        continue  # same_node and its node is gone: the earlier round stands
                    if load[node.info.node_id] >= self.in_flight:
                        break
                    queue.popleft()
                    b = builds[i]
                    ref = node.actor.measure.remote(b.source_hash, b.blob, b.build_s,
                                                    None if math.isinf(best) else best)
                    flying[ref] = (i, node, time.monotonic() + self.timeout * 2 + self.grace)
                    load[node.info.node_id] += 1
                    placed[i] = node
                if not flying:
                    continue
                ready, _ = ray.wait(list(flying), num_returns=1, timeout=1.0)
                now = time.monotonic()
                for ref in ready:
                    i, node, _ = flying.pop(ref)
                    load[node.info.node_id] -= 1
                    try:
                        result = ray.get(ref)
                    except Exception as exc:  # noqa: BLE001
                        if not is_lost(exc):
                            why = f"the measuring actor failed: {type(exc).__name__}: {exc}"
                            out[i] = MeasureResult(Status.RUNTIME_ERROR, build_s=builds[i].build_s, error=why[:2000])
                            continue
                        self.pool.mark_lost(node, f"its measuring actor died: {type(exc).__name__}")
                        lost(i, node, f"{type(exc).__name__}: {exc}"[:1000])
                        continue
                    out[i] = result
                    if result.ok:
                        best = min(best, result.cost)
                for ref, (i, node, deadline) in list(flying.items()):
                    if now > deadline:  # the actor hangs or its node is unreachable
                        flying.pop(ref)
                        load[node.info.node_id] -= 1
                        self.pool.mark_lost(node, "no answer from its measuring actor")
                        ray.kill(node.actor, no_restart=True)
                        lost(i, node, "no answer from the measuring actor in time")
        finally:  # interrupted: what is still in flight no longer counts against its node
            for i, node, _ in flying.values():
                load[node.info.node_id] -= 1
        return out

    def _least_loaded(self, load) -> Node | None:
        alive = self.pool.alive()
        if not alive:
            return None
        return min(alive, key=lambda n: load[n.info.node_id])
