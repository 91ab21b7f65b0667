"""A graph split into fused subgraphs, each a task; identical ones tuned once, with a weight.

    groups, tasks = partition(graph, target="cpu")
    tasks[0].task, tasks[0].weight      # a Task, and how many groups run it
    groups[0].task_key, groups[0].inputs, groups[0].output

Fusion rule (Ansor's and TVM's, for the ops here): an element-wise node joins the group
that produced one of its operands (the first such, in operand order) when that value is
the group's last result, is read by this node alone and is not an output of the graph;
otherwise it starts a group of its own.
Every reducing node (dense, matmul, conv2d, layernorm, softmax) starts a group. So ``dense
-> bias -> relu -> add(residual)`` is one group, and so is ``conv2d -> batch_norm ->
add(residual, ...) -> relu``: one kernel, whose element-wise tail the schedule
space fuses into the product's tiles.

Each group becomes a workload built from tensors: a placeholder per value it reads from
outside (graph inputs, parameters, other groups' results), named by position (``in0``,
``in1``, ...), and its nodes' computes named by position too. Two groups doing the same
thing on the same shapes therefore have the same DAG, hence the same task key
(``Task.from_tensors``: the name plus the DAG's hash), and are tuned once: the task's
weight counts them (a 4-layer MLP with two layer shapes has two tasks of weight 2).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import te

from ..task import Task
from .network import Graph, Node, Value


@dataclass
class Group:
    """Nodes run as one kernel: they read ``inputs`` (in the kernel's argument order) and
    produce ``output``."""

    nodes: list[Node]
    inputs: list[Value] = field(default_factory=list)
    task_key: str = ""

    @property
    def output(self) -> Value:
        return self.nodes[-1].output

    @property
    def kinds(self) -> str:
        return "_".join(n.kind.name for n in self.nodes)


@dataclass
class GraphTask:
    """One distinct task of a graph and how many of its groups run it."""

    task: Task
    weight: int


def fuse(graph: Graph) -> list[Group]:
    """The graph's nodes in groups (the module docstring's rule), in execution order."""
    outputs = set(graph.outputs.values())
    groups: list[Group] = []
    group_of: dict[Value, Group] = {}

    def host_of(node: Node) -> Group | None:
        """The group an element-wise node joins: one whose last result it reads (its first
        operand's first: a residual add may list it second) and that runs after every group
        producing its other operands, which must exist when the kernel runs."""
        latest = max((groups.index(group_of[v]) for v in node.inputs if v in group_of), default=-1)
        for v in node.inputs:
            host = group_of.get(v)
            if (host is not None and host.output is v and v not in outputs and len(graph.consumers(v)) == 1
                    and groups.index(host) == latest):
                return host
        return None

    for node in graph.nodes:
        host = host_of(node) if not node.kind.reduces else None
        if host is not None:
            host.nodes.append(node)
        else:
            host = Group([node])
            groups.append(host)
        group_of[node.output] = host
    for g in groups:
        made = {n.output for n in g.nodes}
        for n in g.nodes:
            for v in n.inputs:
                if v not in made and v not in g.inputs:
                    g.inputs.append(v)
    return groups


def group_workload(group: Group) -> te.Workload:
    """The group as a workload from tensors, every name positional (see the module docstring)."""
    tensors = {v: te.placeholder(v.shape, v.dtype, f"in{i}") for i, v in enumerate(group.inputs)}
    for i, node in enumerate(group.nodes):
        operands = [tensors[v] for v in node.inputs]
        tensors[node.output] = node.kind.build(*operands, name=f"{node.kind.name}{i}", **node.attrs)
    args = [tensors[v] for v in group.inputs] + [tensors[group.output]]
    return te.Workload.from_tensors(args, f"graph_{group.kinds}")


def partition(graph: Graph, target="cpu") -> tuple[list[Group], list[GraphTask]]:
    """The graph's groups (each with its task's key) and its distinct tasks, first use first."""
    if not graph.outputs:
        raise ValueError(f"graph {graph.name!r} has no outputs: name them with Graph.output")
    groups = fuse(graph)
    tasks: dict[str, GraphTask] = {}
    for g in groups:
        task = Task.from_workload(group_workload(g), target)
        g.task_key = task.key
        if task.key in tasks:
            tasks[task.key].weight += 1
        else:
            tasks[task.key] = GraphTask(task, 1)
    return groups, list(tasks.values())
