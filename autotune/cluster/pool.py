"""The nodes a cluster run uses, as the driver knows them: who is alive, and each one's actor.

The builder and the runner of one executor share a ``NodePool``: when either finds a
node gone (an actor died, a task's node was removed), the other stops sending it work.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from .nodes import NodeInfo

#: Ray's exceptions that mean "the machine or process went away", not "the code failed".
#: (``RayTaskError``, an exception raised by our own code on the node, is not one.)
LOST_ERRORS = ("RayActorError", "ActorDiedError", "ActorUnavailableError", "WorkerCrashedError",
               "NodeDiedError", "TaskUnschedulableError", "ActorUnschedulableError", "ObjectLostError",
               "OwnerDiedError", "LocalRayletDiedError", "GetTimeoutError")


def is_lost(exc: BaseException) -> bool:
    """Whether ``exc`` (raised by ``ray.get``) says the node or worker is gone."""
    return any(cls.__name__ in LOST_ERRORS for cls in type(exc).__mro__)


@dataclass
class Node:
    info: NodeInfo
    actor: object  # the node's MeasuringActor handle
    cpus: int = 1  # the node's CPUs in Ray's count: how many compiles it runs at once
    alive: bool = True
    lost_reason: str = ""


@dataclass
class NodePool:
    """The measuring nodes of one fingerprint (see ``nodes.NodeInfo``), in a fixed order."""

    nodes: list[Node]
    #: Measurements in flight per node id (the runner keeps it; tests and reports read it).
    in_flight: Counter = field(default_factory=Counter)
    #: Compiles and measurements lost with their node so far, whether retried or not.
    lost_builds: int = 0
    lost_measurements: int = 0

    def alive(self) -> list[Node]:
        return [n for n in self.nodes if n.alive]

    def mark_lost(self, node: Node, reason: str) -> None:
        node.alive = False
        node.lost_reason = node.lost_reason or reason

    def check(self, node: Node, reason: str) -> None:
        """After work on ``node`` was lost: mark it lost unless Ray still counts the node
        alive (then only that worker process went away, and the node keeps working)."""
        import ray

        if not any(n["NodeID"] == node.info.node_id and n["Alive"] for n in ray.nodes()):
            self.mark_lost(node, reason)

    def hosts(self) -> list[str]:
        return [n.info.described.host for n in self.nodes]
