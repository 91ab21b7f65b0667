"""``autotune replay`` and ``autotune sample``: compare search strategies on recorded measurements.

    autotune sample --trials 3000 matmul -M 256 -N 256 -K 256      # a dense recording
    autotune replay --tuner xgb --tuner ga --seeds 20 --trials 1000 --plot strategies.png

Thin: the logic is ``autotune.replaying`` (the replay) and ``autotune.replay_report``
(what it shows); these commands open the database, pick the workload and print.
"""
from __future__ import annotations

import json
import os
import sys

import click

import te

from ..console import EXIT_INTERRUPTED
from . import options as opt

MISS_HELP = ("What a config missing from the recording does: skip (not a trial, not shown to the tuner) "
             "or fail (a failed trial that counts against --trials).")


@click.command("replay", short_help="Replay tuners on recorded measurements.")
@opt.db_option
@opt.workload_option("Workload to replay (key, unique prefix or op name); may be left out when the "
                     "database holds one workload.")
@opt.target_kind_option("Target kind of the records; may be left out when there is one.")
@click.option("--tuner", "tuners", type=click.Choice(opt.TUNERS), multiple=True,
              help="A search strategy to replay; repeat for several [default: xgb, ga and random].")
@click.option("--seeds", type=opt.POSITIVE_INT, default=20, show_default=True,
              help="Seeds per strategy (0 .. N-1).")
@click.option("--trials", type=opt.POSITIVE_INT, default=1000, show_default=True, help="Trials per replayed run.")
@click.option("--batch-size", type=opt.POSITIVE_INT, default=64, show_default=True,
              help="Candidates per batch, as in tuning.")
@click.option("--miss", type=click.Choice(["skip", "fail"]), default="skip", show_default=True, help=MISS_HELP)
@click.option("--max-misses", type=opt.POSITIVE_INT, default=None, metavar="N",
              help="With --miss skip: stop a run after N misses [default: 4 x --trials].")
@click.option("--restrict", is_flag=True,
              help="Search the recorded configs only: for a sampled recording (autotune sample), where "
                   "nearly every other proposal would miss.")
@click.option("--jobs", type=opt.POSITIVE_INT, default=None, metavar="N",
              help="Replay N runs at a time (same report) [default: the usable CPUs].")
@click.option("--transfer", is_flag=True,
              help="Tuners with a cost model (xgb) first learn from the records of the op's other workloads "
                   "in the database (up to 1000 of each), as `tune --transfer` does (it takes the newest 1000).")
@opt.json_flag("Print the report (curves and every run) as one JSON document.")
@click.option("--plot", type=click.Path(dir_okay=False, writable=True), default=None,
              help="Draw best-so-far curves per strategy into FILE (.png or .svg).")
def replay_cmd(db_url, workload, target, tuners, seeds, trials, batch_size, miss, max_misses, restrict, jobs,
               transfer, as_json, plot):
    """Replay tuners against the measurements stored for one workload: no builds, no device runs.

    Each recorded config "measures" as its recorded status and cost; model training and
    search run for real. Prints, per strategy, the trials and simulated seconds (recorded
    build + run) to reach 0.9x, 0.95x and 1.0x of the recorded optimum.

    \b
    Example:
        autotune replay --tuner xgb --tuner ga --seeds 20 --trials 1000 \\
            --plot strategies.png
    """
    if plot is not None and not plot.lower().endswith((".png", ".svg")):
        raise click.BadParameter("end the file name in .png or .svg", param_hint="--plot")
    from ..replaying import Recording, replay

    with opt.open_db(db_url, create=False) as db:  # replay only reads
        key = opt.pick_workload(db, workload, target, "replay")
        recording = Recording.from_db(db, key, target)
        sources = _other_workloads(db, recording) if transfer else []
    if transfer and not sources:
        raise click.UsageError(f"--transfer: the database holds no other {recording.task.workload_name} workload on "
                               f"{recording.task.target_kind} to learn from")
    if not as_json:
        click.echo(_describe(recording))
        for other in sources:
            click.echo(f"transfer: {min(len(other), TRANSFER_LIMIT)} records of {other.task.key}")
    progress = _progress_line if sys.stderr.isatty() else None
    report = replay(recording, tuners or ("xgb", "ga", "random"), seeds, trials=trials, batch_size=batch_size,
                    miss=miss, max_misses=max_misses, restrict=restrict, on_run=progress,
                    jobs=jobs or len(os.sched_getaffinity(0)), transfer=sources, transfer_limit=TRANSFER_LIMIT)
    if plot is not None:
        try:
            report.plot(plot)
        except OSError as exc:
            raise click.ClickException(f"cannot write {plot}: {exc.strerror or exc}") from None
    if as_json:
        click.echo(json.dumps(report.to_json()))
        return
    click.echo(report.header())
    for line in report.table():
        click.echo(line)
    if plot is not None:
        click.echo(f"plot: {plot}")


#: Records of each other workload a ``--transfer`` replay learns from (a recording is spread over
#: a space; ``tune --transfer`` takes the newest 1000 records of the op in all).
TRANSFER_LIMIT = 1000


def _other_workloads(db, recording) -> list:
    """The recordings of the other workloads of ``recording``'s op on its target kind (those
    whose workload can be rebuilt here and whose records fit the current space)."""
    from ..replaying import Recording

    task = recording.task
    out = []
    for summary in db.list_workloads(task.target_kind):
        if summary.name != task.workload_name or summary.key == task.key:
            continue
        try:
            out.append(Recording.from_db(db, summary.key, task.target_kind))
        except ValueError:  # not rebuildable here, or nothing fits the current space
            continue
    return out


def _describe(recording) -> str:
    """One line: how many configs, of what, from where, and what was left out."""
    line = (f"recording: {len(recording)} configs ({recording.n_ok} ok) of {recording.task.key} on "
            f"{recording.task.target_kind} from {recording.source}")
    if recording.duplicates:
        line += f"; {recording.duplicates} duplicate records (fastest ok kept)"
    if recording.unusable:
        line += f"; {recording.unusable} records outside the current space"
    return line


def _progress_line(run) -> None:
    best = min(run.costs, default=float("inf"))
    click.echo(f"  {run.tuner} seed {run.seed}: {len(run.costs)} trials, best {best * 1e3:.4g} ms, "
               f"{run.misses} misses, {run.wall_s:.1f} s", err=True)


@click.command("sample", short_help="Measure random configs of an op, for replay.",
               context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option("--trials", type=opt.POSITIVE_INT, required=True, help="Distinct random configs to measure.")
@opt.db_option
@opt.target_spec_option("measure on")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the sample and the inputs.")
@click.option("--timeout", type=opt.POSITIVE_FLOAT, default=10.0, show_default=True,
              help="Seconds one candidate may run before it counts as a timeout.")
@click.option("--rounds", type=opt.POSITIVE_INT, default=3, show_default=True, help="Measuring rounds per batch.")
@click.option("--batch-size", type=opt.POSITIVE_INT, default=64, show_default=True,
              help="Candidates built and measured per step.")
@click.option("--progress/--no-progress", default=None, help="Progress bar on stderr [default: when a terminal].")
@click.argument("op", type=click.Choice(te.list_workloads()), metavar="OP")
@click.argument("op_args", nargs=-1, type=click.UNPROCESSED, metavar="[OP OPTIONS]...")
def sample_cmd(trials, db_url, target, seed, timeout, rounds, batch_size, progress, op, op_args):
    """Measure N distinct random configs of an op into the database: a recording for `autotune replay`.

    The options of sample itself come before OP; OP OPTIONS, after it, are the op
    command's workload options (see `autotune OP --help`). OP is one of the op
    commands that `autotune --help` lists (matmul, conv2d, ...).

    \b
    Example:
        autotune sample --trials 3000 matmul -M 256 -N 256 -K 256
    """
    from .. import targets
    from ..replaying import sample
    from ..runner import TimingOptions
    from ..task import Task
    from .report import ProgressBar

    params = _op_params(op, list(op_args))
    chosen, note = targets.resolve(target)
    task = Task(op, params, chosen)
    if note:
        click.echo(note, err=True)
    with opt.open_db(db_url) as db:
        bar = ProgressBar(trials, progress, f"sample {op}")
        try:
            result = sample(task, trials, db, seed=seed, callbacks=[bar], batch_size=batch_size, timeout=timeout,
                            timing=TimingOptions(rounds=rounds))
        except KeyboardInterrupt:
            bar.close()
            click.echo(f"interrupted after {bar.trials_done} trials; every finished batch is in {db.location}",
                       err=True)
            raise SystemExit(EXIT_INTERRUPTED) from None
        bar.close()
        ok = sum(t.result.ok for t in result.history)
        best = "-" if result.best_gflops is None else f"{result.best_gflops:.4g}"
        click.echo(f"sampled {len(result.history)} configs of {task.key} on {task.target} ({ok} ok, "
                   f"best {best} GFLOP/s) into {db.location}, run {result.run_id}")


def _op_params(op: str, args: list[str]) -> dict:
    """The workload parameters of ``op`` parsed from ``args`` with the op command's options."""
    from .tune_cmd import workload_param_options

    command = click.Command(op, params=workload_param_options(op), add_help_option=False)
    with command.make_context(f"autotune sample {op}", args) as ctx:
        return {k: v for k, v in ctx.params.items() if v is not None}
