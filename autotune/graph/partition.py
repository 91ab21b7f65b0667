"""A graph split into fused subgraphs, each a task; identical ones tuned once, with a weight.

    groups, tasks = partition(graph, target="cpu")
    tasks[0].task, tasks[0].weight      # a Task, and how many groups run it
    groups[0].task_key, groups[0].inputs, groups[0].results

Fusion rule (Ansor's and TVM's, for the ops here): an element-wise node joins the group
that produced one of its operands (the first such, in operand order) when that value is
the group's last result, is read by this node alone and is not an output of the graph;
otherwise it starts a group of its own.
Every reducing node (dense, matmul, conv2d, layernorm, softmax) starts a group. So ``dense
-> bias -> relu -> add(residual)`` is one group, and so is ``conv2d -> batch_norm ->
add(residual, ...) -> relu``: one kernel, whose element-wise tail the schedule
space fuses into the product's tiles.

Groups that apply the same chain of nodes, starting with a product (dense, matmul,
conv2d), to one shared input, their other inputs parameters of the same shapes (the q, k
and v projections of one activation), are then merged into one group with a result per
chain: one kernel, in which the schedule space decides whether the chains share their
loops (horizontal fusion, the ``siblings`` knob) or run one after another.

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
    """Nodes run as one kernel: they read ``inputs`` and write ``results`` (in the kernel's
    argument order). ``chains`` > 1: that many chains of the same nodes, one after another in
    ``nodes``, each giving one result (merged siblings)."""

    nodes: list[Node]
    inputs: list[Value] = field(default_factory=list)
    task_key: str = ""
    chains: int = 1

    @property
    def results(self) -> list[Value]:
        """The last value of each chain."""
        length = len(self.nodes) // self.chains
        return [self.nodes[(n + 1) * length - 1].output for n in range(self.chains)]

    @property
    def kinds(self) -> str:
        chain = "_".join(n.kind.name for n in self.nodes[:len(self.nodes) // self.chains])
        return chain if self.chains == 1 else f"{chain}_x{self.chains}"


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
            if (host is not None and host.nodes[-1].output is v and v not in outputs and len(graph.consumers(v)) == 1
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
    groups = _merge_siblings(graph, groups)
    for g in groups:
        made = {n.output for n in g.nodes}
        for n in g.nodes:
            for v in n.inputs:
                if v not in made and v not in g.inputs:
                    g.inputs.append(v)
    return groups


#: Node kinds a chain of merged siblings may start with: products, whose schedule space
#: has the ``siblings`` knob.
SIBLING_HEADS = ("dense", "matmul", "conv2d")


def _merge_siblings(graph: Graph, groups: list[Group]) -> list[Group]:
    """``groups`` with each set of siblings (``_same_chain`` as the first of them) merged into
    one group, where the first of them ran. The others read only the shared input and
    parameters besides their own nodes' values, so they can run that early."""
    merged: list[Group] = []
    taken: set[int] = set()
    for n, first in enumerate(groups):
        if id(first) in taken:
            continue
        siblings = [g for g in groups[n + 1:] if id(g) not in taken and _same_chain(graph, first, g)]
        if siblings:
            taken.update(id(g) for g in siblings)
            first = Group([node for g in (first, *siblings) for node in g.nodes], chains=1 + len(siblings))
        merged.append(first)
    return merged


def _same_chain(graph: Graph, first: Group, other: Group) -> bool:
    """Whether ``other`` applies ``first``'s chain of nodes (a product first) to an input they
    share, its other inputs parameters shaped like ``first``'s or its own nodes' values."""
    if first.nodes[0].kind.name not in SIBLING_HEADS or len(first.nodes) != len(other.nodes):
        return False
    mine = {node.output: k for k, node in enumerate(first.nodes)}
    theirs = {node.output: k for k, node in enumerate(other.nodes)}
    shared = False
    for a, b in zip(first.nodes, other.nodes):
        if (a.kind is not b.kind or a.attrs != b.attrs or len(a.inputs) != len(b.inputs)
                or (a.output.shape, a.output.dtype) != (b.output.shape, b.output.dtype)):
            return False
        for va, vb in zip(a.inputs, b.inputs):
            if va is vb and va not in mine:
                shared = shared or va not in graph.params
            elif va in mine or vb in theirs:  # values of the chains' own nodes, at the same place
                if mine.get(va, -1) != theirs.get(vb, -2):
                    return False
            elif not (va in graph.params and vb in graph.params and (va.shape, va.dtype) == (vb.shape, vb.dtype)):
                return False
    return shared


def group_workload(group: Group) -> te.Workload:
    """The group as a workload from tensors, every name positional (see the module docstring)."""
    tensors = {v: te.placeholder(v.shape, v.dtype, f"in{i}") for i, v in enumerate(group.inputs)}
    for i, node in enumerate(group.nodes):
        operands = [tensors[v] for v in node.inputs]
        tensors[node.output] = node.kind.build(*operands, name=f"{node.kind.name}{i}", **node.attrs)
    args = [tensors[v] for v in group.inputs] + [tensors[v] for v in group.results]
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
