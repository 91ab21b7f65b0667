"""A real local Ray cluster for the cluster tests: a head node and a worker node, each a
raylet with its own resources (one CPU each), started by ``ray.cluster_utils.Cluster``
on this machine. No mocks: builds and measurements run in Ray tasks and actors there.

    ray_cluster   (cluster, worker_node): a fresh two-node cluster, shut down after the test

Without Ray the tests skip with the reason, unless ``$AUTOTUNE_REQUIRE_RAY`` is set (CI),
where they fail instead.
"""
from __future__ import annotations

import atexit
import os

import pytest

REQUIRE_ENV = "AUTOTUNE_REQUIRE_RAY"
#: Object store per node: the smallest Ray accepts comfortably; kernels are a few KB.
OBJECT_STORE_BYTES = 100 * 1024 * 1024


@pytest.fixture
def ray_cluster(monkeypatch):
    try:
        from ray.cluster_utils import Cluster
    except ImportError:
        if os.environ.get(REQUIRE_ENV):
            pytest.fail(f"${REQUIRE_ENV} is set but Ray is not installed (pip install -e '.[distributed]')")
        pytest.skip("Ray is not installed (pip install -e '.[distributed]')")
    monkeypatch.setenv("RAY_worker_niceness", "0")  # as the README asks of cluster nodes
    node_args = dict(num_cpus=1, object_store_memory=OBJECT_STORE_BYTES, include_dashboard=False)
    cluster = Cluster(initialize_head=True, head_node_args=node_args)
    atexit.register(cluster.shutdown)  # also when the session ends before the teardown
    try:
        worker = cluster.add_node(**{k: v for k, v in node_args.items() if k != "include_dashboard"})
        cluster.wait_for_nodes()
        yield cluster, worker
    finally:
        import ray

        if ray.is_initialized():
            ray.shutdown()
        cluster.shutdown()
        atexit.unregister(cluster.shutdown)


def pytest_collection_modifyitems(items):
    """Under pytest-xdist (``--dist loadgroup``) the cluster tests share one worker: two
    local Ray clusters at once would contend for the head node's ports."""
    for item in items:
        if "tests/cluster/" in str(item.fspath).replace(os.sep, "/"):
            item.add_marker(pytest.mark.xdist_group("ray-cluster"))
