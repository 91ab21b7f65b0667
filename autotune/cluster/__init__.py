"""Tuning on a Ray cluster: builds as Ray tasks, measurements in one actor per node.

    from autotune.cluster import RayExecutor
    with RayExecutor("auto") as cluster:
        result = autotune.tune(Task("matmul", params, cluster.target("cpu")), executor=cluster, db=db)

``executor`` picks the nodes and holds the actors; ``builder`` and ``runner`` are the
``Builder``/``Runner`` of a run on them; ``nodes`` is what runs on the nodes; ``pool``
is the driver's view of which nodes are alive. Ray is an optional dependency
(``pip install 'autotune-te[distributed]'``): nothing here is imported by a local run.
"""
from .executor import ClusterError, RayExecutor

__all__ = ["ClusterError", "RayExecutor"]
