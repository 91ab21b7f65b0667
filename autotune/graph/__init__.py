"""Whole networks: a graph of library ops, split into tasks, tuned under one budget, built.

    from autotune.graph import Graph, tune_graph, build_graph
    g = Graph("mlp"); x = g.input("x", (64, 1024)); ...; g.output("y", y)
    tune_graph(g, trials=2000, db=db)      # network.py, partition.py, scheduler.py, tuning.py
    build_graph(g, db=db)(x=...)           # {"y": ...}
    g = from_onnx("net.onnx")              # an ONNX model's supported nodes (onnx_loader.py)
    g = examples.transformer_block()       # example networks (examples.py)
"""
from . import examples
from .network import Graph, GraphError, Value
from .onnx_loader import from_onnx
from .partition import GraphTask, Group, fuse, partition
from .scheduler import GradientScheduler, RoundRobinScheduler, TaskState
from .tuning import GraphModule, GraphTuneResult, build_graph, tune_graph

__all__ = ["examples", "Graph", "GraphError", "Value", "from_onnx", "GraphTask", "Group", "fuse", "partition", "GradientScheduler",
           "RoundRobinScheduler", "TaskState", "GraphModule", "GraphTuneResult", "build_graph", "tune_graph"]
