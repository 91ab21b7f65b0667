"""apply_best / lookup_best: the active database for builds, scoped with contextvars."""
from __future__ import annotations

import contextvars
import re
import threading
import warnings

import pytest

import tuning_db
from tuning_db import Database, NoTunedConfigWarning, active_database, apply_best, lookup_best
from tdb_helpers import CPU, GPU, MATMUL, key_of, make_record, start

KEY = key_of(*MATMUL)


@pytest.fixture
def tuned(db_url):
    with Database(db_url) as db:
        db.add_records(start(db), [make_record(0, median_s=2e-3), make_record(1, median_s=1e-3)])
        yield db


def test_active_inside_the_block_only(tuned):
    assert active_database() is None
    with apply_best(tuned) as db:
        assert db is tuned and active_database() is tuned
        best = lookup_best(KEY, "cpu")
        assert best.trial == 1 and best.target == CPU
        assert lookup_best(KEY, "cpu", CPU.device).trial == 1
    assert active_database() is None


def test_nested_blocks_restore_the_outer_database(tuned, tmp_path):
    with Database(tmp_path / "other.db") as other:
        with apply_best(tuned):
            with apply_best(other):
                assert active_database() is other
                with pytest.warns(NoTunedConfigWarning):
                    assert lookup_best(KEY, "cpu") is None
                with apply_best(None):
                    assert active_database() is None
                assert active_database() is other
            assert active_database() is tuned
        assert active_database() is None


def test_plain_call_sets_the_current_context(tuned):
    def body():
        apply_best(tuned)
        return active_database(), lookup_best(KEY, "cpu").trial

    assert contextvars.copy_context().run(body) == (tuned, 1)
    assert active_database() is None                    # the caller's context is untouched


def test_threads_do_not_share_the_active_database(tuned):
    seen = []
    with apply_best(tuned):
        thread = threading.Thread(target=lambda: seen.append(active_database()))
        thread.start()
        thread.join()
    assert seen == [None]


def test_missing_config_warns_and_returns_none(tuned):
    expected = f"no tuned config for {KEY} on cpu; using the default schedule (no tuning database is active)"
    with pytest.warns(NoTunedConfigWarning, match=re.escape(expected)):
        assert lookup_best(KEY, "cpu") is None
    with apply_best(tuned):
        expected = f"on {GPU.describe()}; using the default schedule (none in {tuned.location})"
        with pytest.warns(NoTunedConfigWarning, match=re.escape(expected)):
            assert lookup_best(KEY, "cuda", GPU.device) is None
        with pytest.warns(NoTunedConfigWarning, match="on cpu \\(AMD EPYC\\)"):
            assert lookup_best(KEY, "cpu", "AMD EPYC") is None
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert lookup_best(KEY, "cpu") is not None   # found: no warning


def test_apply_best_rejects_non_databases():
    with pytest.raises(TypeError, match="needs a tuning_db.Database"):
        apply_best("sqlite:///x.db")
    assert tuning_db.active_database() is None
