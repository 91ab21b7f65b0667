"""Fixtures for the command-line tests: a fresh SQLite file per test, one shared tuned database."""
from __future__ import annotations

import pytest

from cli_helpers import CLI, TINY_MATMUL, cli_env


@pytest.fixture
def cli(tmp_path) -> CLI:
    return CLI(tmp_path, tmp_path / "tuning.db")


@pytest.fixture(scope="session")
def tuned(tmp_path_factory):
    """One finished tuning run (12 trials, NumPy anchor, progress bar) shared by read-only tests.

    An OpenBLAS override in its environment makes it restart itself before the anchor.
    """
    root = tmp_path_factory.mktemp("tuned")
    cli = CLI(root, root / "tuning.db")
    proc = cli.run(*TINY_MATMUL, "--trials", "12", "--progress", env=cli_env(root, OPENBLAS_L2_SIZE="262144"))
    return cli, proc
