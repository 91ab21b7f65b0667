"""``RayExecutor``: a Ray cluster builds and measures a tuning run's candidates.

    with RayExecutor("auto") as cluster:              # or "ray://head:10001", "10.0.0.5:6379"
        task = Task("matmul", params, cluster.target("cpu"))
        result = autotune.tune(task, trials=1000, db=db, executor=cluster)

On connecting it starts one measuring actor on every node with CPUs
(``nodes.MeasuringActor``, pinned to its node) and asks each what it is. The nodes whose
fingerprint (CPU model and ISA, usable cores, compiler, flags, tool version) is the most
common are the pool; the others are left out with the reason (``excluded``), because
their timings are not comparable with the pool's. The task's target must be the pool's
(``target(spec)`` parses the spec on a pool node): the space and the generated code
adapt to the machine that runs them, not to the driver's.

Builds are Ray tasks on the pool's nodes (``builder.RayBuilder``), measurements go to
the actors (``runner.RayRunner``); each record carries the host of the node that measured
it. The actors are owned by this process: Ray stops them when it exits or is killed,
and their measuring processes die with them. ``close()`` stops them at once and
disconnects if this executor connected.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import replace

from schedule.targets import Target, parse_target

from .builder import RayBuilder
from .nodes import MeasuringActor, NodeInfo, compile_source
from .pool import Node, NodePool, is_lost


def choose_pool(infos: dict[str, NodeInfo], prefer: str | None = None) -> tuple[list[str], list[tuple]]:
    """(the node ids measured on, [(NodeInfo, why not)] for the others): the nodes of the
    most common fingerprint; a tie goes to the fingerprint of node ``prefer`` (the driver's
    own node, when it is one), then to the first node's."""
    counts = Counter(info.fingerprint for info in infos.values())
    preferred = infos[prefer].fingerprint if prefer in infos else None
    order = list(dict.fromkeys(info.fingerprint for info in infos.values()))
    chosen = max(order, key=lambda fp: (counts[fp], fp == preferred, -order.index(fp)))
    pool = [node_id for node_id, info in infos.items() if info.fingerprint == chosen]
    excluded = [(info, "its fingerprint differs from the pool's, so its timings would not compare: "
                 + info.summary()) for info in infos.values() if info.fingerprint != chosen]
    return pool, excluded


class ClusterError(RuntimeError):
    """The cluster cannot be used for this run (the message says why and what to do)."""


class RayExecutor:
    """Builds and measures on the Ray cluster at ``address`` (see the module docstring).

    ``address``: ``auto`` (the cluster this machine belongs to: ``ray start`` ran here, or
    ``RAY_ADDRESS``), ``HOST:PORT`` of a head node, or ``ray://HOST:PORT`` (Ray Client).
    ``spec`` is the target kind the nodes are asked about (``cpu`` is the one measured on
    clusters today). ``retries``: how often a build or measurement lost with its node is
    tried again elsewhere. ``in_flight``: measurements queued per node.
    """

    def __init__(self, address: str = "auto", spec: str = "cpu", *, retries: int = 1, in_flight: int = 2,
                 connect_timeout: float = 120.0):
        try:
            import ray
        except ImportError:
            raise ClusterError("tuning on a cluster needs Ray: pip install 'autotune-te[distributed]'") from None
        if getattr(parse_target(spec).facts, "is_gpu", False):
            raise ClusterError(f"target {spec!r}: only CPU targets are built and measured on a cluster so far")
        self.address = address
        self.retries = retries
        self.in_flight = in_flight
        self._connected_here = not ray.is_initialized()
        if self._connected_here:
            try:
                ray.init(address=address, log_to_driver=False, configure_logging=False)
            except (ConnectionError, RuntimeError, ValueError) as exc:
                raise ClusterError(f"cannot connect to the Ray cluster at {address!r}: {exc}") from None
        self._actor_class = ray.remote(num_cpus=0, max_restarts=0, max_concurrency=1)(MeasuringActor)
        self.compile_task = ray.remote(num_cpus=1, max_retries=0)(compile_source)
        self.excluded: list[tuple[NodeInfo | str, str]] = []  # (node, why it is not measured on)
        try:
            self.pool = self._start_pool(spec, connect_timeout)
        except BaseException:
            self.close()
            raise
        #: What the user should know about the pool (the command line prints it).
        self.warnings = [f"{n.info.described.host} measures at niceness {n.info.niceness} (Ray's worker "
                         f"niceness), so other processes there preempt its timings: start its Ray node with "
                         f"RAY_worker_niceness=0" for n in self.pool.nodes if n.info.niceness > 0]

    # ------------------------------------------------------------ the pool

    def _start_pool(self, spec: str, timeout: float) -> NodePool:
        import ray
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        candidates = [n for n in ray.nodes() if n["Alive"] and n["Resources"].get("CPU", 0) > 0]
        if not candidates:
            raise ClusterError(f"the Ray cluster at {self.address!r} has no alive node with CPUs")
        actors = {}
        for n in candidates:
            strategy = NodeAffinitySchedulingStrategy(n["NodeID"], soft=False)
            actors[n["NodeID"]] = self._actor_class.options(scheduling_strategy=strategy).remote(spec, n["NodeID"])
        infos: dict[str, NodeInfo] = {}
        for node_id, actor in actors.items():
            try:
                infos[node_id] = ray.get(actor.describe.remote(), timeout=timeout)
            except Exception as exc:  # noqa: BLE001 - a node that cannot start an actor is left out
                if not is_lost(exc) and "RayTaskError" not in type(exc).__name__:
                    raise
                self.excluded.append((node_id, f"its measuring actor did not start: {type(exc).__name__}: {exc}"))
                ray.kill(actor, no_restart=True)
        if not infos:
            raise ClusterError(f"no node of the Ray cluster at {self.address!r} could start a measuring actor: "
                               + "; ".join(why for _, why in self.excluded))
        pool_ids, excluded = choose_pool(infos, prefer=ray.get_runtime_context().get_node_id())
        self.excluded += excluded
        for node_id in set(infos) - set(pool_ids):
            ray.kill(actors[node_id], no_restart=True)
        cpus = {n["NodeID"]: max(1, int(n["Resources"]["CPU"])) for n in candidates}
        return NodePool([Node(infos[node_id], actors[node_id], cpus[node_id]) for node_id in pool_ids])

    # ------------------------------------------------------------ what a run uses

    def target(self, spec: str | None = None) -> Target:
        """The target the pool's nodes measure (``spec`` parsed on one of them): make the
        run's task with it, so that the space fits the machines that time it."""
        target = self.pool.nodes[0].info.target
        if spec is not None and str(spec) != str(target):
            raise ClusterError(f"the cluster was asked about target {str(target)!r}, not {spec!r}: "
                               f"RayExecutor(address, spec={spec!r})")
        return target

    def describe(self, target: Target):
        """The ``tuning_db.TargetInfo`` of the run: the pool's device, its host the cluster."""
        self.check_target(target)
        info = self.pool.nodes[0].info.described
        return replace(info, host=f"ray cluster of {len(self.pool.nodes)} node(s)")

    def check_target(self, target: Target) -> None:
        pool_target = self.pool.nodes[0].info.target
        if target != pool_target:
            raise ClusterError(
                f"the task's target {target!r} is not the one the cluster's nodes measure ({pool_target!r}); "
                f"make the task with RayExecutor.target() (the command line does) so that the space fits them")

    def measurers(self, task, *, timeout: float = 10.0, timing=None, seed: int = 0):
        """The (builder, runner) of a run of ``task`` on the pool."""
        from .runner import RayRunner

        self.check_target(task.target)
        builder = RayBuilder(self.pool, self.compile_task, timeout=max(60.0, timeout), retries=self.retries)
        runner = RayRunner(self.pool, timeout=timeout, options=timing, seed=seed, retries=self.retries,
                           in_flight=self.in_flight)
        return builder, runner

    def hosts(self) -> list[str]:
        """The hosts of the pool's nodes (as their records carry them)."""
        return self.pool.hosts()

    def close(self) -> None:
        """Stop the measuring actors (their measuring processes die with them); disconnect
        if this executor connected."""
        import ray

        for node in getattr(self, "pool", NodePool([])).nodes:
            try:
                ray.kill(node.actor, no_restart=True)
            except Exception:  # noqa: BLE001 - already gone
                pass
        if self._connected_here and ray.is_initialized():
            ray.shutdown()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
