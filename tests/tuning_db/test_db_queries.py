"""Queries: best and top-k, errors by status, history, listings, records for the tuner."""
from __future__ import annotations

import pytest

from tuning_db import TargetInfo
from tdb_helpers import CPU, GPU, MATMUL, key_of, make_record, start

KEY = key_of(*MATMUL)
CONV = ("conv2d", {"N": 1, "C": 64, "H": 56, "W": 56, "K": 64})
MATMUL_BIG = ("matmul", {"M": 1024, "N": 1024, "K": 1024, "dtype": "float32"})


def test_best_and_top_k_ignore_failures(db):
    run = start(db)
    db.add_records(run, [
        make_record(0, median_s=3e-3),
        make_record(1, "wrong_answer"),      # failures have no median and never rank
        make_record(2, median_s=1e-3),
        make_record(3, "timeout"),
        make_record(4, median_s=2e-3),
    ])
    assert db.best(KEY).trial == 2
    assert [r.trial for r in db.top_k(KEY, 10)] == [2, 4, 0]
    assert [r.trial for r in db.top_k(KEY, 2)] == [2, 4]
    assert db.best("matmul{}") is None


def test_best_matches_target_on_kind_and_device(db):
    cpu_run, gpu_run = start(db, CPU), start(db, GPU)
    db.add_records(cpu_run, [make_record(0, median_s=5e-3)])
    db.add_records(gpu_run, [make_record(1, median_s=1e-4, target=GPU)])
    assert db.best(KEY).target == GPU                       # any target
    assert db.best(KEY, CPU).target == CPU
    assert db.best(KEY, "cpu").target == CPU                # a bare kind
    other_flags = TargetInfo("cpu", CPU.device, "clang 17", "-O2", "elsewhere")
    assert db.best(KEY, other_flags).trial == 0             # compiler, flags, host not matched
    assert db.best(KEY, TargetInfo("cpu", "AMD EPYC 9654")) is None
    assert db.best(KEY, TargetInfo("cuda")).target == GPU   # no device: any device of the kind


def test_errors_grouped_by_status_with_latest_message(db):
    run = start(db)
    db.add_records(run, [
        make_record(0),
        make_record(1, "compile_error", error="error: old message"),
        make_record(2, "compile_error", error="error: newest message"),
        make_record(3, "timeout", error=None),
        make_record(4, "runtime_error", error="segfault"),
    ])
    db.add_records(run, [make_record(5, "timeout", error="")])  # '' is kept, unlike None
    db.add_records(run, [make_record(6, "timeout")])
    errors = db.errors_by_status(KEY)
    assert list(errors) == ["compile_error", "runtime_error", "timeout"]
    assert errors["compile_error"] == (2, "error: newest message")
    assert errors["runtime_error"] == (1, "segfault")
    assert errors["timeout"] == (3, "timeout in trial 6")
    assert db.errors_by_status() == errors
    assert db.errors_by_status(KEY, GPU) == {}
    assert db.errors_by_status("other{}") == {}


def test_history_and_best_so_far_follow_trial_order(db):
    run = start(db)
    db.add_records(run, [make_record(2, median_s=1e-3), make_record(0, "invalid")])
    db.add_records(run, [make_record(1, median_s=2e-3), make_record(3, median_s=4e-3)])
    assert [r.trial for r in db.history(run)] == [0, 1, 2, 3]
    flops = 2 * 64**3
    assert db.best_so_far(run) == [
        (0, None),
        (1, pytest.approx(flops / 2e-3 / 1e9)),
        (2, pytest.approx(flops / 1e-3 / 1e9)),
        (3, pytest.approx(flops / 1e-3 / 1e9)),
    ]
    assert db.history(999) == [] and db.best_so_far(999) == []


def test_listings_count_records(db):
    r1, r2 = start(db, CPU), start(db, GPU)
    r3 = start(db, CPU, workload=CONV, tuner="random")
    db.add_records(r1, [make_record(0, median_s=2e-3), make_record(1, "timeout")])
    db.add_records(r2, [make_record(0, median_s=1e-4, target=GPU)])
    db.add_records(r3, [make_record(i, "compile_error", workload=CONV) for i in range(3)])
    start(db, GPU, workload=MATMUL_BIG)   # a run without records yet
    db.finish_run(r1)

    workloads = {w.key: w for w in db.list_workloads()}
    assert workloads[KEY].n_records == 3 and workloads[KEY].name == "matmul"
    assert workloads[KEY].best_gflops == pytest.approx(2 * 64**3 / 1e-4 / 1e9)
    assert workloads[key_of(*CONV)][2:] == (3, None)             # (n_records, best_gflops)
    assert workloads[key_of(*MATMUL_BIG)][2:] == (0, None)
    assert [w.key for w in db.list_workloads(CPU)] == [key_of(*CONV), KEY]   # sorted by name

    targets = {t.target: t for t in db.list_targets()}
    assert targets[CPU][1:] == (2, 5) and targets[GPU][1:] == (1, 1)   # (n_workloads, n_records)

    runs = db.list_runs()
    assert [r.id for r in runs] == [r1, r2, r3, r3 + 1]
    assert [(r.n_records, r.n_ok) for r in runs] == [(2, 1), (1, 1), (3, 0), (0, 0)]
    assert runs[0].status == "finished" and runs[1].status == "running"
    assert runs[2].best_gflops is None and runs[2].tuner == "random" and runs[2].target == CPU
    assert [r.id for r in db.list_runs(KEY)] == [r1, r2]


def test_records_for_the_tuner(db):
    run = start(db)
    db.add_records(run, [make_record(0), make_record(1, "timeout"), make_record(2)])
    gpu_run = start(db, GPU)
    db.add_records(gpu_run, [make_record(3, target=GPU)])
    task_records = db.records_for_task(KEY, CPU)
    assert [r.trial for r in task_records] == [0, 1, 2]                 # failures included
    assert db.measured_hashes(KEY, CPU) == {r.config_hash for r in task_records}
    assert db.measured_hashes(KEY, GPU) == {make_record(3).config_hash}
    assert db.measured_hashes("nothing{}", CPU) == set()


def test_records_similar_are_other_workloads_of_the_same_op(db):
    small, big, conv = start(db), start(db, workload=MATMUL_BIG), start(db, workload=CONV)
    db.add_records(small, [make_record(0)])
    db.add_records(big, [make_record(i, workload=MATMUL_BIG) for i in range(3)])
    db.add_records(conv, [make_record(0, workload=CONV)])
    similar = db.records_similar("matmul", CPU, exclude_key=KEY, limit=10)
    assert [r.trial for r in similar] == [2, 1, 0]                      # newest first
    assert {r.workload_key for r in similar} == {key_of(*MATMUL_BIG)}
    assert len(db.records_similar("matmul", CPU, exclude_key=KEY, limit=2)) == 2
    assert len(db.records_similar("matmul", None, exclude_key=None)) == 4
    assert db.records_similar("matmul", GPU, exclude_key=KEY) == []
