"""Throughput of tuning on a Ray cluster against the local executor: trials per minute.

    python bench/distributed.py [--trials 128] [--size 256] [--repeat 3] [--address HOST:PORT]

Without ``--address`` it measures three set-ups on this machine, one after another, with
the same tuner, seed and workload (matmul SIZE^3, random search, one measuring round):

    local       the default executor: a local build pool and a local measuring process
    ray 1 node  a Ray cluster of one node owning every core (builds as Ray tasks, one actor)
    ray 2 nodes two Ray nodes on this machine, the cores split between them

Both Ray set-ups run on the same cores as the local one, so the figure is the cost Ray
adds per trial (scheduling, moving kernels to the actors, results back), not a speed-up;
the goal is at most 5 % fewer trials per minute than local. With ``--address`` it measures
local against that cluster instead (point it at a real one: ``ray start --head`` on one
machine, ``ray start --address HEAD:6379`` on the others, this script on any of them).

Every set-up compiles into an empty compile cache of its own, so none profits from the
compiles of another. Results go to stdout; bench/RESULTS.md keeps the figures.
"""
from __future__ import annotations

import argparse
import atexit
import os
import platform
import shutil
import tempfile
import time

from autotune import Task, tune
from autotune.runner import TimingOptions

TIMING = TimingOptions(rounds=1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=128)
    parser.add_argument("--size", type=int, default=256, help="matmul M = N = K")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--address", default=None, help="a running Ray cluster (default: start local ones)")
    parser.add_argument("--repeat", type=int, default=3, help="passes over the set-ups; the median is shown")
    args = parser.parse_args()
    params = dict(M=args.size, N=args.size, K=args.size)
    cores = os.cpu_count() or 1
    print(f"matmul {args.size}^3, {args.trials} trials of random search, batches of {args.batch_size}, "
          f"{cores} cores, {platform.processor() or platform.machine()}")
    setups = {"local": lambda: run_local(params, args)}
    if args.address:
        setups[f"ray {args.address}"] = lambda: run_on_cluster(params, args, args.address)
    else:
        setups["ray 1 node"] = lambda: run_local_cluster(params, args, [cores])
        if cores >= 2:
            setups["ray 2 nodes"] = lambda: run_local_cluster(params, args, [cores // 2, cores - cores // 2])
    passes: dict[str, list[dict]] = {name: [] for name in setups}
    for n in range(args.repeat):  # the set-ups take turns, so a slow minute of the machine hits all alike
        for name, run in setups.items():
            passes[name].append(run())
            print(f"pass {n + 1}: {name}: {passes[name][-1]['per_minute']:.1f} trials/min", flush=True)
    rows = [(name, _median(runs)) for name, runs in passes.items()]
    base = rows[0][1]["per_minute"]
    print(f"\nmedian of {args.repeat} pass(es):")
    print(f"{'set-up':<14} {'trials':>6} {'ok':>4} {'wall s':>7} {'build s':>8} {'run s':>6} "
          f"{'trials/min':>10} {'vs local':>9}")
    for name, r in rows:
        print(f"{name:<14} {r['trials']:>6} {r['ok']:>4} {r['wall_s']:>7.1f} {r['build_s']:>8.1f} {r['run_s']:>6.1f} "
              f"{r['per_minute']:>10.1f} {r['per_minute'] / base - 1:>+9.1%}")


def _median(runs: list[dict]) -> dict:
    """The pass with the median trials per minute (its other columns with it)."""
    return sorted(runs, key=lambda r: r["per_minute"])[(len(runs) - 1) // 2]


def _fresh_compile_cache() -> None:
    """An empty compile cache for the next set-up (read from the environment by every
    compile, and inherited by Ray nodes started after this), removed when the bench exits."""
    path = tempfile.mkdtemp(prefix="autotune-bench-cache-")
    atexit.register(shutil.rmtree, path, ignore_errors=True)
    os.environ["AUTOTUNE_CACHE_DIR"] = path


def _summary(result, wall_s: float) -> dict:
    return dict(trials=len(result.history), ok=sum(t.result.ok for t in result.history), wall_s=wall_s,
                build_s=result.timings["build_s"], run_s=result.timings["run_s"],
                per_minute=len(result.history) / wall_s * 60)


def run_local(params: dict, args) -> dict:
    _fresh_compile_cache()
    task = Task("matmul", params)
    t0 = time.perf_counter()
    result = tune(task, trials=args.trials, tuner="random", batch_size=args.batch_size, timing=TIMING, seed=0)
    return _summary(result, time.perf_counter() - t0)


def run_on_cluster(params: dict, args, address: str) -> dict:
    from autotune.cluster import RayExecutor

    with RayExecutor(address) as executor:
        print(f"cluster {address}: {len(executor.hosts())} node(s) measuring; left out: {executor.excluded or 'none'}")
        task = Task("matmul", params, executor.target("cpu"))
        t0 = time.perf_counter()  # connected and the actors up: the run alone
        result = tune(task, trials=args.trials, tuner="random", batch_size=args.batch_size, timing=TIMING, seed=0,
                      executor=executor)
        return _summary(result, time.perf_counter() - t0)


def run_local_cluster(params: dict, args, cpus_per_node: list[int]) -> dict:
    from ray.cluster_utils import Cluster

    _fresh_compile_cache()
    os.environ.setdefault("RAY_worker_niceness", "0")  # Ray's default, 15, would slow its compiles
    node_args = dict(object_store_memory=100 * 1024 * 1024)
    cluster = Cluster(initialize_head=True, head_node_args=dict(node_args, num_cpus=cpus_per_node[0],
                                                                include_dashboard=False))
    try:
        for cpus in cpus_per_node[1:]:
            cluster.add_node(num_cpus=cpus, **node_args)
        cluster.wait_for_nodes()
        return run_on_cluster(params, args, cluster.address)
    finally:
        cluster.shutdown()


if __name__ == "__main__":
    main()
