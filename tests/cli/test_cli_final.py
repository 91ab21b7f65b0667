"""The command line's final timing: what it reports is what it stores and what apply_best builds."""
from __future__ import annotations

import json
import re

import pytest

import autotune
import tuning_db
from cli_helpers import MATMUL_KEY, TINY_MATMUL


def test_the_reported_winner_and_ratio_are_the_stored_final_timing_and_apply_best_builds_it(cli):
    proc = cli.run(*TINY_MATMUL, "--trials", "8", "--final", "3")
    out = proc.stdout
    best = re.search(r"^best: +([\d.e+-]+) GFLOP/s \(.* ms\), config ([0-9a-f]{16}) \(trial \d+\): "
                     r"the final timing's median of (\d+) interleaved rounds \(timed again after it led\)$", out, re.M)
    assert best, out
    assert 5 <= int(best.group(3)) <= 15  # the confirmation's 5 rounds, more while its figure is imprecise
    assert re.search(r"^ +the search's best reading: [\d.e+-]+ GFLOP/s, trial \d+$", out, re.M)
    final_lines = re.findall(r"^(?:final: +| +)([* ]) ([0-9a-f]{16})  searching [\d.e+-]+, now [\d.e+-]+ GFLOP/s "
                             r"\(([\d.e+-]+)x the anchor\)(, confirmed \(first rounds [\d.e+-]+\))?$", out, re.M)
    assert len(final_lines) == 3 and [line[0] for line in final_lines].count("*") == 1
    screened = re.search(r"^ +\(chosen from the search's (\d+) fastest configs by screening rounds\)$", out, re.M)
    winner_line = next(line for line in final_lines if line[0] == "*")
    assert winner_line[1] == best.group(2) and winner_line[3]  # the winner's figure is its confirmation
    ratio = re.search(r"^anchor: +NumPy ([\d.e+-]+) GFLOP/s; ratio ([\d.e+-]+)x \(the median of the two's ratio in "
                      r"each of the final timing's (\d+) interleaved rounds \(timed again after it led\)\)$", out, re.M)
    assert ratio, out
    assert ratio.group(3) == best.group(3)
    assert ratio.group(2) == winner_line[2]
    interval = re.search(r"^ +90% interval of the ratio: ([\d.e+-]+)-([\d.e+-]+)x \(from the rounds' ratios; "
                         r"a re-timing is expected inside it\)$", out, re.M)
    assert interval, out  # 5 rounds or more give one
    low, high, reported = float(interval.group(1)), float(interval.group(2)), float(ratio.group(2))
    assert low <= reported * 1.001 and reported <= high * 1.001
    wide = max(reported - low, high - reported) > 0.05 * reported
    warned = re.search(r"^ +warning: the rounds disagree by more than 5% to either side: a re-timing may differ "
                       r"from this ratio by more than 5% ", out, re.M)
    assert bool(warned) == wide, out
    peak = re.search(r"^peak: +([\d.]+) GFLOP/s fp32 \(FMA throughput measured on \d+ cores?, \d+ lanes\); "
                     r"the best is (\d+) % of it$", out, re.M)
    assert peak, out  # a float32 workload on the CPU: the best's share of the measured peak
    assert int(peak.group(2)) == pytest.approx(100 * float(best.group(1)) / float(peak.group(1)), abs=1)

    with tuning_db.Database(cli.db) as db:
        search, final = db.list_runs()
        assert (search.tuner, final.tuner, final.n_records) == ("random", "final", 3)
        distinct = len({r.config_hash for r in db.history(search.id) if r.status == "ok"})
        assert (int(screened.group(1)) if screened else 0) == (min(9, distinct) if distinct > 3 else 0), out
        stored = db.best(MATMUL_KEY)
        assert stored.run_id == final.id and stored.config_hash == best.group(2)
        assert float(best.group(1)) == pytest.approx(stored.gflops, rel=5e-3)
        assert float(ratio.group(1)) == pytest.approx(final.anchor_gflops, rel=5e-3)
        assert float(ratio.group(2)) == pytest.approx(stored.gflops / final.anchor_gflops, rel=5e-3)
        task = autotune.Task("matmul", dict(M=16, N=16, K=16), target="cpu")
        assert autotune.build(task, db=db).config.hash == best.group(2)

    runs = json.loads(cli.run("log", "runs", "--json").stdout)
    assert [r["tuner"] for r in runs] == ["random", "final"]
    assert runs[1]["anchor_gflops"] == pytest.approx(float(ratio.group(1)), rel=5e-3) and runs[0]["anchor_gflops"] is None
    assert runs[1]["ratio_interval"] == pytest.approx([low, high], rel=5e-3) and runs[0]["ratio_interval"] is None


def test_final_zero_reports_the_search_best_and_stores_no_final_run(cli):
    out = cli.run(*TINY_MATMUL, "--trials", "4", "--no-anchor").stdout
    assert re.search(r"^best: +[\d.e+-]+ GFLOP/s \(.* ms\), trial \d+, config [0-9a-f]{16}$", out, re.M)
    assert not re.search(r"^final:", out, re.M)
    with tuning_db.Database(cli.db) as db:
        assert [r.tuner for r in db.list_runs()] == ["random"]


def test_no_anchor_leaves_numpy_out_of_the_final_timing(cli):
    out = cli.run(*TINY_MATMUL, "--trials", "4", "--final", "2", "--no-anchor").stdout
    assert re.search(r"^anchor: +no anchor: --no-anchor$", out, re.M)
    finals = re.findall(r"^(?:final: +| +)[* ] [0-9a-f]{16}  searching [\d.e+-]+, now [\d.e+-]+ GFLOP/s"
                        r"(?:, confirmed \(first rounds [\d.e+-]+\))?$", out, re.M)
    assert len(finals) == 2, out
    with tuning_db.Database(cli.db) as db:
        final = db.list_runs()[-1]
        assert final.tuner == "final" and final.anchor_gflops is None
