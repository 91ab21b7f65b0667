"""Cost-model quality on the records of a tuning database: held-out pairwise accuracy and top-k.

    python bench/model_quality.py [--db bench/out/convergence.db] [--splits 4]
    python bench/model_quality.py --db gpu_suite_out/gpu_suite.db --target cuda   # GPU records
    python bench/model_quality.py --recordings     # the search-strategy recordings in bench/data
    python bench/model_quality.py --recordings --curve 250 500 1000 2000   # accuracy by records trained on

For every workload in the database, and for each of its runs and for all its records
together: fit the XGBoost ranking model on a random 80% of the successful records,
score the other 20% and print TenSet's metrics (pairwise ranking accuracy, top-1 and
top-5 score) and the top-10 recall (how many of the ten fastest held-out records the model
ranks in its top ten), averaged over ``--splits`` random splits (seed 0 first, as the
convergence bench uses).

Why per run *and* pooled: the held-out records of a model-guided run crowd around its
best configs, where many pairs differ by less than the measurement noise and are
coin flips for any model; random and genetic runs spread over the space. The pooled
figure is the closest to "how well does the model rank this workload's schedules".

``--recordings`` measures the same on the recordings ``bench/search_strategies.py``
replays (about 3000 random configs of each workload, the fastest re-timed): a uniform
sample of the space, the records the current space rejects left out as the replay
leaves them out.

``--curve N ...`` prints, instead, the held-out pairwise accuracy after training on N of
the records (the same held-out 20 % for every N; ``autotune.cost_model.learning_curve``):
whether the model is short of records or of information.

The pooled records of a database hold each config once, its newest measurement (a
re-timing or a run's final timing measures configs again; both copies would otherwise
land on either side of a split).
"""
from __future__ import annotations

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # the recordings' bench

from autotune.cost_model import evaluate_holdout, learning_curve  # noqa: E402
from autotune.features import FeatureCache  # noqa: E402
from autotune.task import Task, TaskError  # noqa: E402
from schedule.config import Config, ConfigError  # noqa: E402
from tuning_db import Database  # noqa: E402

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "out")
#: The group of a workload's records from all its runs together.
POOLED = "all runs"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", default=os.path.join(OUT, "convergence.db"))
    parser.add_argument("--splits", type=int, default=4, help="random 80/20 splits to average")
    parser.add_argument("--target", default=None, metavar="KIND",
                        help="only records of this target kind (cpu, cuda, cuda_sim); default: each "
                             "workload's first run's kind")
    parser.add_argument("--recordings", action="store_true",
                        help="measure on the recordings kept in bench/data instead of a database")
    parser.add_argument("--curve", type=int, nargs="+", metavar="N",
                        help="held-out pairwise accuracy after training on N records, for each N")
    args = parser.parse_args()
    if args.recordings:
        return _recordings(args.splits, args.curve)
    if not os.path.exists(args.db):
        raise SystemExit(f"no database at {args.db}; run bench/tune_convergence.py first or pass --db")
    cache = FeatureCache(workers=max(1, min(2, os.cpu_count() or 1)))
    with Database(args.db) as db:
        for wl in db.list_workloads():
            task, groups = _successful_records(db, wl.key, args.target)
            if task is None:
                continue
            print(f"workload {wl.key} on {task.target}")
            if args.curve:
                configs, costs = groups[POOLED]
                if len(costs) < 10:
                    print(f"  {len(costs)} successful records: too few for a curve")
                    continue
                _print_curve(f"{len(costs)} records", cache.get_many(task, configs), costs, args.curve,
                             args.splits)
                continue
            print(f"  {'records':<28} {'n':>5} {'pairwise':>9} {'top-1':>6} {'top-5':>6} {'rec@10':>6}")
            for key, (configs, costs) in groups.items():
                if len(configs) < 10:
                    continue
                mean = _quality(cache, task, configs, costs, args.splits)
                print(f"  {key:<28} {len(costs):>5} {mean['pairwise_accuracy']:>9.3f} {mean['top1']:>6.3f} "
                      f"{mean['top5']:>6.3f} {mean['recall10']:>6.3f}")
    cache.close()


def _quality(cache: FeatureCache, task: Task, configs: list, costs: list, splits: int) -> dict:
    """Held-out pairwise accuracy, top-1, top-5 and top-10 recall, averaged over ``splits`` 80/20 splits."""
    x = cache.get_many(task, configs)
    c = np.asarray(costs)
    qs = [evaluate_holdout(x, c, test_fraction=0.2, seed=s) for s in range(splits)]
    return {m: float(np.mean([q[m] for q in qs])) for m in ("pairwise_accuracy", "top1", "top5", "recall10")}


def _print_curve(label: str, x: np.ndarray, costs: list, sizes: list[int], splits: int) -> None:
    """One line: the held-out pairwise accuracy after training on each of ``sizes`` records."""
    curve = learning_curve(x, costs, sizes, test_fraction=0.2, splits=splits)
    print(f"{label:<22} " + "  ".join(f"{n}: {a:.3f}" for n, a in curve.items())
          + f"   ({splits} splits, the same 20 % held out)", flush=True)


def _recordings(splits: int, curve: list[int] | None = None) -> None:
    """The model's held-out quality on each recording of ``bench/search_strategies.py``
    (with ``curve``: its learning curve)."""
    from search_strategies import RECORDED, obtain_recording

    cache = FeatureCache(workers=max(1, min(2, os.cpu_count() or 1)))
    if not curve:
        print(f"{'recording':<12} {'n':>5} {'pairwise':>9} {'top-1':>6} {'top-5':>6} {'rec@10':>6}   "
              f"({splits} splits, 80/20)")
    for name in RECORDED:
        recording = obtain_recording(name, argparse.Namespace(rerecord=False), measure=False)
        if recording is None:
            print(f"{name:<12} (no recording)")
            continue
        configs = [c for c in recording.configs() if recording.get(c).ok]
        costs = [recording.get(c).cost for c in configs]
        if curve:
            _print_curve(name, cache.get_many(recording.task, configs), costs, curve, splits)
            continue
        q = _quality(cache, recording.task, configs, costs, splits)
        print(f"{name:<12} {len(configs):>5} {q['pairwise_accuracy']:>9.3f} {q['top1']:>6.3f} {q['top5']:>6.3f} "
              f"{q['recall10']:>6.3f}", flush=True)
    cache.close()


def _successful_records(db, workload_key: str, kind: str | None = None
                        ) -> tuple[Task | None, dict[str, tuple[list, list]]]:
    """The workload's task (on its first run's target, or ``kind``) and its ok records:
    (configs, seconds) per run, and pooled under ``POOLED`` (each config once, its newest
    record). (None, {}) when the workload has no run of that kind or cannot be rebuilt in
    this process."""
    runs = sorted((r for r in db.list_runs(workload_key) if kind is None or r.target.kind == kind),
                  key=lambda r: r.id)
    if not runs:
        return None, {}
    first = runs[0]
    try:
        task = Task(first.workload_name, dict(db.history(first.id)[0].params), first.target.kind)
    except (TaskError, IndexError) as exc:
        print(f"{workload_key}: skipped ({exc})")
        return None, {}
    groups: dict[str, tuple[list, list]] = {}
    newest: dict[str, tuple[Config, float]] = {}  # config hash -> the newest (config, seconds)
    for run in runs:
        if run.target.kind != task.target_kind:
            continue  # one target per workload: the first run's
        name = f"run {run.id} ({run.tuner}, seed {run.seed})"
        for rec in db.history(run.id):
            if rec.status != "ok" or not rec.median_s:
                continue
            try:
                config = Config.from_json(rec.config)
            except ConfigError:
                continue
            configs, costs = groups.setdefault(name, ([], []))
            configs.append(config)
            costs.append(rec.median_s)
            newest[config.hash] = (config, rec.median_s)
    groups[POOLED] = ([c for c, _ in newest.values()], [s for _, s in newest.values()])
    return task, groups


if __name__ == "__main__":
    main()
