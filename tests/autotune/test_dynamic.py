"""A dimension that changes at run time: buckets tuned, any size in range served by splitting
along it (``autotune.dynamic``)."""
from __future__ import annotations

import numpy as np
import pytest

import tuning_db
from autotune.dynamic import DynamicDim, DynamicShapeError, bucket_tasks, build_buckets, plan_calls, tune_buckets


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("AUTOTUNE_CACHE_DIR", str(tmp_path / "cache"))


def test_plans_cover_the_rows_at_the_least_measured_cost():
    costs = {1: 1.0, 8: 3.0, 64: 10.0}
    assert plan_calls(64, costs) == ((64, 64),)
    assert plan_calls(72, costs) == ((64, 64), (8, 8))
    assert plan_calls(70, costs) == ((64, 64), (8, 6))  # 8 padded from 6 (3.0) beats six calls of 1 (6.0)
    assert plan_calls(2, costs) == ((1, 1), (1, 1))  # two of 1 (2.0) beat 8 padded from 2 (3.0)
    assert plan_calls(40, {8: 1.0, 64: 4.0}) == ((64, 40),)  # 64 padded (4.0) beats five 8s (5.0)
    for rows in range(1, 200):
        assert sum(served for _, served in plan_calls(rows, costs)) == rows


def test_a_dimension_is_split_only_where_rows_are_independent():
    with pytest.raises(DynamicShapeError, match="no output's first extent follows K"):
        bucket_tasks("dense", dict(M=8, N=4), DynamicDim("K", 1, 8, (4, 8)))
    with pytest.raises(DynamicShapeError, match="reads A by its row index along M"):
        bucket_tasks("matmul", dict(N=4, K=8, transpose_a=True), DynamicDim("M", 1, 8, (4, 8)))
    with pytest.raises(DynamicShapeError, match="leave it out"):
        bucket_tasks("dense", dict(M=8, N=4, K=4), DynamicDim("M", 1, 8, (4, 8)))
    with pytest.raises(DynamicShapeError, match="outside"):
        DynamicDim("M", 1, 8, (4, 16))
    assert DynamicDim("M", 1, 256).buckets == (1, 8, 64, 256)  # without buckets: a geometric ladder
    assert DynamicDim("M", 3, 30).buckets == (3, 24, 30) and DynamicDim("M", 5, 5).buckets == (5,)
    assert sorted(bucket_tasks("matmul", dict(N=4, K=8), DynamicDim("M", 1, 8, (8, 4, 8)))) == [4, 8]
    # a fixed extent equal to a bucket (N = 32) is not taken for the dynamic one
    assert sorted(bucket_tasks("dense", dict(N=32, K=32), DynamicDim("M", 1, 32, (8, 32)))) == [8, 32]


@pytest.mark.parametrize("tails", [True, False])
def test_every_batch_in_range_matches_numpy_with_weights_packed_or_not(tmp_path, tails):
    dim = DynamicDim("M", 1, 40, (1, 8, 32))
    with tuning_db.Database(tmp_path / "t.db") as db:
        results = tune_buckets("dense", dict(N=24, K=16), dim, trials=4, db=db, tuner="random", batch_size=4)
        assert sorted(results) == [1, 8, 32] and all(r.best is not None for r in results.values())
        f = build_buckets("dense", dict(N=24, K=16), dim, db=db, tails=tails)
    assert all(k.record is not None for k in f.kernels.values())
    rng = np.random.default_rng(0)
    w = rng.standard_normal((24, 16)).astype(np.float32)
    b = rng.standard_normal(24).astype(np.float32)
    packed = f.pack("W", w)
    for m in range(1, 41):
        x = rng.standard_normal((m, 16)).astype(np.float32)
        y = np.full((m, 24), np.nan, np.float32)
        f(x, w if m % 2 else packed, b, y)
        np.testing.assert_allclose(y, np.maximum(x @ w.T + b, 0), rtol=1e-4, atol=1e-5, err_msg=f"M={m}")
        assert sum(served for _, served in f.plan(m)) == m
    padded_calls = {(bucket, served) for m in range(1, 41) for bucket, served in f.plan(m) if served < bucket}
    assert padded_calls  # some sizes need a call that no bucket fits
    if tails:  # each ran its bucket's schedule compiled at its own size
        assert set(f._tails) == padded_calls
        for (bucket, served), kernel in f._tails.items():
            assert kernel.config == f.kernels[bucket].config and kernel.func.params[0].shape == (served, 16)
        assert not f._scratches
    else:
        assert f.tail(8, 5) is None and f._scratches
    with pytest.raises(DynamicShapeError, match="outside the tuned range 1..40"):
        f(np.zeros((41, 16), np.float32), w, b, np.zeros((41, 24), np.float32))
    with pytest.raises(DynamicShapeError, match="must agree"):
        f(np.zeros((4, 16), np.float32), w, b, np.zeros((5, 24), np.float32))


def test_log_show_lists_the_buckets_stored_beside_a_record(tmp_path):
    import json
    import re

    from click.testing import CliRunner

    from autotune.cli import cli

    dim = DynamicDim("M", 1, 32, (1, 8, 32))
    with tuning_db.Database(tmp_path / "t.db") as db:
        tune_buckets("dense", dict(N=8, K=8), dim, trials=2, db=db, tuner="random", batch_size=2)
        tune_buckets("dense", dict(N=16, K=8), DynamicDim("M", 1, 4, (4,)), trials=2, db=db, tuner="random",
                     batch_size=2)  # another N: not one of these buckets
        (record,) = [r for r in db.top_k(bucket_tasks("dense", dict(N=8, K=8), dim)[8].key, 1)]
    out = CliRunner().invoke(cli, ["log", "show", str(record.id), "--db", str(tmp_path / "t.db")])
    assert out.exit_code == 0, out.output
    assert re.search(r"^sizes +M: 1, \[8\], 32 \(stored sizes; \[this record's\]\)$", out.output, re.M), out.output
    doc = json.loads(CliRunner().invoke(cli, ["log", "show", str(record.id), "--json", "--db",
                                              str(tmp_path / "t.db")]).output)
    assert doc["sizes"] == {"M": [1, 8, 32]}


def test_warm_times_each_plan_against_one_tail_of_a_larger_bucket_and_keeps_the_faster(tmp_path, monkeypatch):
    import autotune.dynamic as dynamic

    dim = DynamicDim("M", 1, 32, (1, 8, 32))
    with tuning_db.Database(tmp_path / "t.db") as db:
        tune_buckets("dense", dict(N=24, K=16), dim, trials=2, db=db, tuner="random", batch_size=2)
        f = build_buckets("dense", dict(N=24, K=16), dim, db=db)
    timings = iter([3.0, 2.0, 1.0, 1.0, 2.0, 3.0])  # the planned calls, then 8's and 32's schedule on 5 rows

    def scripted(fn):
        fn()  # it runs (and compiles its tails); its time is the script's, not the clock's
        return next(timings)

    monkeypatch.setattr(dynamic, "_seconds_per_call", scripted)
    f.warm(5)
    assert f.plan(5) == ((32, 5),) and (32, 5) in f._tails
    kept = f.plan(6)
    f.warm(6)  # the plan it had was the fastest: kept
    assert f.plan(6) == kept
    rng = np.random.default_rng(1)
    w, b = rng.standard_normal((24, 16)).astype(np.float32), rng.standard_normal(24).astype(np.float32)
    for m in (5, 6):
        x = rng.standard_normal((m, 16)).astype(np.float32)
        y = np.full((m, 24), np.nan, np.float32)
        f(x, w, b, y)
        np.testing.assert_allclose(y, np.maximum(x @ w.T + b, 0), rtol=1e-4, atol=1e-5)
