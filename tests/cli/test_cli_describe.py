"""What the CLI says a tuned schedule does: ``autotune log show`` and the end-of-run report
describe the lowered code (``schedule.describe_lowered``), not only the config's decisions."""
from __future__ import annotations

import json
import re
from types import SimpleNamespace

import tuning_db
from autotune.cli.report import summary_lines
from autotune.task import Task
from schedule.config import Config

PARAMS = dict(K=16, M=16, N=16, dtype="float32", out_dtype=None, transpose_a=False, transpose_b=False)
KEY = "matmul" + json.dumps(PARAMS, sort_keys=True, separators=(",", ":"))
#: Outer loops of one iteration (16 = 2*2*4 rows, 1*2*8 columns per tile) "fused in parallel".
ONE_ITERATION_OUTER = {"C.tile.i": [2, 2, 4], "C.tile.j": [1, 2, 8], "C.rtile.k": 1, "C.at": "a",
                       "C.parallel": 2, "C.unroll": 0, "C.pack": "none"}
#: 2 x 2 outer tiles fused into one parallel loop of 4 iterations.
FOUR_PARALLEL_TILES = {"C.tile.i": [1, 2, 4], "C.tile.j": [1, 1, 8], "C.rtile.k": 4, "C.at": "a",
                       "C.parallel": 2, "C.unroll": 64, "C.pack": "A"}


def _seed(path, configs: list[dict]) -> list[int]:
    """A database with one ok record per config of matmul 16x16x16 (written with the library);
    returns the records' ids in order."""
    with tuning_db.Database(path) as db:
        target = tuning_db.TargetInfo("cpu", "test-cpu")
        run = db.start_run(KEY, "matmul", PARAMS, target, "random", 0, len(configs))
        db.add_records(run, [
            tuning_db.MeasureRecord(workload_key=KEY, workload_name="matmul", params=PARAMS, target=target,
                                    config=config, status="ok", costs=[1e-5], median_s=1e-5, gflops=0.8,
                                    trial=n)
            for n, config in enumerate(configs)])
        db.finish_run(run)
        return [r.id for r in db.history(run)]


def _section(out: str, name: str) -> list[str]:
    """The lines of the multi-line field ``name`` of ``log show``'s output."""
    lines = out.splitlines()
    start = next(n for n, line in enumerate(lines) if line.startswith(name + " "))
    width = len(lines[start]) - len(lines[start][len(name):].lstrip())
    section = [lines[start][width:]]
    for line in lines[start + 1:]:
        if line[:width].strip():
            break
        section.append(line[width:])
    return section


def test_log_show_describes_the_lowered_code_beside_the_decisions(cli):
    serial, parallel = _seed(cli.db, [{"sketch": "cpu-v1", "values": ONE_ITERATION_OUTER},
                                      {"sketch": "cpu-v1", "values": FOUR_PARALLEL_TILES}])
    out = cli.run("log", "show", str(serial)).stdout
    assert re.search(rf"^record +{serial}$", out, re.M)
    decisions = _section(out, "decisions")
    assert len(decisions) == 1 and "2 outer loop(s) fused in parallel" in decisions[0]  # what was asked
    lowered = _section(out, "lowered")
    assert lowered[0].startswith("parallel: none, one thread runs every loop")      # what runs
    assert not any("(parallel" in line for line in lowered)
    assert any(line.startswith("C.local [local 16x16 float32, 1 KiB, allocated at the top]: ") for line in lowered)

    out = cli.run("log", "show", str(parallel)).stdout
    lowered = _section(out, "lowered")
    assert lowered[0] == "parallel: i_outer_j_outer_fused, 4 iterations (OpenMP parallel for)"
    assert any(line.startswith("A.local [local 8x4 float32, 128 B, allocated in k_outer]") for line in lowered)
    source = cli.run("log", "show", str(parallel), "--source").stdout
    assert source.startswith(out) and source.count("#pragma omp parallel for") == 1


def test_log_show_of_a_config_that_no_longer_lowers_says_why(cli):
    stale = {"sketch": "cpu-v1", "values": dict(ONE_ITERATION_OUTER, **{"C.tile.i": [3, 3, 3]})}
    (record,) = _seed(cli.db, [stale])
    proc = cli.run("log", "show", str(record))
    assert "Traceback" not in proc.stderr
    assert re.search(rf"^record +{record}$", proc.stdout, re.M)
    lowered = _section(proc.stdout, "lowered")
    assert lowered[0].startswith("cannot lower this config: invalid config: ") and "C.tile.i" in lowered[0]


def test_tuning_report_describes_the_best_configs_lowered_code():
    task = Task("matmul", PARAMS)
    best = SimpleNamespace(config=Config.from_json({"sketch": "cpu-v1", "values": ONE_ITERATION_OUTER}), index=3,
                           result=SimpleNamespace(median_s=1e-5, ok=True))
    result = SimpleNamespace(history=[best], run_id=None, transfer_records=0, best=best, best_gflops=0.8,
                             timings={}, final=None, final_note=None)
    target = SimpleNamespace(describe=lambda: "test-cpu", compiler="")
    lines = summary_lines(task, target, result, SimpleNamespace(location="test.db"), {"why": "no anchor"})
    text = "\n".join(lines)
    assert re.search(r"^ +decisions \(what the config asks for\):\n +C: tiles .*fused in parallel", text, re.M)
    lowered = next(n for n, line in enumerate(lines) if line.startswith("lowered:"))
    assert lines[lowered] == "lowered:  parallel: none, one thread runs every loop " \
                             "(lowering removes loops of one iteration, parallel ones too)"
    assert lines[lowered + 1] == "          intermediate memory: peak 1 KiB live at once in one thread"
    assert lines[lowered + 2].startswith("          C.local [local 16x16 float32")
    assert lines[lowered + 3].startswith("          C: ") and "(vector x16 float32)" in lines[lowered + 3]
    assert lines[lowered + 4].startswith("anchor:")
