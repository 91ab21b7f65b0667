"""Search strategies compared offline: replays over sampled recordings of four workloads.

    python bench/search_strategies.py [--record 3000] [--tuners xgb,ga,random,grid] [--seeds 20]
                                      [--trials 1000] [--only matmul] [--transfer]
                                      [--rerecord [--resume]]

For each workload below: load the recording kept in bench/data/recording-<name>.jsonl.gz
into a database of its own (bench/out/recording-<name>.db), or, when there is none or with
``--rerecord``, measure ``--record`` distinct random configs into it
(``autotune.replaying.sample``: the long part, 20-40 minutes per workload on 2 cores;
``--resume`` continues a recording that was stopped) and save them there. Then replay
every tuner with every seed against everything recorded for it, searching the recorded
configs only (``autotune.replay(..., restrict=True)``: a random sample is sparse, so other
proposals would nearly all miss), and write
  bench/out/strategies-<name>.json   the report: summary, curves, every run
  bench/out/strategies-<name>.png    best-so-far against trials and simulated seconds
and print each workload's table: trials and simulated seconds to 0.9x / 0.95x / 1.0x of
the recorded optimum. After it is measured, a recording's ``--retime`` fastest configs are
measured again with the full protocol (``autotune.replaying.retime``, stored as a run of
tuner "retime" and saved with the recording); the replays use those measurements
(``keep="newest"``).

A recording describes the space it was measured in: when a space gains knobs or rules,
records it now rejects are left out (the report counts them) and the region the new
knobs open was never recorded, so measure it again with ``--rerecord`` (which replaces the
kept file). ``--transfer`` adds the row xgb+transfer: xgb whose model first learns from the
other recordings of the same operator, as ``autotune tune --transfer`` learns from a
database's other shapes; ``TRANSFER_SOURCES`` are recorded for that alone.
"""
from __future__ import annotations

import argparse
import dataclasses
import gzip
import json
import math
import os
import sys
import time

from autotune.replaying import Recording, replay, retime, sample
from autotune.runner import TimingOptions
from autotune.task import Task
from tuning_db import Database

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "out")
#: Recordings kept with the project (gzipped JSON lines, ``autotune log export``'s format).
DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")

#: The recorded workloads: a square product, a product whose extents share few factors
#: with any tile (tails everywhere), a convolution and a product with a fused epilogue.
#: Each entry: (op, workload parameters).
WORKLOADS = {
    "matmul": ("matmul", dict(M=1024, N=1024, K=1024)),
    "matmul-odd": ("matmul", dict(M=255, N=509, K=771)),
    "conv2d": ("conv2d", dict(N=1, C=64, H=56, W=56, K=64, R=3, S=3, padding=1)),
    "dense": ("dense", dict(M=128, N=768, K=768, bias=True, relu=True)),
}
#: Recorded only to be learnt from: with ``--transfer``, xgb replays on a workload warm-started
#: from the other recordings of its operator, and dense has no other workload above.
TRANSFER_SOURCES = {
    "dense-wide": ("dense", dict(M=64, N=1024, K=512, bias=True, relu=True)),
}
RECORDED = {**WORKLOADS, **TRANSFER_SOURCES}

#: How the recordings are measured: one round each (a replay ranks configs; it does not
#: need the precision of a reported figure), a config twice as slow as the best so far
#: timed by one call, and a short timeout (a config slower than this is far from the
#: optimum whatever its exact time). matmul 1024^3 was recorded with slow_factor 3 and
#: a 3 s timeout; only configs far from the optimum are timed differently.
RECORD_OPTIONS = dict(timing=TimingOptions(rounds=1, slow_factor=2.0), timeout=1.0)
#: How many of a recording's fastest configs are measured again with the full protocol
#: (fastest of 3 rounds) before replaying: the order near the optimum decides "trials to
#: 0.95x", and a one-round sample can hold a lucky reading there.
RETIME = 64


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--record", type=int, default=3000, help="records wanted per workload (0: measure nothing)")
    parser.add_argument("--tuners", default="xgb,ga,random,grid")
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--trials", type=int, default=1000)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--only", default=None, choices=list(RECORDED),
                        help="one workload (a transfer source is recorded, not replayed)")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="replays run at a time")
    parser.add_argument("--record-only", action="store_true", help="measure the recordings, replay nothing")
    parser.add_argument("--resume", action="store_true",
                        help="with --rerecord: continue the recording bench/out/recording-<name>.db holds")
    parser.add_argument("--rerecord", action="store_true",
                        help="measure the chosen workloads' recordings again, from scratch, in the current schedule "
                             "space (a space that gained knobs or rules since a recording was kept is searched "
                             "where the recording never looked), replacing the kept files")
    parser.add_argument("--retime", type=int, default=RETIME, metavar="K",
                        help="measure the K fastest recorded configs again with the full protocol, once per "
                             "recording, and replay with those measurements (0: never)")
    parser.add_argument("--transfer", action="store_true",
                        help="also replay xgb warm-started from the other recordings of the same operator "
                             "(as `autotune tune --transfer` learns from a database's other shapes): row xgb+transfer")
    args = parser.parse_args()
    os.makedirs(OUT, exist_ok=True)
    chosen = [args.only] if args.only else list(RECORDED)
    # Transfer needs the other recordings too; they are loaded, measured only if chosen.
    wanted = list(RECORDED) if args.transfer else chosen
    recordings = {name: obtain_recording(name, args, measure=name in chosen) for name in wanted}
    if args.record_only:
        return
    goals = []
    replay_s = 0.0  # the replays alone, not loading or measuring the recordings
    for name in (n for n in chosen if n in WORKLOADS):
        recording = recordings[name]
        if recording is None:
            print(f"{name}: nothing recorded; measure it with --record N", flush=True)
            continue
        started = time.perf_counter()
        report = replay(recording, args.tuners.split(","), args.seeds, trials=args.trials,
                        batch_size=args.batch_size, restrict=True, on_run=_progress, jobs=args.jobs)
        sources = [r for other, r in recordings.items()
                   if other != name and r is not None and r.task.workload_name == recording.task.workload_name]
        if args.transfer and sources:
            warm = replay(recording, ["xgb"], args.seeds, trials=args.trials, batch_size=args.batch_size,
                          restrict=True, on_run=_progress, jobs=args.jobs, transfer=sources)
            report.runs[TRANSFER_ROW] = [dataclasses.replace(run, tuner=TRANSFER_ROW) for run in warm.runs["xgb"]]
            print(f"{name}: {TRANSFER_ROW} learns from {', '.join(o for o, r in recordings.items() if r in sources)} "
                  f"first", flush=True)
        elif args.transfer:
            print(f"{name}: no other recording of {recording.task.workload_name}, so no {TRANSFER_ROW} row",
                  flush=True)
        replay_s += time.perf_counter() - started
        stem = os.path.join(OUT, f"strategies-{name}")
        with open(stem + ".json", "w") as f:
            json.dump(report.to_json(), f)
        report.plot(stem + ".png")
        print(report.header())
        print("\n".join(report.table()))
        print(f"wrote {stem}.json and {stem}.png\n", flush=True)
        goals += goal_lines(name, report)
    if goals:
        print(f"trials to {GOAL_FRACTION:g}x of the recorded optimum at the {'/'.join(map(str, PERCENTS))}th "
              f"percentiles over {args.seeds} seeds (never: not within {args.trials} trials)")
        print("\n".join(goals))
        print(f"replays: {replay_s:.0f} s in all, {args.jobs} at a time")


#: The report row of xgb warm-started from the other recordings of the operator (``--transfer``).
TRANSFER_ROW = "xgb+transfer"


def obtain_recording(name: str, args, measure: bool) -> Recording | None:
    """``name``'s recording, in a database of its own, ``bench/out/recording-<name>.db``: the
    file kept in bench/data loaded afresh (so records of an older recording never mix in),
    or, with ``--rerecord`` or no kept file, ``--record`` random configs measured (resumed if
    that database already holds some) and saved there; re-timed once (``--retime``). None
    when there is nothing and ``measure`` is off (or ``--record 0``)."""
    op, params = RECORDED[name]
    task = Task(op, params, "cpu")
    saved = os.path.join(DATA, f"recording-{name}.jsonl.gz")
    path = os.path.join(OUT, f"recording-{name}.db")
    load = os.path.exists(saved) and not (measure and args.rerecord)
    if load or (measure and args.rerecord and not args.resume):
        for stale in (path, path + "-wal", path + "-shm"):
            if os.path.exists(stale):
                os.remove(stale)
    with Database(path) as db:
        if load:
            with gzip.open(saved, "rt") as f:
                print(f"{name}: {db.import_jsonl(f)} records loaded from {saved}", flush=True)
        have = len(db.records_for_task(task.key, "cpu"))
        if measure and have < args.record:
            print(f"{name}: measuring {args.record - have} random configs (have {have})", flush=True)
            sample(task, args.record, db, resume=True, batch_size=args.batch_size,  # the rest, no repeats
                   **RECORD_OPTIONS)
            _save(db, task, saved)
            have = len(db.records_for_task(task.key, "cpu"))
        if not have:
            return None
        if measure and args.retime and not any(run.tuner == "retime" for run in db.list_runs(task.key)):
            print(f"{name}: measuring the {args.retime} fastest recorded configs again (3 rounds)", flush=True)
            retime(Recording.from_db(db, task.key, "cpu", task=task), db, args.retime)
            _save(db, task, saved)
        return Recording.from_db(db, task.key, "cpu", task=task, keep="newest")  # re-timed ones count


def _save(db, task: Task, saved: str) -> None:
    with gzip.open(saved, "wt") as f:
        db.export_jsonl(f, task.key)
    print(f"{task.workload_name}: recording saved in {saved}", flush=True)


#: The fraction of the recorded optimum the goal is stated for, and the percentiles shown.
GOAL_FRACTION = 0.95
PERCENTS = (25, 50, 75)


def goal_lines(name: str, report) -> list[str]:
    """Per tuner, trials to GOAL_FRACTION at each of PERCENTS, and random search's exact
    figures (row "random exact": what infinitely many random runs would show, from how
    many recorded configs reach the goal); then, for xgb (and xgb+transfer), whether it
    needs at most a third of random's trials (sampled and exact) and fewer than GA's at
    every percentile ("never" is more than any number: xgb never getting there fails,
    random never getting there passes)."""
    table = report.trials_percentiles(GOAL_FRACTION, PERCENTS)
    if report.restrict:
        table[RANDOM_EXACT] = report.random_trials_percentiles(GOAL_FRACTION, PERCENTS)
    lines = [f"{name:12} {tuner:12} " + "  ".join(f"{_cell(v):>6}" for v in values) for tuner, values in table.items()]
    for guided in ("xgb", TRANSFER_ROW):
        trials = [_inf(v) for v in table.get(guided, [])]
        checks = []
        for baseline in ("random", RANDOM_EXACT):
            if trials and baseline in table:
                ok = all(math.isfinite(x) and x <= _inf(r) / 3 for x, r in zip(trials, table[baseline]))
                checks.append(f"<= {baseline}/3: {'yes' if ok else 'NO'}")
        if trials and "ga" in table:
            ok = all(x < _inf(g) for x, g in zip(trials, table["ga"]))
            checks.append(f"< ga: {'yes' if ok else 'NO'}")
        if checks:
            lines.append(f"{name:12} goal {guided:7} " + ", ".join(checks))
    return lines


#: The row of random search's exact figures (``ReplayReport.random_trials_percentiles``).
RANDOM_EXACT = "random exact"


def _inf(value) -> float:
    return math.inf if value is None else value


def _cell(value) -> str:
    return "never" if value is None else str(value)


def _progress(run) -> None:
    print(f"  {run.tuner} seed {run.seed}: {len(run.costs)} trials, {run.misses} misses, "
          f"stopped by {run.stopped}, {run.wall_s:.1f} s", file=sys.stderr, flush=True)


if __name__ == "__main__":
    main()
