"""Every user error ends with one ``Error:`` line, a non-zero status and no traceback.

The cases run as concurrent processes (each in its own directory), started once for the
module; each test then checks one of them.
"""
from __future__ import annotations

import subprocess
import sys

import pytest
from click.testing import CliRunner

import tuning_db
from autotune.cli import cli
from autotune.cli.log_cmd import log_group
from autotune.cli.options import gpu_available
from schedule.targets import parse_target

from cli_helpers import TINY_MATMUL, cli_env

USAGE, LIBRARY = 2, 1
NOT_A_DIR = "a-file"
CORRUPT = "corrupt.db"
BAD_JSONL = "bad.jsonl"
EMPTY_DB = "empty.db"

CASES = {
    "trials 0": (["matmul", "--trials", "0"], USAGE, "Invalid value for '--trials': 0 is not in the range x>=1."),
    "trials abc": (["matmul", "--trials", "abc"], USAGE,
                   "Invalid value for '--trials': 'abc' is not a valid integer range."),
    "negative extent": (["matmul", "-M", "-3"], USAGE, "Invalid value for '-M' / '--M': -3 is not in the range x>=1."),
    "rounds 0": (["matmul", "--rounds", "0"], USAGE, "Invalid value for '--rounds': 0 is not in the range x>=1."),
    "unknown op": (["frobnicate"], USAGE, "No such command 'frobnicate'."),
    "unknown target": (["matmul", "--target", "tpu"], USAGE,
                       "Invalid value for '--target': unknown target 'tpu'; known targets: cpu[:avx2|avx512], cuda"),
    "unknown tuner": (["matmul", "--tuner", "anneal"], USAGE, "Invalid value for '--tuner': 'anneal' is not one of"),
    "bad list": (["softmax", "--shape", "4,x"], USAGE,
                 "Invalid value for '--shape': '4,x' is not a comma-separated list of ints"),
    "three paddings": (["conv2d", "--padding", "1,2,3"], USAGE,
                       "Invalid value for '--padding': '1,2,3' must be one int, two (H,W) or four "
                       "(TOP,LEFT,BOTTOM,RIGHT) comma-separated ints"),
    "pooling pads alike": (["pool2d", "--padding", "1,0,0,1", "--db", "t.db"], LIBRARY,
                           "pool2d: padding must be an int or a list [h, w] of two ints, got [1, 0, 0, 1]"),
    "library rejects params": (["softmax", "--shape", "4,8", "--axis", "5", "--db", "t.db"], LIBRARY,
                               "softmax: axis must be an int in [-2, 2) for X (4, 8), got 5"),
    "unwritable db": ([*TINY_MATMUL, "--trials", "4", "--db", f"{NOT_A_DIR}/t.db"], LIBRARY,
                      f"{NOT_A_DIR}/t.db: cannot create directory "),
    "corrupt db (tune)": ([*TINY_MATMUL, "--trials", "4", "--db", CORRUPT], LIBRARY,
                          f"{CORRUPT}: not a SQLite database, or the file is corrupt"),
    "corrupt db (log)": (["log", "workloads", "--db", CORRUPT], LIBRARY,
                         f"{CORRUPT}: not a SQLite database, or the file is corrupt"),
    "unknown record": (["log", "show", "999", "--db", EMPTY_DB], LIBRARY, "no record with id 999 in "),
    "unknown run": (["log", "history", "999", "--db", EMPTY_DB], LIBRARY, "no tuning run with id 999"),
    "unknown workload": (["log", "top", "conv2d", "--db", EMPTY_DB], LIBRARY, "no workload 'conv2d' in "),
    "malformed import": (["log", "import", BAD_JSONL, "--db", "t.db"], LIBRARY, BAD_JSONL),
}
if not gpu_available():
    CASES["cuda without a GPU"] = ([*TINY_MATMUL, "--trials", "4", "--target", "cuda"], USAGE,
                                   "Invalid value for '--target': no CUDA GPU found")

if parse_target("cpu").facts.isa != "avx512":
    CASES["avx512 on a CPU without it"] = ([*TINY_MATMUL, "--trials", "4", "--target", "cpu:avx512"], USAGE,
                                           "Invalid value for '--target': this CPU (")


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    procs = {}
    for name, (args, _, _) in CASES.items():
        root = tmp_path_factory.mktemp("error")
        (root / NOT_A_DIR).write_text("a file, not a directory")
        (root / CORRUPT).write_bytes(b"this is not sqlite " * 100)
        (root / BAD_JSONL).write_text('{"format": "autotune-record"}\n')
        tuning_db.Database(root / EMPTY_DB).close()
        procs[name] = subprocess.Popen(
            [sys.executable, "-m", "autotune.cli", *args], cwd=root, env=cli_env(root),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return {name: (proc, *proc.communicate(timeout=120)) for name, proc in procs.items()}


@pytest.mark.parametrize("name", list(CASES))
def test_bad_input_is_one_line_error(results, name):
    _, status, message = CASES[name]
    proc, out, err = results[name]
    assert proc.returncode == status, err
    assert "Traceback" not in err
    last = err.strip().splitlines()[-1]
    assert last.startswith("Error: ") and message in last, err
    if status == LIBRARY:
        assert err.count("\n") == 1, "a library error is exactly one line"


#: Every ``autotune log`` command that only reads, with the arguments it needs.
READ_COMMANDS = {
    "workloads": ["log", "workloads"],
    "targets": ["log", "targets"],
    "runs": ["log", "runs"],
    "top": ["log", "top", "matmul"],
    "history": ["log", "history", "1"],
    "errors": ["log", "errors"],
    "export": ["log", "export", "out.jsonl"],
    "show": ["log", "show", "1"],
}


def test_every_reading_log_command_is_checked():
    assert set(READ_COMMANDS) == set(log_group.commands) - {"import"}


@pytest.mark.parametrize("name", sorted(READ_COMMANDS))
def test_reading_a_missing_database_is_an_error_that_creates_nothing(tmp_path, monkeypatch, name):
    monkeypatch.chdir(tmp_path)
    missing = tmp_path / "mistyped" / "t.db"
    result = CliRunner().invoke(cli, [*READ_COMMANDS[name], "--db", str(missing)])
    assert result.exit_code == LIBRARY, result.output
    assert result.stderr.splitlines() == [f"Error: {missing}: no tuning database here (the file does not exist)"]
    assert not missing.parent.exists()
    assert not (tmp_path / "out.jsonl").exists()


def test_reading_the_missing_default_database_creates_no_folder(tmp_path, monkeypatch):
    monkeypatch.delenv("AUTOTUNE_DB", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    result = CliRunner().invoke(cli, ["log", "workloads"])
    assert result.exit_code == LIBRARY
    assert f"{tmp_path / 'cache' / 'autotune' / 'tuning.db'}: no tuning database here" in result.stderr
    assert not (tmp_path / "cache").exists()


def test_import_still_creates_the_database(tmp_path):
    created = tmp_path / "new" / "t.db"
    (tmp_path / "none.jsonl").write_text("")
    result = CliRunner().invoke(cli, ["log", "import", str(tmp_path / "none.jsonl"), "--db", str(created)])
    assert result.exit_code == 0, result.output
    assert created.exists()
