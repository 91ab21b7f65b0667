"""Workloads defined outside the library tune end to end: the DAG travels as JSON.

A workload registered in this module (the measuring process never imports it) and one made
with ``Task.from_tensors`` (registered nowhere) tune with every trial ok, resume, are reused
by ``apply_best`` in a fresh process, and tune from the command line with
``autotune tune --workload-file``.
"""
from __future__ import annotations

import json
import re
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import autotune
import te
import tuning_db
from autotune.features import FeatureCache
from autotune.runner import TimingOptions

REPO = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(REPO / "tests" / "te"))
from test_serialize import SMALL  # noqa: E402  (small parameters of every library workload)

FAST = TimingOptions(min_time=0.001, min_repeats=1, max_repeats=3, rounds=1)
REGISTERED = "tcw_scaled_gemv"  # registered by this module only


@te.register_workload(REGISTERED)
def scaled_gemv(N, K, scale=2.0):
    """y = scale * A x, with a relu: a workload the library does not have."""
    A = te.placeholder((N, K), name="A")
    x = te.placeholder((K,), name="x")
    k = te.reduce_axis((0, K), name="k")
    y = te.compute((N,), lambda i: te.sum(A[i, k] * x[k], axis=k), name="y")
    z = te.compute((N,), lambda i: te.max(y[i] * scale, 0.0), name="z")
    return [A, x, z]


def masked_rowsum(N=24, K=12):
    """Tensors for ``Task.from_tensors``: row sums of A over the columns where m is positive."""
    A = te.placeholder((N, K), name="A")
    m = te.placeholder((K,), dtype="int32", name="m")
    k = te.reduce_axis((0, K), name="k")
    s = te.compute((N,), lambda i: te.sum(A[i, k], axis=k, where=m[k] > 0), name="s")
    return [A, m, s]


UNREGISTERED = "tcw_masked_rowsum"


def _expected(wl, inputs):
    return wl.reference(*inputs)


def _tune(task, db, trials, **kw):
    return autotune.tune(task, trials=trials, tuner="random", db=db, batch_size=4, timing=FAST, **kw)


def _all_ok(result):
    return [(t.result.status.value, t.result.error) for t in result.history if not t.result.ok]


def test_the_measuring_process_never_sees_the_registry():
    assert UNREGISTERED not in te.list_workloads()
    assert REGISTERED in te.list_workloads() and REGISTERED not in _library_workloads()


def _library_workloads() -> list[str]:
    code = "import te; print(','.join(te.list_workloads()))"
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                          cwd=REPO).stdout.strip().split(",")


@pytest.mark.parametrize("kind", ["registered", "from_tensors"])
def test_a_custom_workload_tunes_with_every_trial_ok_and_stores_its_dag(kind, tmp_path):
    task = (autotune.Task(REGISTERED, dict(N=16, K=8)) if kind == "registered"
            else autotune.Task.from_tensors(masked_rowsum(), UNREGISTERED))
    with tuning_db.Database(tmp_path / "t.db") as db:
        result = _tune(task, db, trials=8)
        assert len(result.history) == 8 and not _all_ok(result)
        (run,) = db.list_runs(task.key)
        assert (run.status, run.n_ok) == ("finished", 8)
        assert db.workload_dag(task.key) == task.dag_json
        rebuilt = autotune.Task.from_db(db, task.key)
    assert rebuilt.key == task.key and rebuilt.workload is not task.workload
    inputs = task.workload.random_inputs(1)
    np.testing.assert_array_equal(rebuilt.workload.reference(*inputs)[0], _expected(task.workload, inputs)[0])


def test_a_from_tensors_key_is_the_name_and_the_dag_hash():
    task = autotune.Task.from_tensors(masked_rowsum(), UNREGISTERED)
    assert task.key == UNREGISTERED + json.dumps({"dag": task.workload.dag_hash}, separators=(",", ":"))
    assert task.params == {} and task.workload_name == UNREGISTERED
    assert autotune.Task.from_tensors(masked_rowsum(), UNREGISTERED).key == task.key
    assert autotune.Task.from_tensors(masked_rowsum(N=25), UNREGISTERED).key != task.key


def test_a_registered_workload_keeps_its_name_and_params_key():
    task = autotune.Task(REGISTERED, dict(N=16, K=8))
    assert task.key == REGISTERED + '{"K":8,"N":16,"scale":2.0}'


def test_from_tensors_refuses_a_list_that_is_not_a_workload():
    A, m, s = masked_rowsum()
    with pytest.raises(autotune.TaskError, match="placeholders first"):
        autotune.Task.from_tensors([s, A, m], "bad")


def test_the_feature_pool_rebuilds_the_workload_from_json():
    """Forked pool workers get the DAG, not a name: a workload registered nowhere lowers there."""
    import random

    task = autotune.Task.from_tensors(masked_rowsum(), UNREGISTERED)
    rng = random.Random(0)
    configs = list(dict.fromkeys(task.space.sample(rng) for _ in range(80)))
    assert len(configs) >= 32  # enough new configs for the pool (PARALLEL_MIN)
    pooled = FeatureCache(workers=2)
    try:
        xs = pooled.get_many(task, configs)
    finally:
        pooled.close()
    alone = FeatureCache(workers=1).get_many(task, configs)
    assert pooled.failures == 0
    np.testing.assert_array_equal(xs, alone)


def test_resume_continues_a_custom_workload(tmp_path):
    task = autotune.Task.from_tensors(masked_rowsum(), UNREGISTERED)
    with tuning_db.Database(tmp_path / "t.db") as db:
        first = _tune(task, db, trials=4)
        again = autotune.Task.from_tensors(masked_rowsum(), UNREGISTERED)  # built anew, same key
        second = _tune(again, db, trials=8, resume=True)
        runs = db.list_runs(task.key)
        assert len(second.history) == 8 and not _all_ok(second)
        assert [r.n_records for r in runs] == [4, 4] and runs[1].resumed_from == first.run_id
        measured = [t.config.hash for t in second.history]
        assert len(set(measured)) == 8  # nothing measured twice


FRESH_PROCESS = """
import sys, numpy as np, warnings
sys.path.insert(0, {here!r})
import autotune, te, tuning_db
import test_custom_workloads as m
warnings.simplefilter("error")   # a fallback to the default schedule would warn
db = tuning_db.Database({db!r}, create=False)
tasks = dict(registered=autotune.Task(m.REGISTERED, dict(N=16, K=8)),
             from_tensors=autotune.Task.from_tensors(m.masked_rowsum(), m.UNREGISTERED),
             from_db=autotune.Task.from_db(db, {key!r}))
for name, task in tasks.items():
    with tuning_db.apply_best(db):
        f = autotune.build(task)
    inputs = task.workload.random_inputs(seed=5)
    out = [np.empty(t.shape, t.dtype) for t in task.workload.outputs]
    f(*inputs, *out)
    np.testing.assert_allclose(out[0], task.workload.reference(*inputs)[0], rtol=1e-5, atol=1e-5)
    print(name, f.record.id)
"""


def test_apply_best_in_a_fresh_process_finds_the_records(tmp_path):
    db_path = tmp_path / "t.db"
    registered = autotune.Task(REGISTERED, dict(N=16, K=8))
    from_tensors = autotune.Task.from_tensors(masked_rowsum(), UNREGISTERED)
    with tuning_db.Database(db_path) as db:
        for task in (registered, from_tensors):
            _tune(task, db, trials=4)
        best = {"registered": db.best(registered.key).id, "from_tensors": db.best(from_tensors.key).id}
    best["from_db"] = best["from_tensors"]
    script = FRESH_PROCESS.format(here=str(HERE), db=str(db_path), key=from_tensors.key)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=tmp_path,
                          env=_env(tmp_path))
    assert proc.returncode == 0, proc.stderr
    found = dict(line.split() for line in proc.stdout.splitlines())
    assert {name: int(rid) for name, rid in found.items()} == best


# ---------------------------------------------------------------- autotune tune --workload-file

OPS_FILE = '''
import te

def gemv(N, K, dtype="float32"):
    A = te.placeholder((N, K), dtype=dtype, name="A")
    x = te.placeholder((K,), dtype=dtype, name="x")
    k = te.reduce_axis((0, K), name="k")
    return [A, x, te.compute((N,), lambda i: te.sum(A[i, k] * x[k], axis=k), name="y")]

@te.register_workload("tcw_file_gemv")
def registered_gemv(N, K=8):
    return gemv(N, K)

def nothing(N):
    return None
'''


def _env(root: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("AUTOTUNE_DB", "AUTOTUNE_DEBUG")}
    env.update(AUTOTUNE_CACHE_DIR=str(root / "kernel-cache"), XDG_CACHE_HOME=str(root / "xdg-cache"),
               PYTHONPATH=os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p))
    return env


def _cli(root: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "autotune.cli", *args], cwd=root, env=_env(root),
                          capture_output=True, text=True, timeout=300)


TINY = ["--trials", "4", "--batch-size", "4", "--tuner", "random", "--rounds", "1", "--no-anchor", "--db", "t.db"]


@pytest.fixture
def ops_file(tmp_path) -> Path:
    path = tmp_path / "my_ops.py"
    path.write_text(textwrap.dedent(OPS_FILE))
    return path


def test_cli_tunes_a_plain_function_of_a_file_and_resumes_it(ops_file, tmp_path):
    first = _cli(tmp_path, "tune", "--workload-file", "my_ops.py:gemv", "-p", "N=16", "-p", "K=8", *TINY)
    assert first.returncode == 0, first.stderr
    key = autotune.Task.from_tensors(_gemv_tensors(16, 8), "gemv").key
    assert f"workload: {key}" in first.stdout
    again = _cli(tmp_path, "tune", "--workload-file", "my_ops.py:gemv", "-p", "N=16", "-p", "K=8",
                 "--trials", "8", *TINY[2:], "--resume")
    assert again.returncode == 0, again.stderr
    with tuning_db.Database(tmp_path / "t.db") as db:
        runs = [r for r in db.list_runs(key) if r.tuner != "final"]  # each run's final timing aside
        assert [(r.n_records, r.n_ok) for r in runs] == [(4, 4), (4, 4)]
        assert db.workload_dag(key) is not None


def _gemv_tensors(N, K):
    A = te.placeholder((N, K), dtype="float32", name="A")
    x = te.placeholder((K,), dtype="float32", name="x")
    k = te.reduce_axis((0, K), name="k")
    return [A, x, te.compute((N,), lambda i: te.sum(A[i, k] * x[k], axis=k), name="y")]


def test_cli_tunes_a_registered_function_of_a_file_under_its_name(ops_file, tmp_path):
    proc = _cli(tmp_path, "tune", "--workload-file", f"{ops_file}:registered_gemv", "-p", "N=16", *TINY)
    assert proc.returncode == 0, proc.stderr
    assert 'workload: tcw_file_gemv{"K":8,"N":16}' in proc.stdout


@pytest.mark.parametrize("spec,params,status,message", [
    ("missing.py:gemv", [], 2, "no such file: missing.py"),
    ("my_ops.py:nope", [], 2, "my_ops.py has no function 'nope'"),
    ("my_ops.py", [], 2, "is not PATH.py:FUNC"),
    ("my_ops.py:nothing", ["-p", "N=3"], 1, "returned no tensors"),
    ("my_ops.py:gemv", ["-p", "N=3"], 2, "missing a required argument: 'K'"),
    ("my_ops.py:gemv", ["-p", "N"], 2, "'N' is not NAME=VALUE"),
])
def test_cli_workload_file_errors_are_one_clear_message(ops_file, tmp_path, spec, params, status, message):
    proc = _cli(tmp_path, "tune", "--workload-file", spec, *params, *TINY)
    assert proc.returncode == status, proc.stderr
    assert message in proc.stderr and "Traceback" not in proc.stderr


def test_cli_param_values_are_typed():
    from autotune.cli.tune_cmd import parse_param_value

    assert [parse_param_value(v) for v in ["4096", "-1", "0.5", "true", "False", "2,3", "float16", "a,b"]] == \
        [4096, -1, 0.5, True, False, [2, 3], "float16", "a,b"]


@pytest.mark.parametrize("name", sorted(SMALL))
def test_a_task_rebuilt_from_json_has_the_same_space_and_lowers_the_same(name):
    """What the feature pool and a stored DAG rebuild is the task itself: same key, knobs, loop IR."""
    import random

    task = autotune.Task(name, SMALL[name])
    rebuilt = autotune.Task.from_json(task.dag_json)
    assert rebuilt.key == task.key and rebuilt.space.knobs == task.space.knobs
    config = task.space.sample(random.Random(1))
    assert str(rebuilt.lower(config)) == str(task.lower(config))


def test_from_db_refuses_a_workload_without_a_stored_dag(tmp_path):
    with tuning_db.Database(tmp_path / "t.db") as db:
        with pytest.raises(autotune.TaskError, match="no stored DAG"):
            autotune.Task.from_db(db, 'matmul{"K":8,"M":8,"N":8}')


def test_records_of_a_workload_registered_nowhere_are_rebuilt_from_the_stored_dag(tmp_path):
    """log show, replay and Task.of_record rebuild a from-tensors task from the database."""
    from click.testing import CliRunner

    from autotune.cli import cli as autotune_cli
    from autotune.replaying import Recording

    task = autotune.Task.from_tensors(masked_rowsum(), UNREGISTERED)
    path = tmp_path / "t.db"
    with tuning_db.Database(path) as db:
        _tune(task, db, trials=4)
        record = db.best(task.key)
        with pytest.raises(autotune.TaskError, match="not registered here"):
            autotune.Task.of_record(record)
        assert autotune.Task.of_record(record, db).key == task.key
        recording = Recording.from_db(db, task.key)
    assert len(recording) == 4 and recording.task.key == task.key
    shown = CliRunner().invoke(autotune_cli, ["log", "show", str(record.id), "--ir", "--db", str(path)])
    assert shown.exit_code == 0, shown.output
    assert "cannot" not in shown.output and re.search(r"^lowered +\S", shown.output, re.M)
    assert "def kernel(A: float32[24, 12], m: int32[12], s: float32[24]):" in shown.output  # the loop IR
