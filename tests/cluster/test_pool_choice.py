"""Which nodes of a cluster measure: those of the most common fingerprint, never a mix
(``executor.choose_pool``, on node descriptions made here: no cluster needed)."""
from __future__ import annotations

from dataclasses import replace

from autotune.cluster.executor import choose_pool
from autotune.cluster.nodes import NodeInfo
from schedule.targets import parse_target
from tuning_db import TargetInfo

CPU = parse_target("cpu")
AVX2 = parse_target("cpu:avx2")


def _node(node_id: str, target=CPU, device: str = "AMD EPYC", compiler: str = "gcc 12", version: str = "0.1.0"):
    described = TargetInfo("cpu", device, compiler, "-O3", f"host/{node_id}")
    return NodeInfo(node_id, target, described, version)


def test_the_most_common_fingerprint_measures_and_the_others_are_excluded_with_the_reason():
    infos = {n.node_id: n for n in [_node("a"), _node("b", AVX2), _node("c"), _node("d", compiler="gcc 13")]}
    pool, excluded = choose_pool(infos)
    assert pool == ["a", "c"]
    assert [info.node_id for info, _ in excluded] == ["b", "d"]
    assert all("fingerprint differs" in why for _, why in excluded)


def test_a_tie_goes_to_the_drivers_node_then_to_the_first():
    infos = {n.node_id: n for n in [_node("a"), _node("b", device="Intel Xeon")]}
    assert choose_pool(infos, prefer="b")[0] == ["b"]
    assert choose_pool(infos, prefer="elsewhere")[0] == ["a"]


def test_nodes_of_another_tool_version_or_core_count_do_not_mix():
    fewer_cores = replace(CPU, facts=replace(CPU.facts, cores=CPU.facts.cores + 1))
    infos = {n.node_id: n for n in [_node("a"), _node("b"), _node("c", version="0.2.0"), _node("d", fewer_cores)]}
    assert choose_pool(infos)[0] == ["a", "b"]


def test_a_gpu_target_is_refused_before_connecting():
    import pytest

    from autotune.cluster import ClusterError, RayExecutor

    with pytest.raises(ClusterError, match="only CPU targets"):
        RayExecutor("127.0.0.1:1", spec="cuda:h100")
