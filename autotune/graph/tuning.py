"""Tuning a whole network, and building it with the tuned kernels.

    result = tune_graph(graph, trials=2000, db=db)      # tasks share the budget
    net = build_graph(graph, db=db)                      # the tuned kernels, in order
    net(x=...)                                           # {"y": ...}, checked like run_numpy

``tune_graph`` partitions the graph (``partition``), then hands out the trials one batch
at a time: the scheduler (``scheduler``; gradient by default, round-robin on request)
picks a task, and ``autotune.tune`` measures ``batch`` more trials of it, resuming from
what the database holds, so each task's tuner continues from all its measurements and an
interrupted network run continues where it stopped. Every trial is an ordinary record
in the database, under the task's own key. (Resuming replays a task's records into a
fresh tuner each turn: simple and robust, at a cost that grows with the records; a
tuner kept alive per task would avoid it.)

``build_graph`` builds each distinct task once with its best stored config (``autotune.build``;
a task never tuned gets the default schedule and the warning saying so) and runs the
groups in order; the parameters are the graph's, packed once at build time, and the
intermediate results share buffers planned by lifetime.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from te import dtypes

from .network import Graph
from .partition import Group, GraphTask, partition
from .scheduler import GradientScheduler, RoundRobinScheduler, TaskState

SCHEDULERS = ("gradient", "round_robin")


@dataclass
class GraphTuneResult:
    """The tasks of a tuned graph, each one's trials and best seconds, and the scheduler's
    picks in order (``picks``: task index per batch)."""

    tasks: list[GraphTask]
    states: list[TaskState]
    picks: list[int] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def latency(self) -> float:
        """The network's estimated latency: sum of weight x best seconds over its tasks."""
        return sum(s.weight * s.best for s in self.states)

    @property
    def trials(self) -> int:
        return sum(s.trials for s in self.states)


def tune_graph(graph: Graph, trials: int, db, target="cpu", tuner: str = "xgb", batch: int = 64,
               scheduler: str = "gradient", seed: int = 0, timeout: float = 10.0,
               progress: Callable[[GraphTuneResult, int], None] | None = None,
               tune_task: Callable | None = None) -> GraphTuneResult:
    """Tune ``graph``'s tasks with ``trials`` trials in all (the module docstring).

    ``db`` (a ``tuning_db.Database``) holds every record; tuning again with more trials
    continues from them. ``progress(result, task_index)`` is called after each batch.
    ``tune_task(task, trials)`` -> (trials measured so far, best seconds) replaces the
    real tuning (tests drive the scheduler through it).
    """
    if not isinstance(trials, int) or trials <= 0:
        raise ValueError(f"trials must be a positive int, got {trials!r}")
    if scheduler not in SCHEDULERS:
        raise ValueError(f"scheduler must be one of {', '.join(SCHEDULERS)}, got {scheduler!r}")
    if db is None and tune_task is None:
        raise ValueError("tune_graph needs a database (a tuning_db.Database): each batch of a task resumes "
                         "from the records stored before it")
    _, tasks = partition(graph, target)
    states = [_stored_state(db, t) for t in tasks]
    picker = (GradientScheduler(states, seed=seed) if scheduler == "gradient" else RoundRobinScheduler(states))
    result = GraphTuneResult(tasks, states)
    run = tune_task or _tuner_of(db, tuner, seed, timeout, batch)
    t0 = time.perf_counter()
    given = 0
    while given < trials:
        i = picker.next_task()
        state = states[i]
        ask = min(batch, trials - given)
        done, best = run(tasks[i].task, state.trials + ask)
        new = done - state.trials
        given += new if new > 0 else ask  # a task whose space is spent still uses up its turn
        picker.record(i, done, best)
        result.picks.append(i)
        if progress is not None:
            progress(result, i)
    result.seconds = time.perf_counter() - t0
    return result


def _stored_state(db, task: GraphTask) -> TaskState:
    """A task's scheduler state, starting from the trials the database holds for it on
    this target (a second ``tune_graph`` continues; a task tuned before needs no warm-up)."""
    from .. import targets

    state = TaskState(task.weight, task.task.flops, task.task.workload_name)
    if db is None:
        return state
    records = db.records_for_task(task.task.key, targets.describe(task.task.target))
    if records:
        ok = [r.median_s for r in records if r.median_s]
        state.trials = len(records)
        state.curve.append((len(records), min(ok) if ok else math.inf))
    return state


def _tuner_of(db, tuner: str, seed: int, timeout: float, batch: int):
    """``tune_task`` measuring for real: ``autotune.tune`` resumed from the database."""
    from ..tuning import tune

    def run(task, total: int) -> tuple[int, float]:
        r = tune(task, trials=total, tuner=tuner, db=db, seed=seed, timeout=timeout, batch_size=batch,
                 resume=True, final=None)
        return len(r.history), r.best_cost

    return run


class GraphModule:
    """A built network: ``module(**inputs)`` -> {output name: array}.

    The parameters are packed once, here, into the layout each kernel's schedule chose
    (``CPUModule.pack``; a kernel that reads a weight as laid out gets the array itself),
    so no call pays for it. Intermediate results live in buffers planned here by lifetime
    (``plan_buffers``): a buffer whose value has no reader left is reused by a later
    group, so a chain of layers ping-pongs between two buffers. The outputs are fresh
    arrays on every call."""

    def __init__(self, graph: Graph, groups: list[Group], kernels: dict):
        from ..dispatch import packed_input

        self.graph = graph
        self.groups = groups
        self.kernels = kernels  # task key -> built module (with .config and .record)
        self._weights = [{n: packed_input(kernels[g.task_key], f"in{n}", graph.params[v])
                          for n, v in enumerate(g.inputs) if v in graph.params} for g in groups]
        self.buffers = plan_buffers(groups, set(graph.outputs.values()))

    def __call__(self, **inputs) -> dict[str, np.ndarray]:
        values = self.graph.check_inputs(inputs)
        for g, weights in zip(self.groups, self._weights):
            outs = [self.buffers[v] if v in self.buffers  # else a graph output: the caller keeps it
                    else np.empty(v.shape, dtype=dtypes.numpy_dtype(v.dtype)) for v in g.results]
            args = [weights[n] if n in weights else values[v] for n, v in enumerate(g.inputs)]
            self.kernels[g.task_key](*args, *outs)
            values.update(zip(g.results, outs))
        return {name: values[v] for name, v in self.graph.outputs.items()}

    def untuned(self) -> list[str]:
        """The task keys built with the default schedule (nothing stored for them)."""
        return [key for key, k in self.kernels.items() if k.record is None]


def plan_buffers(groups: list[Group], outputs: set) -> dict:
    """For each group's result that is not a graph output, the array it is written to: after
    the last group reading a result, its buffer is free, and a later result of the same
    bytes or fewer takes it (viewed in its shape and dtype) instead of a new one."""
    last_reader = {}
    for i, g in enumerate(groups):
        for v in g.inputs:
            last_reader[v] = i
    free: list[np.ndarray] = []  # flat byte buffers no live value uses
    held: dict = {}  # value -> its byte buffer
    planned: dict = {}  # value -> the array it is written to
    for i, g in enumerate(groups):
        for v in [v for v, buf in held.items() if last_reader.get(v, -1) < i]:
            free.append(held.pop(v))
        for result in g.results:
            if result in outputs:
                continue
            dtype = dtypes.numpy_dtype(result.dtype)
            nbytes = int(np.prod(result.shape)) * dtype.itemsize
            fits = [b for b in free if b.nbytes >= nbytes]
            buf = min(fits, key=lambda b: b.nbytes) if fits else np.empty(nbytes, dtype=np.uint8)
            if fits:
                free.remove(buf)
            held[result] = buf
            planned[result] = buf[:nbytes].view(dtype).reshape(result.shape)
    return planned


def build_graph(graph: Graph, db=None, target="cpu") -> GraphModule:
    """Every distinct task of ``graph`` built with its best stored config (``autotune.build``)."""
    from ..dispatch import build

    groups, tasks = partition(graph, target)
    kernels = {t.task.key: build(t.task, db) for t in tasks}
    return GraphModule(graph, groups, kernels)
