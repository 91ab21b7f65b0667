"""The library side of the command line: ``autotune.build`` with the best stored config, the anchors."""
from __future__ import annotations

import numpy as np
import pytest

import autotune
import tuning_db
from autotune import anchor

from cli_helpers import MATMUL_KEY


@pytest.fixture(autouse=True)
def kernel_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("AUTOTUNE_CACHE_DIR", str(tmp_path / "kernel-cache"))


def _check(f, task):
    inputs = task.workload.random_inputs(seed=1)
    (ref,) = task.workload.reference(*inputs)
    out = np.zeros_like(ref)
    f(*inputs, out)
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4)


def test_build_uses_the_best_stored_config(tuned):
    cli, _ = tuned
    task = autotune.Task("matmul", dict(M=16, N=16, K=16))
    assert task.key == MATMUL_KEY
    with tuning_db.Database(cli.db) as db:
        best = db.best(task.key, "cpu")
        with tuning_db.apply_best(db):
            f = autotune.build(task)
        assert autotune.build(task, db=db).config == f.config
    assert f.config.hash == best.config_hash and f.record == best
    _check(f, task)


def test_build_without_a_record_warns_and_uses_the_default(tmp_path):
    task = autotune.Task("matmul", dict(M=8, N=12, K=4))
    with tuning_db.Database(tmp_path / "empty.db") as db:
        with pytest.warns(tuning_db.NoTunedConfigWarning, match="using the default schedule"):
            f = autotune.build(task, db=db)
    assert f.config == autotune.default_config(task) and f.record is None
    with pytest.warns(tuning_db.NoTunedConfigWarning, match="no tuning database is active"):
        assert autotune.build(task).config == f.config
    _check(f, task)


def test_tune_and_build_are_the_functions_whatever_the_import_order():
    import importlib

    importlib.import_module("autotune.tuning")
    importlib.import_module("autotune.dispatch")
    assert callable(autotune.tune) and autotune.tune.__name__ == "tune"
    assert callable(autotune.build) and autotune.build.__name__ == "build"


@pytest.mark.parametrize("name, params", [
    ("matmul", dict(M=5, N=7, K=3, transpose_a=True, transpose_b=True)),
    ("batch_matmul", dict(B=2, M=5, N=7, K=3, transpose_b=True)),
    ("dense", dict(M=5, N=7, K=3)),
    ("dense", dict(M=5, N=7, K=3, bias=False, relu=False)),
    ("conv2d", dict(N=2, C=3, H=9, W=7, K=4, R=3, S=2, stride=[2, 1], padding=[1, 2], dilation=[1, 2])),
    ("conv2d", dict(N=1, C=5, H=8, W=8, K=6, R=3, S=3, padding=1, layout="NHWC")),
])
def test_numpy_anchor_computes_the_workload(name, params):
    task = autotune.Task(name, params)
    fn, why = anchor.numpy_equivalent(task)
    assert why == ""
    (ref,) = task.workload.reference(*task.workload.random_inputs(seed=0))
    np.testing.assert_allclose(fn(), ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name, params", [
    ("softmax", dict(shape=[4, 8], dtype="float16")), ("pool2d", dict(N=1, C=2, H=4, W=4, kernel=2)),
    ("matmul", dict(M=4, N=4, K=4, dtype="int8")),
])
def test_no_anchor_without_a_fair_numpy_equivalent(name, params, capsys, monkeypatch):
    monkeypatch.setenv(anchor.CONV_ANCHOR_ENV, "numpy")  # pooling's fair equivalent is PyTorch's
    task = autotune.Task(name, params)
    assert not anchor.has_numpy_anchor(task)
    assert anchor.numpy_gflops(task) is None
    assert capsys.readouterr().out.startswith("no anchor: ")


def test_anchor_restarts_the_process_without_openblas_overrides(tmp_path):
    """The restart keeps the command line (also ``python -m``) and drops only the overrides."""
    import subprocess
    import sys

    from cli_helpers import REPO, cli_env

    probe = tmp_path / "probe.py"
    probe.write_text(
        "import os, sys\n"
        "from autotune import anchor\n"
        "print('before', os.environ.get('OPENBLAS_CORETYPE'), flush=True)\n"
        "anchor.reexec_without_blas_overrides()\n"
        "print('after', os.environ.get('OPENBLAS_CORETYPE'), os.environ.get('OPENBLAS_L2_SIZE'),"
        " os.environ.get('KEEP'), sys.argv[1:])\n"
    )
    env = cli_env(tmp_path, OPENBLAS_CORETYPE="Haswell", OPENBLAS_L2_SIZE="1048576", KEEP="yes")
    out = subprocess.run([sys.executable, str(probe), "x", "--y"], env=env, cwd=REPO, capture_output=True,
                         text=True, timeout=60, check=True).stdout.splitlines()
    assert out == ["before Haswell", "before None", "after None None yes ['x', '--y']"]


@pytest.mark.parametrize("preset, expected", [(None, "4"), ("16", "16")])
def test_a_process_that_times_numpy_itself_restarts_with_openblas_threads_quiet(tmp_path, preset, expected):
    """OpenBLAS reads OPENBLAS_THREAD_TIMEOUT when NumPy loads (importing the anchor module
    loads it), so a process timing NumPy and kernels in turn restarts with it set, and a
    value the user set is kept."""
    import subprocess
    import sys

    from cli_helpers import REPO, cli_env

    probe = tmp_path / "probe.py"
    probe.write_text(
        "import os\n"
        "from autotune import anchor\n"
        "print('before', os.environ.get('OPENBLAS_THREAD_TIMEOUT'), flush=True)\n"
        "anchor.reexec_without_blas_overrides(quiet_threads=True)\n"
        "print('after', os.environ.get('OPENBLAS_THREAD_TIMEOUT'))\n"
    )
    env = cli_env(tmp_path)
    env.pop("OPENBLAS_THREAD_TIMEOUT", None)
    if preset is not None:
        env["OPENBLAS_THREAD_TIMEOUT"] = preset
    out = subprocess.run([sys.executable, str(probe)], env=env, cwd=REPO, capture_output=True,
                         text=True, timeout=60, check=True).stdout.splitlines()
    if preset is None:
        assert out == ["before None", "before 4", "after 4"]   # restarted once, with it set
    else:
        assert out == [f"before {preset}", f"after {preset}"]   # nothing to change: no restart
