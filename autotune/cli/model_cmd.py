"""``autotune model``: tune an ONNX network's tasks under one budget, build it, check it.

    autotune model net.onnx --trials 2000 --db tuning.db

Thin: the logic is ``autotune.graph`` (loading, partitioning, the task scheduler, the
build); this command opens the database and prints one line per batch and a summary.
"""
from __future__ import annotations

import click
import numpy as np

from . import options as opt


@click.command("model", short_help="Tune a whole network from an ONNX file.")
@click.argument("path", type=click.Path(exists=True, dir_okay=False))
@click.option("--trials", type=opt.POSITIVE_INT, default=2000, show_default=True,
              help="Trials for the whole network, shared among its tasks.")
@opt.target_spec_option("tune for")
@click.option("--tuner", type=click.Choice(opt.TUNERS), default="xgb", show_default=True,
              help="Search of each task: XGBoost cost model, genetic, random or grid.")
@click.option("--scheduler", type=click.Choice(["gradient", "round_robin"]), default="gradient", show_default=True,
              help="Which task gets the next batch: the one expected to lower the network's latency most "
                   "(Ansor's gradient rule), or each in turn.")
@click.option("--batch-size", type=opt.POSITIVE_INT, default=64, show_default=True,
              help="Trials given to a task at a time.")
@opt.db_option
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the search and the inputs.")
@click.option("--check/--no-check", default=True, show_default=True,
              help="After tuning, build the network and compare it with the same network on NumPy.")
def model_cmd(path, trials, target, tuner, scheduler, batch_size, db_url, seed, check):
    """Tune every task of the network in PATH (ONNX; see autotune.graph.from_onnx for the
    supported nodes) with TRIALS trials in all, then build it with the tuned kernels and
    check it against NumPy.

    Identical subgraphs are one task, tuned once; every trial is stored under its task's
    key, so running again continues, and autotune.build_graph reuses the results.

    \b
    Example:
        autotune model mlp.onnx --trials 2000 --db tuning.db
    """
    from ..graph import GraphError, build_graph, from_onnx, tune_graph
    from ..targets import resolve

    try:
        graph = from_onnx(path)
    except GraphError as exc:
        raise click.ClickException(str(exc)) from None
    chosen, note = resolve(target)
    if note:
        click.echo(note, err=True)

    def progress(result, i):
        task = result.tasks[i]
        state = result.states[i]
        click.echo(f"{result.trials:6d} trials: task {i} ({task.task.workload_name}, weight {task.weight}) has "
                   f"{state.trials}, best {state.best * 1e3:.4g} ms; network {result.latency * 1e3:.4g} ms")

    with opt.open_db(db_url) as db:
        result = tune_graph(graph, trials=trials, db=db, target=chosen, tuner=tuner, batch=batch_size,
                            scheduler=scheduler, seed=seed, progress=progress)
        click.echo(f"network {graph.name}: {len(result.tasks)} tasks, {result.trials} trials in "
                   f"{result.seconds:.0f} s; estimated latency {result.latency * 1e3:.4g} ms "
                   f"(each task's best time x its weight); database {db.location}")
        for i, (task, state) in enumerate(zip(result.tasks, result.states)):
            click.echo(f"  task {i}: {task.task.key}  weight {task.weight}, {state.trials} trials, "
                       f"best {state.best * 1e3:.4g} ms")
        if check:
            net = build_graph(graph, db=db, target=chosen)
            rng = np.random.default_rng(seed)
            inputs = {v.name: rng.uniform(-1, 1, v.shape).astype(v.dtype) for v in graph.inputs}
            got, want = net(**inputs), graph.run_numpy(**inputs)
            worst = max(float(np.max(np.abs(got[k] - want[k]) / (1 + np.abs(want[k])))) for k in want)
            if worst > 1e-3:
                raise click.ClickException(f"the built network differs from NumPy: relative error {worst:.3g}")
            click.echo(f"check: the built network matches NumPy (largest relative error {worst:.2g})")
