"""The ``Database`` API: open a tuning database, write runs and records, query them.

    db = Database()                                   # default location, see location.py
    run = db.start_run(wl.key, wl.name, wl.params, target, tuner="xgb", seed=0,
                       trials_requested=1000, tool_version="0.1.0")
    db.add_records(run, batch)                        # one transaction per batch
    db.finish_run(run)
    db.best(wl.key, target)                           # -> MeasureRecord | None
    db.workload_dag(wl.key)                           # the DAG a run stored (te.serialize JSON)

Each method is one transaction over the ORM of ``models.py`` and takes and returns the
plain dataclasses of ``records.py``. A process killed at any point leaves every batch that
``add_records`` returned from readable. Failures surface as ``DatabaseError`` with a
one-line message naming the database; wrong argument values as ``ValueError``.

``Database(url, create=False)`` opens an existing database only, for reading: a missing
SQLite file, or a database without our tables, is a ``DatabaseError`` and nothing is
created. Writers (tuning, importing) open with the default ``create=True``.

Open one ``Database`` per process (a forked child must not reuse its parent's connections);
several processes may write the same SQLite file (see engine.py) or PostgreSQL database at
once. Nothing here reads a row and then writes on what it read without a guard: shared rows
(workloads, targets) are inserted with ``ON CONFLICT DO NOTHING``, a workload's DAG and a
stale run's takeover are conditional UPDATEs, and an import holds a lock (see rows.py,
jsonl.py); records of different runs are distinct records, however alike.

Runs store the pid and host of the process that started them and a heartbeat, renewed
by every ``add_records``; ``RunInfo.state()`` tells a live run from a killed one
(``liveness.py``), and ``take_over_stale_runs`` closes the killed ones of a task as
"interrupted" (what ``--resume`` does). ``clock`` (a function returning an aware UTC
datetime) stamps runs, for tests of heartbeat ages.

Targets in queries (``target=`` arguments) are a ``TargetInfo``, matched on its kind and,
when it names one, its device (compiler, flags and host are ignored); a bare kind such as
``"cuda"``; or None for any target.
"""
from __future__ import annotations

import os
from contextlib import contextmanager
from datetime import datetime
from typing import Callable, Iterator

from sqlalchemy import case, distinct, func, inspect, select, update
from sqlalchemy.engine import URL
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session, sessionmaker

from . import jsonl, rows
from .engine import open_engine, writer
from .errors import DatabaseError, NoDatabaseError, one_line
from .interrupts import interrupts_deferred
from .liveness import run_state, this_host
from .location import describe, prepare_sqlite_file, require_sqlite_file, resolve_url, sqlite_file
from .models import RecordRow, RunRow, TargetRow, WorkloadRow
from .records import (
    ERROR_STATUSES, FINAL_TUNER, MeasureRecord, RunInfo, TargetInfo, TargetSummary, WorkloadSummary,
    check_ratio_interval, check_run_status, default_tool_version, utc_now,
)
from .rows import TargetFilter
from .schema import ensure_schema, stored_version

_CORRUPT_HINTS = ("not a database", "malformed", "file is encrypted")


class Database:
    """A tuning database at ``url`` (any SQLAlchemy URL or a file path; None: the default).

    ``create=False``: open it only if it exists; ``clock``: what stamps runs (see the
    module docstring).
    """

    def __init__(self, url: str | os.PathLike | URL | None = None, *, create: bool = True,
                 clock: Callable[[], datetime] = utc_now):
        self.clock = clock
        self.url = resolve_url(url)
        self.location = describe(self.url)       # how messages name this database
        self.path = sqlite_file(self.url)         # the SQLite file, or None
        if self.path is not None:
            (prepare_sqlite_file if create else require_sqlite_file)(self.path)
        self._engine = None
        try:
            self._engine = open_engine(self.url, create=create)
            self._writer = writer(self._engine)
            if not create:
                self._require_schema()
            ensure_schema(self._engine, self._writer, self.location)
        except DatabaseError:
            self.close()
            raise
        except ImportError as exc:
            self.close()
            message = f"{self.location}: cannot open: its database driver is not installed ({exc})"
            if self.url.get_backend_name() == "postgresql":
                message += "; for PostgreSQL: pip install 'autotune-te[postgres]'"
            raise DatabaseError(message) from None
        except (SQLAlchemyError, OSError) as exc:
            self.close()
            raise DatabaseError(self._describe_failure(exc, "cannot open")) from None
        self._read_sessions = sessionmaker(self._engine, expire_on_commit=False)
        self._write_sessions = sessionmaker(self._writer, expire_on_commit=False)

    # ------------------------------------------------------------------ lifecycle

    def close(self) -> None:
        if self._engine is not None:
            with interrupts_deferred():
                self._engine.dispose()
            self._engine = None

    def __enter__(self) -> Database:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Database({self.location!r})"

    def _require_schema(self) -> None:
        """Refuse to read a database that has none of our tables (rather than create them)."""
        with self._engine.connect() as conn:
            if stored_version(conn, self.location) is None:
                if self.url.get_backend_name() != "sqlite" and not inspect(conn).get_table_names():
                    # an empty server database: nothing tuned into it yet, as a missing file
                    raise NoDatabaseError(f"{self.location}: no tuning database here (the database has no tables)")
                raise DatabaseError(f"{self.location}: not a tuning database (none of its tables are there)")

    def _describe_failure(self, exc: BaseException, doing: str) -> str:
        message = one_line(exc)
        if self.url.password:   # a driver may quote its connection string: never show the password
            message = message.replace(str(self.url.password), "***")
        if any(hint in message for hint in _CORRUPT_HINTS):
            return f"{self.location}: not a SQLite database, or the file is corrupt ({message})"
        return f"{self.location}: {doing}: {message}"

    @contextmanager
    def _session(self, write: bool) -> Iterator[Session]:
        """One transaction; SQLAlchemy failures become one-line ``DatabaseError``s. A Ctrl-C
        in it is raised when it has ended (see interrupts.py)."""
        if self._engine is None:
            raise DatabaseError(f"{self.location}: the database is closed")
        sessions = self._write_sessions if write else self._read_sessions
        try:
            with interrupts_deferred(), sessions.begin() as session:
                yield session
        except SQLAlchemyError as exc:
            raise DatabaseError(self._describe_failure(exc, "write failed" if write else "query failed")) from None

    def _reading(self):
        return self._session(write=False)

    def _writing(self):
        return self._session(write=True)

    # ------------------------------------------------------------------ writing

    def start_run(self, workload_key: str, workload_name: str, params: dict, target: TargetInfo,
                  tuner: str, seed: int | None, trials_requested: int,
                  tool_version: str | None = None, *, resumed_from: int | None = None,
                  baseline_gflops: float | None = None, dag_json: str | None = None,
                  dag_hash: str | None = None, anchor_gflops: float | None = None,
                  ratio_interval: tuple[float, float] | None = None) -> int:
        """Open a tuning run (status "running") of this process, creating the workload and target
        rows if new. A resumed run names the run it continues and the best GFLOP/s stored before
        it (``best_so_far`` starts from it). ``dag_json`` (with its ``dag_hash``) is the
        workload's DAG as te.serialize JSON, stored with the workload unless it has one already.
        ``anchor_gflops``: a final timing run's anchor figure (``autotune.final_timing``);
        ``ratio_interval``: its (low, high) 90 % confidence interval of the winner's speed ratio
        to the anchor, two finite positive numbers with low <= high (read back as the run's
        ``ratio_low`` and ``ratio_high``)."""
        if not isinstance(target, TargetInfo):
            raise ValueError(f"start_run needs a TargetInfo, got {target!r}")
        if not isinstance(params, dict):
            raise ValueError(f"start_run needs the workload params as a dict, got {params!r}")
        if (dag_json is None) != (dag_hash is None):
            raise ValueError("start_run needs dag_json and dag_hash together")
        ratio_low, ratio_high = check_ratio_interval(ratio_interval, "start_run's ratio_interval") or (None, None)
        with self._writing() as s:
            wl = rows.get_or_create_workload(s, workload_key, workload_name, params)
            tg = rows.get_or_create_target(s, target)
            now = self.clock()
            if dag_json is not None:
                rows.store_dag(s, wl, dag_json, dag_hash, now)
            run = RunRow(workload_id=wl.id, target_id=tg.id, tuner=tuner, seed=seed,
                         trials_requested=trials_requested,
                         tool_version=tool_version or default_tool_version(),
                         started_at=now, finished_at=None, status="running",
                         pid=os.getpid(), host=this_host(), heartbeat_at=now,
                         resumed_from=resumed_from, baseline_gflops=baseline_gflops,
                         anchor_gflops=anchor_gflops, ratio_low=ratio_low, ratio_high=ratio_high)
            s.add(run)
            s.flush()
            return run.id

    def add_records(self, run_id: int, records: list[MeasureRecord]) -> list[int]:
        """Store one batch of a run's records in one transaction (and renew the run's
        heartbeat); returns their ids. Each record's workload must be the run's, and its
        target the run's device (``TargetInfo.same_device``): a run on a cluster stores each
        record with the host that measured it.
        """
        with self._writing() as s:
            run = self._run_row(s, run_id)
            wl = s.get(WorkloadRow, run.workload_id)
            tg = rows.to_target(s.get(TargetRow, run.target_id))
            target_ids = {tg: run.target_id}
            for r in records:
                if r.workload_key != wl.key or not r.target.same_device(tg):
                    raise ValueError(
                        f"record (trial {r.trial}) is for {r.workload_key} on {r.target.describe()}, "
                        f"but run {run_id} tunes {wl.key} on {tg.describe()}"
                    )
                if r.target not in target_ids:
                    target_ids[r.target] = rows.get_or_create_target(s, r.target).id
            new_rows = [rows.to_record_row(r, run, target_ids[r.target]) for r in records]
            run.heartbeat_at = self.clock()
            s.add_all(new_rows)
            s.flush()
            return [row.id for row in new_rows]

    def finish_run(self, run_id: int, status: str = "finished") -> None:
        """Close a run as "finished" or "interrupted" and stamp its end time."""
        if check_run_status(status) == "running":
            raise ValueError("finish_run needs status 'finished' or 'interrupted'")
        with self._writing() as s:
            run = self._run_row(s, run_id)
            run.status = status
            run.finished_at = self.clock()

    def heartbeat(self, run_id: int) -> None:
        """Say that a run's process is alive (``add_records`` does it with every batch)."""
        with self._writing() as s:
            self._run_row(s, run_id).heartbeat_at = self.clock()

    def take_over_stale_runs(self, workload_key: str, target: TargetFilter = None, **state_options) -> list[int]:
        """Close the stale runs of a workload (on a target) as "interrupted"; their ids.

        A run is stale when it says "running" but its process is gone (``RunInfo.state``,
        to which ``state_options`` go; ``now`` defaults to this database's clock). Live
        runs are left alone. Each run is closed by an UPDATE that holds only while it is
        still "running" with the heartbeat it was judged by: of two processes resuming at
        once, one closes it and only that one gets its id back.
        """
        state_options.setdefault("now", self.clock())
        with self._writing() as s:
            query = (select(RunRow).join(WorkloadRow, RunRow.workload_id == WorkloadRow.id)
                     .join(TargetRow, RunRow.target_id == TargetRow.id)
                     .where(WorkloadRow.key == workload_key, RunRow.status == "running",
                            *rows.target_conditions(target)))
            stale = [run for run in s.scalars(query) if run_state(run, **state_options) == "stale"]
            return sorted(run.id for run in stale if self._close_if_unchanged(s, run))

    def _close_if_unchanged(self, session: Session, run: RunRow) -> bool:
        """Mark ``run`` "interrupted" unless it was closed or beat its heartbeat since it was read."""
        result = session.execute(
            update(RunRow)
            .where(RunRow.id == run.id, RunRow.status == "running",
                   RunRow.heartbeat_at.is_not_distinct_from(run.heartbeat_at))
            .values(status="interrupted", finished_at=self.clock())
            .execution_options(synchronize_session=False)
        )
        return result.rowcount == 1

    def workload_dag(self, workload_key: str) -> str | None:
        """The DAG stored for a workload (te.serialize JSON, as written), or None: an unknown
        key, or a workload stored before DAGs were (schema version 3)."""
        with self._reading() as s:
            return s.scalars(select(WorkloadRow.dag_json).where(WorkloadRow.key == workload_key)).first()

    def _run_row(self, session: Session, run_id: int) -> RunRow:
        run = session.get(RunRow, run_id)
        if run is None:
            raise DatabaseError(f"{self.location}: no tuning run with id {run_id}")
        return run

    # ------------------------------------------------------------------ best records

    def best(self, workload_key: str, target: TargetFilter = None) -> MeasureRecord | None:
        """The ok record with the lowest median time, one of a final timing first (``top_k``),
        or None."""
        top = self.top_k(workload_key, 1, target)
        return top[0] if top else None

    def top_k(self, workload_key: str, k: int, target: TargetFilter = None) -> list[MeasureRecord]:
        """The ``k`` fastest ok records, fastest first (failures never rank). Records of final
        timing runs (tuner ``FINAL_TUNER``) rank before all others: each was timed again,
        next to the anchor, after its run's search had kept the best of many noisy readings
        (``autotune.final_timing``), so it is the figure a user can reproduce."""
        final_first = case((RunRow.tuner == FINAL_TUNER, 0), else_=1)
        query = (rows.select_records(with_run=True)
                 .where(WorkloadRow.key == workload_key, RecordRow.status == "ok",
                        *rows.target_conditions(target))
                 .order_by(final_first, RecordRow.median_s, RecordRow.id).limit(k))
        with self._reading() as s:
            return [rows.to_record(*row) for row in s.execute(query)]

    # ------------------------------------------------------------------ runs and history

    def history(self, run_id: int) -> list[MeasureRecord]:
        """Every record of a run, in trial order."""
        query = rows.select_records().where(RecordRow.run_id == run_id).order_by(RecordRow.trial, RecordRow.id)
        with self._reading() as s:
            return [rows.to_record(*row) for row in s.execute(query)]

    def best_so_far(self, run_id: int) -> list[tuple[int, float | None]]:
        """(trial, best GFLOP/s of the ok records up to it) for each record of a run; a resumed
        run starts from the best stored before it began (its ``baseline_gflops``)."""
        query = (select(RecordRow.trial, RecordRow.status, RecordRow.gflops)
                 .where(RecordRow.run_id == run_id).order_by(RecordRow.trial, RecordRow.id))
        with self._reading() as s:
            measured = s.execute(query).all()
            run = s.get(RunRow, run_id)
        best = run.baseline_gflops if run is not None else None
        curve = []
        for trial, status, gflops in measured:
            if status == "ok" and gflops is not None and (best is None or gflops > best):
                best = gflops
            curve.append((trial, best))
        return curve

    def get_run(self, run_id: int) -> RunInfo:
        runs = self._runs(RunRow.id == run_id)
        if not runs:
            raise DatabaseError(f"{self.location}: no tuning run with id {run_id}")
        return runs[0]

    def list_runs(self, workload_key: str | None = None, target: TargetFilter = None) -> list[RunInfo]:
        """Every run (of one workload, on one target, if given), oldest first, with record counts
        and best GFLOP/s."""
        return self._runs(*([WorkloadRow.key == workload_key] if workload_key else []),
                          *rows.target_conditions(target))

    def _runs(self, *conditions) -> list[RunInfo]:
        ok = RecordRow.status == "ok"
        query = (
            select(RunRow, WorkloadRow, TargetRow, func.count(RecordRow.id),
                   func.coalesce(func.sum(case((ok, 1), else_=0)), 0),
                   func.max(case((ok, RecordRow.gflops))))
            .join(WorkloadRow, RunRow.workload_id == WorkloadRow.id)
            .join(TargetRow, RunRow.target_id == TargetRow.id)
            .outerjoin(RecordRow, RecordRow.run_id == RunRow.id)
            .where(*conditions).group_by(RunRow.id, WorkloadRow.id, TargetRow.id).order_by(RunRow.id)
        )
        with self._reading() as s:
            return [
                RunInfo(id=run.id, workload_key=wl.key, workload_name=wl.name, target=rows.to_target(tg),
                        tuner=run.tuner, seed=run.seed, trials_requested=run.trials_requested,
                        tool_version=run.tool_version, started_at=run.started_at,
                        finished_at=run.finished_at, status=run.status,
                        n_records=n, n_ok=int(n_ok), best_gflops=best, pid=run.pid, host=run.host,
                        heartbeat_at=run.heartbeat_at, resumed_from=run.resumed_from,
                        baseline_gflops=run.baseline_gflops, anchor_gflops=run.anchor_gflops,
                        ratio_low=run.ratio_low, ratio_high=run.ratio_high)
                for run, wl, tg, n, n_ok, best in s.execute(query)
            ]

    # ------------------------------------------------------------------ errors

    def errors_by_status(self, workload_key: str | None = None,
                         target: TargetFilter = None) -> dict[str, tuple[int, str | None]]:
        """{status: (count, latest error message)} over the failed records, in STATUSES order."""
        conditions = [RecordRow.status != "ok", *rows.target_conditions(target)]
        if workload_key is not None:
            conditions.append(WorkloadRow.key == workload_key)
        base = (select(RecordRow.status, func.count(RecordRow.id))
                .join(WorkloadRow, RecordRow.workload_id == WorkloadRow.id)
                .join(TargetRow, RecordRow.target_id == TargetRow.id)
                .where(*conditions).group_by(RecordRow.status))
        with self._reading() as s:
            counts = dict(s.execute(base).all())
            result = {}
            for status in ERROR_STATUSES:
                if status not in counts:
                    continue
                sample = s.execute(
                    select(RecordRow.error)
                    .join(WorkloadRow, RecordRow.workload_id == WorkloadRow.id)
                    .join(TargetRow, RecordRow.target_id == TargetRow.id)
                    .where(*conditions, RecordRow.status == status, RecordRow.error.is_not(None))
                    .order_by(RecordRow.id.desc()).limit(1)
                ).scalar()
                result[status] = (counts[status], sample)
            return result

    # ------------------------------------------------------------------ for the tuner

    def records_for_task(self, workload_key: str, target: TargetFilter, after_id: int | None = None,
                         include_final: bool = False) -> list[MeasureRecord]:
        """Every record (failures included) of a workload on a target, oldest first; with
        ``after_id``, only those stored after that record (what others added since).

        Final timing runs' records (configs measured again after a search) are left out
        unless ``include_final``: resuming, sharing and replaying want what searches measured."""
        conditions = [WorkloadRow.key == workload_key, *rows.target_conditions(target)]
        if after_id is not None:
            conditions.append(RecordRow.id > after_id)
        if not include_final:
            conditions.append(RunRow.tuner != FINAL_TUNER)
        query = (rows.select_records(with_run=True)
                 .where(*conditions).order_by(RecordRow.id))
        with self._reading() as s:
            return [rows.to_record(*row) for row in s.execute(query)]

    def measured_hashes(self, workload_key: str, target: TargetFilter) -> set[str]:
        """Config hashes already measured for a workload on a target (for --resume)."""
        query = (select(RecordRow.config_hash).distinct()
                 .join(WorkloadRow, RecordRow.workload_id == WorkloadRow.id)
                 .join(TargetRow, RecordRow.target_id == TargetRow.id)
                 .where(WorkloadRow.key == workload_key, *rows.target_conditions(target)))
        with self._reading() as s:
            return set(s.scalars(query))

    def records_similar(self, workload_name: str, target: TargetFilter, exclude_key: str | None = None,
                        limit: int = 10_000) -> list[MeasureRecord]:
        """Newest records of other workloads of the same op on the target (to warm-start a model),
        final timing runs' records left out (they repeat configs their searches measured)."""
        conditions = [WorkloadRow.name == workload_name, RunRow.tuner != FINAL_TUNER, *rows.target_conditions(target)]
        if exclude_key is not None:
            conditions.append(WorkloadRow.key != exclude_key)
        query = (rows.select_records(with_run=True)
                 .where(*conditions).order_by(RecordRow.id.desc()).limit(limit))
        with self._reading() as s:
            return [rows.to_record(*row) for row in s.execute(query)]

    def get_record(self, record_id: int) -> MeasureRecord | None:
        with self._reading() as s:
            row = s.execute(rows.select_records().where(RecordRow.id == record_id)).first()
            return rows.to_record(*row) if row is not None else None

    # ------------------------------------------------------------------ listings

    def list_workloads(self, target: TargetFilter = None) -> list[WorkloadSummary]:
        """(key, name, number of records, best GFLOP/s) per workload, by name then key."""
        query = (
            select(WorkloadRow.key, WorkloadRow.name, func.count(RecordRow.id),
                   func.max(case((RecordRow.status == "ok", RecordRow.gflops))))
            .join(RecordRow, RecordRow.workload_id == WorkloadRow.id, isouter=target is None)
        )
        if target is not None:
            query = (query.join(TargetRow, RecordRow.target_id == TargetRow.id)
                     .where(*rows.target_conditions(target)))
        query = query.group_by(WorkloadRow.id).order_by(WorkloadRow.name, WorkloadRow.key)
        with self._reading() as s:
            return [WorkloadSummary(*row) for row in s.execute(query)]

    def list_targets(self) -> list[TargetSummary]:
        """(target, number of workloads, number of records) per target."""
        query = (select(TargetRow, func.count(distinct(RecordRow.workload_id)), func.count(RecordRow.id))
                 .outerjoin(RecordRow, RecordRow.target_id == TargetRow.id)
                 .group_by(TargetRow.id).order_by(TargetRow.kind, TargetRow.device, TargetRow.id))
        with self._reading() as s:
            return [TargetSummary(rows.to_target(tg), n_wl, n) for tg, n_wl, n in s.execute(query)]

    # ------------------------------------------------------------------ JSON lines

    def export_jsonl(self, dest, workload_key: str | None = None) -> int:
        """Write records (of one workload, if given) as JSON lines; returns how many."""
        return jsonl.export_jsonl(self, dest, workload_key)

    def import_jsonl(self, source) -> int:
        """Read JSON-lines records, skipping ones already present; returns how many were added."""
        return jsonl.import_jsonl(self, source)
