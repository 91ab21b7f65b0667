"""Whole networks (``autotune.graph``): partitioning into tasks, the task scheduler, and a
tuned network built and checked against the same network on NumPy."""
from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

import tuning_db
from autotune.graph import (Graph, GraphError, GradientScheduler, RoundRobinScheduler, TaskState, build_graph,
                            fuse, partition, tune_graph)
from autotune.graph.examples import mlp, resnet_block, transformer_block
from tuning_db import NoTunedConfigWarning


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("AUTOTUNE_CACHE_DIR", str(tmp_path / "cache"))


def encoder_block(seq: int = 16, d: int = 32, hidden: int = 64) -> Graph:
    """layernorm -> dense -> gelu -> dense -> + residual, then a softmax head."""
    g = Graph("block")
    x = g.input("x", (seq, d))
    n = g.layernorm(x, g.param("gamma", (d,)), g.param("beta", (d,)))
    h = g.gelu(g.dense(n, g.param("w1", (hidden, d)), g.param("b1", (hidden,))))
    y = g.add(g.dense(h, g.param("w2", (d, hidden)), g.param("b2", (d,))), x)
    g.output("y", y)
    g.output("p", g.softmax(y))
    return g


def test_identical_layers_are_one_task_with_a_weight():
    groups, tasks = partition(mlp(layers=4))
    assert [g.kinds for g in groups] == ["dense_relu", "dense_relu", "dense_relu", "dense"]
    assert sorted(t.weight for t in tasks) == [1, 1, 2]  # the two narrow->wide layers are one task
    assert groups[0].task_key == groups[2].task_key != groups[1].task_key
    assert len({t.task.key for t in tasks}) == 3


def test_fusion_stops_at_a_shared_value_and_at_an_output():
    g = encoder_block()
    kinds = [grp.kinds for grp in fuse(g)]
    # the residual add joins the second dense; y is an output, so the softmax starts its own group
    assert kinds == ["layernorm", "dense_gelu", "dense_add", "softmax"]
    shared = Graph("shared")
    x = shared.input("x", (4, 8))
    d = shared.dense(x, shared.param("w", (8, 8)))
    shared.output("a", shared.relu(d))
    shared.output("b", shared.gelu(d))  # d has two readers: neither joins its group
    assert [grp.kinds for grp in fuse(shared)] == ["dense", "relu", "gelu"]


def test_a_graph_built_wrong_says_where():
    g = Graph("bad")
    x = g.input("x", (4, 8))
    with pytest.raises(GraphError, match=r"dense: x is \(4, 8\) and w is \(8, 5\)"):
        g.dense(x, g.param("w", (8, 5)))
    with pytest.raises(GraphError, match="used twice"):
        g.input("x", (2,))
    with pytest.raises(GraphError, match=r"add: shapes \(4, 8\) and \(8, 4\) differ"):
        g.add(x, g.input("z", (8, 4)))
    g.output("y", g.relu(x))
    with pytest.raises(GraphError, match="takes inputs x, z; missing x, z; unknown q"):
        g.run_numpy(q=np.zeros((4, 8), np.float32))


def _curve_tuner(curves: dict):
    """A stand-in for tuning: task -> best seconds as a function of its trials."""
    def run(task, total):
        return total, curves[task.key](total)
    return run


def test_the_gradient_scheduler_spends_on_what_lowers_the_network_latency():
    g = mlp(layers=4)
    _, tasks = partition(g)
    heavy = next(t for t in tasks if t.weight == 2).task.key
    # The weight-2 task is slow and keeps improving; the others are fast, and as fast as they
    # get after one batch: the network's time is in the first.
    curves = {t.task.key: (lambda n: 1e-3 / math.sqrt(n)) if t.task.key == heavy else (lambda n: 1e-5)
              for t in tasks}
    seen = []  # (trials so far, estimated network latency) after each gradient batch
    gradient = tune_graph(g, trials=640, db=None, batch=32, tune_task=_curve_tuner(curves),
                          progress=lambda result, i: seen.append((result.trials, result.latency)))
    robin = tune_graph(g, trials=640, db=None, batch=32, scheduler="round_robin", tune_task=_curve_tuner(curves))
    heavy_index = [t.task.key for t in gradient.tasks].index(heavy)
    assert gradient.picks[:3] == [0, 1, 2]  # the warm-up round
    assert gradient.picks.count(heavy_index) > 0.6 * len(gradient.picks)
    assert robin.picks.count(heavy_index) == len(robin.picks) // 3 + (len(robin.picks) % 3 > heavy_index)
    assert gradient.latency < robin.latency
    assert gradient.trials == robin.trials == 640
    # The bar: round-robin's final latency within 60 % of its trials.
    reached = next(trials for trials, latency in seen if latency <= robin.latency)
    assert reached <= 0.6 * 640


def test_tuning_a_network_needs_a_database():
    with pytest.raises(ValueError, match="needs a database"):
        tune_graph(mlp(layers=2), trials=8, db=None)


def test_a_task_with_nothing_valid_yet_comes_first():
    states = [TaskState(1, 1000, "dense"), TaskState(1, 1000, "dense")]
    s = GradientScheduler(states, epsilon=0.0)
    s.record(s.next_task(), 32, 1e-3)
    s.record(s.next_task(), 32, math.inf)  # every trial of task 1 failed
    assert s.next_task() == 1
    robin = RoundRobinScheduler([TaskState(1, 1, "a"), TaskState(1, 1, "b")])
    assert [robin.next_task() for _ in range(4)] == [0, 1, 0, 1]


def test_a_tuned_network_matches_numpy_and_a_second_run_continues(tmp_path):
    g = encoder_block()
    with tuning_db.Database(tmp_path / "net.db") as db:
        first = tune_graph(g, trials=32, db=db, tuner="random", batch=8)
        assert first.trials == 32 and all(s.trials >= 8 for s in first.states)
        assert all(math.isfinite(s.best) for s in first.states)
        again = tune_graph(g, trials=16, db=db, tuner="random", batch=8)
        assert again.trials == 48  # each task continues from its stored records
        assert sum(len(db.records_for_task(t.task.key, None)) for t in again.tasks) == 48
        net = build_graph(g, db=db)
    assert net.untuned() == []
    x = np.random.default_rng(3).uniform(-1, 1, (16, 32)).astype(np.float32)
    got, want = net(x=x), g.run_numpy(x=x)
    assert set(got) == {"y", "p"}
    for name in got:
        np.testing.assert_allclose(got[name], want[name], rtol=1e-4, atol=1e-5)


def test_intermediate_results_share_buffers_by_lifetime():
    from autotune.graph.tuning import plan_buffers

    g = mlp(layers=4)
    groups = fuse(g)
    planned = plan_buffers(groups, set(g.outputs.values()))
    results = [g.results[0] for g in groups]
    assert list(planned) == results[:3]  # the last group writes the output: a fresh array per call
    first, second, third = (planned[v] for v in results[:3])
    assert np.shares_memory(first, third)  # layer 0's result is dead once layer 1 ran
    assert not np.shares_memory(first, second) and not np.shares_memory(second, third)
    assert [a.shape for a in (first, second, third)] == [(8, 64), (8, 32), (8, 64)]


def test_an_untuned_network_builds_with_default_schedules_and_says_so(tmp_path):
    g = mlp(layers=2)
    with tuning_db.Database(tmp_path / "empty.db") as db, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        net = build_graph(g, db=db)
    assert len(net.untuned()) == 2
    assert sum(issubclass(w.category, NoTunedConfigWarning) for w in caught) == 2
    x = np.ones((8, 32), np.float32)
    np.testing.assert_allclose(net(x=x)["y"], g.run_numpy(x=x)["y"], rtol=1e-4, atol=1e-5)


def test_a_transformer_block_merges_its_projections_and_matches_numpy(tmp_path):
    g = transformer_block(causal=True)
    groups, tasks = partition(g)
    weights = {t.task.workload_name: t.weight for t in tasks}
    assert weights["graph_layernorm"] == 2 and weights["graph_dense_x3"] == 1  # q, k and v: one kernel
    assert weights["graph_attention"] == 1 and weights["graph_dense_add"] == 1  # o with the residual
    (qkv,) = [grp for grp in groups if grp.chains == 3]
    assert [n.inputs[1].name for n in qkv.nodes] == ["q.w", "k.w", "v.w"]
    (qkv_task,) = [t.task for t in tasks if t.task.workload_name == "graph_dense_x3"]
    (leader,) = [p for p in qkv_task.space.sketch.plans if p.siblings]  # the space may share their loops
    assert len(leader.siblings) == 2
    with tuning_db.Database(tmp_path / "block.db") as db:
        result = tune_graph(g, trials=len(tasks) * 4, db=db, tuner="random", batch=4)
        assert all(s.trials >= 4 and math.isfinite(s.best) for s in result.states)
        net = build_graph(g, db=db)
    x = np.random.default_rng(5).uniform(-1, 1, (16, 32)).astype(np.float32)
    np.testing.assert_allclose(net(x=x)["y"], g.run_numpy(x=x)["y"], rtol=1e-4, atol=1e-5)


def test_only_chains_of_the_same_nodes_on_a_shared_input_merge():
    g = Graph("branches")
    x, y = g.input("x", (6, 8)), g.input("y", (6, 8))

    def dense(v, name, n_out=5):
        return g.dense(v, g.param(f"{name}.w", (n_out, v.shape[1])), g.param(f"{name}.b", (n_out,)))

    g.output("p", g.relu(dense(x, "p")))
    g.output("q", g.relu(dense(x, "q")))      # p's chain on x: merged with p
    g.output("r", dense(x, "r"))              # no relu: another chain
    g.output("s", g.relu(dense(y, "s")))      # p's chain, on another input
    g.output("t", g.relu(dense(x, "t", 3)))   # fewer features: other weight shapes
    groups = fuse(g)
    assert [grp.results for grp in groups] == [[g.outputs["p"], g.outputs["q"]], *([g.outputs[n]] for n in "rst")]
    assert [grp.chains for grp in groups] == [2, 1, 1, 1]
    assert [n.inputs[1].name for n in groups[0].nodes if n.kind.name == "dense"] == ["p.w", "q.w"]
    assert groups[0].kinds == "dense_relu_x2" and groups[0].inputs[0] is x


def test_a_merged_group_runs_its_chains_in_one_kernel_and_matches_numpy(tmp_path):
    g = Graph("branches")
    x = g.input("x", (6, 8))
    for name in "abc":
        g.output(name, g.relu(g.dense(x, g.param(f"{name}.w", (5, 8)), g.param(f"{name}.b", (5,)))))
    groups, tasks = partition(g)
    assert len(groups) == len(tasks) == 1 and groups[0].chains == 3
    with tuning_db.Database(tmp_path / "branches.db") as db:
        tune_graph(g, trials=6, db=db, tuner="random", batch=6)
        net = build_graph(g, db=db)
    xs = np.random.default_rng(2).uniform(-1, 1, (6, 8)).astype(np.float32)
    got, want = net(x=xs), g.run_numpy(x=xs)
    for name in "abc":
        np.testing.assert_allclose(got[name], want[name], rtol=1e-5, atol=1e-5)


def test_a_resnet_block_fuses_batch_norm_residual_and_relu_into_each_convolution(tmp_path):
    g = resnet_block()
    groups, tasks = partition(g)
    assert [grp.kinds for grp in groups] == ["conv2d_channel_affine_relu", "conv2d_channel_affine_add_relu"]
    assert len(tasks) == 2
    # batch norm is folded into constants: the epilogue has no square root, so the schedule
    # space fuses it (and the relu) into the convolution's tiles
    space = tasks[1].task.space
    assert "fused into" in space.describe() or "owns the tiles" in space.describe()
    with tuning_db.Database(tmp_path / "resnet.db") as db:
        result = tune_graph(g, trials=len(tasks) * 6, db=db, tuner="xgb", batch=6)
        assert all(s.trials >= 6 and math.isfinite(s.best) for s in result.states)
        net = build_graph(g, db=db)
    x = np.random.default_rng(5).uniform(-1, 1, (1, 8, 10, 10)).astype(np.float32)
    np.testing.assert_allclose(net(x=x)["y"], g.run_numpy(x=x)["y"], rtol=1e-4, atol=1e-5)


def test_batch_norm_folds_only_constants_and_a_group_never_runs_before_its_operands():
    g = Graph("bad_bn")
    x = g.input("x", (1, 2, 4, 4))
    gamma = g.input("gamma", (2,))  # an input, not a constant: nothing to fold
    p = [g.param(n, (2,)) for n in ("beta", "mean", "var")]
    with pytest.raises(GraphError, match="must be parameters"):
        g.batch_norm(x, gamma, *p)
    with pytest.raises(GraphError, match="conv2d: bias must have shape"):
        g.conv2d(x, g.param("w", (3, 2, 3, 3)), g.param("b", (2,)))
    with pytest.raises(GraphError, match="output height"):
        g.conv2d(x, g.param("w5", (3, 2, 5, 5)))
    # add(a, b) with b from a later group cannot join a's group, which would run before b exists
    order = Graph("order")
    x = order.input("x", (4, 8))
    a = order.dense(x, order.param("wa", (8, 8)))
    b = order.dense(x, order.param("wb", (8, 8)))
    order.output("y", order.add(a, b))
    assert [grp.kinds for grp in fuse(order)] == ["dense", "dense_add"]


def test_pooling_in_a_graph_starts_a_group_takes_its_relu_and_says_what_is_wrong():
    g = Graph("pool")
    x = g.input("x", (1, 3, 7, 7))
    with pytest.raises(GraphError, match="padding 2 must be smaller than the kernel 2"):
        g.pool2d(x, 2, padding=2)
    h = g.relu(g.pool2d(x, 3, stride=2, padding=1, pool_type="avg"))
    g.output("y", g.pool2d(h, [2, 2], stride=1))
    assert [grp.kinds for grp in fuse(g)] == ["pool2d_relu", "pool2d"]
    x_np = np.random.default_rng(0).uniform(-1, 1, (1, 3, 7, 7)).astype(np.float32)
    y = g.run_numpy(x=x_np)["y"]
    padded = np.pad(x_np, ((0, 0), (0, 0), (1, 1), (1, 1)))
    avg = np.maximum(np.array([[[[padded[0, c, 2 * i:2 * i + 3, 2 * j:2 * j + 3].sum() / 9 for j in range(4)]
                                 for i in range(4)] for c in range(3)]]), 0)
    want = np.array([[[[avg[0, c, i:i + 2, j:j + 2].max() for j in range(3)] for i in range(3)] for c in range(3)]])
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-6)
