"""A child process for the concurrency tests: writes records to a database in batches.

    python tdb_writer.py URL N_BATCHES BATCH_SIZE [GO_FILE]

Opens the database (possibly creating it at the same moment as another writer), starts a
run of the shared test workload, adds N_BATCHES batches and prints ``committed <total>``
after each batch returns, so the parent knows what is on disk before it kills us. With
GO_FILE it first prints ``ready`` and waits for that file to exist, so that several
writers started one after the other open the database and write at the same moment.
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

from tuning_db import Database
from tdb_helpers import make_record, start


def wait_for(go_file: Path) -> None:
    print("ready", flush=True)
    while not go_file.exists():
        time.sleep(0.005)


def main(url: str, n_batches: int, batch_size: int, go_file: str | None = None) -> None:
    if go_file is not None:
        wait_for(Path(go_file))
    with Database(url) as db:
        run = start(db)
        print(f"run {run}", flush=True)
        for b in range(n_batches):
            trials = range(b * batch_size, (b + 1) * batch_size)
            db.add_records(run, [make_record(t, "ok" if t % 4 else "timeout") for t in trials])
            print(f"committed {(b + 1) * batch_size}", flush=True)
        db.finish_run(run)
    print("done", flush=True)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), *sys.argv[4:5])
