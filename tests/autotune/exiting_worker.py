"""A measuring process for ``test_measure``: artifact "die" raises an error it declares
fatal (it replies, then exits at once, as the GPU's does after a CUDA fault); any other
artifact measures ok in one second."""
from __future__ import annotations

import sys

from autotune.runner_worker import main
from tuning_db.records import Status


class _Nothing:
    def __init__(self, workload_json: str, seed: int):
        pass


def _run(workspace, artifact: str, function: str, options: dict):
    if artifact == "die":
        raise RuntimeError("the device is gone")
    return Status.OK, [1.0]


if __name__ == "__main__":
    main(sys.argv[1:], workspace_class=_Nothing, run=_run, fatal=lambda exc: True)
