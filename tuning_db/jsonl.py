"""Export and import of records as JSON lines, one self-describing record per line.

    {"format": "autotune-record", "version": 1,
     "workload": {"key": ..., "name": ..., "params": {...}},
     "target": {"kind": ..., "device": ..., "compiler": ..., "flags": ..., "host": ...},
     "run": {"tuner": ..., "seed": ..., "trials_requested": ..., "tool_version": ...,
             "started_at": ..., "finished_at": ..., "status": ..., "anchor_gflops": ...,
             "ratio_interval": [low, high] or null},
     "trial": 0, "config": {...}, "config_hash": ..., "status": "ok", "costs": [...],
     "median_s": ..., "spread": ..., "gflops": ..., "build_s": ..., "run_s": ...,
     "error": null, "created_at": "2025-01-01T12:00:00.123456+00:00", "tool_version": ...}

A line carries everything needed to replay and rank its record, so files from several
machines can be concatenated and imported anywhere. Import checks every line first (a bad
one raises ``RecordFormatError`` naming the file and line, and nothing is written), then
adds all new records in one transaction, skipping exact duplicates: the same workload,
target, config hash and creation time. Imports into one database run one at a time (the
write lock on SQLite, an advisory lock on PostgreSQL: ``engine.serialize``), so the same
file imported twice at once still adds each record once. Records of one exported run go
back into one run.
A run's process (pid, host, heartbeat) and resume links belong to the database it ran in
and are not exported; an imported run has none.
"""
from __future__ import annotations

import hashlib
import json
import os
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import IO, Any, Iterator

from sqlalchemy import select
from sqlalchemy.orm import Session

from . import rows
from .engine import IMPORT_LOCK, serialize
from .errors import DatabaseError, RecordFormatError
from .models import RecordRow, RunRow, TargetRow, WorkloadRow
from .records import MeasureRecord, TargetInfo, as_utc, check_ratio_interval, check_run_status

FORMAT = "autotune-record"
VERSION = 1

_RECORD_FIELDS = ("trial", "config", "config_hash", "status", "costs", "median_s", "spread",
                  "gflops", "build_s", "run_s", "error", "created_at", "tool_version")


# ---------------------------------------------------------------- export

def record_to_json(record: MeasureRecord, run: RunRow, dag_json: str | None = None) -> dict[str, Any]:
    """One record as a JSON line; ``dag_json``, the workload's stored DAG, goes with it (as
    ``workload.dag``) so that an import into another database can rebuild the workload."""
    workload = {"key": record.workload_key, "name": record.workload_name, "params": record.params}
    if dag_json is not None:
        workload["dag"] = dag_json
    line = {
        "format": FORMAT,
        "version": VERSION,
        "workload": workload,
        "target": record.target.to_dict(),
        "run": {
            "tuner": run.tuner, "seed": run.seed, "trials_requested": run.trials_requested,
            "tool_version": run.tool_version, "started_at": run.started_at.isoformat(),
            "finished_at": run.finished_at.isoformat() if run.finished_at else None,
            "status": run.status,
            "anchor_gflops": run.anchor_gflops,  # a final timing run's anchor; optional on import
            # and its 90 % interval of the winner's ratio to the anchor (or null); optional on import
            "ratio_interval": None if run.ratio_low is None else [run.ratio_low, run.ratio_high],
        },
    }
    line.update({name: getattr(record, name) for name in _RECORD_FIELDS})
    line["status"] = record.status.value  # the plain word, as stored
    line["created_at"] = record.created_at.isoformat()
    return line


def export_jsonl(db, dest: str | os.PathLike | IO[str], workload_key: str | None = None) -> int:
    """Write the records of ``db`` (of one workload, if given) to ``dest``; returns how many."""
    query = rows.select_records(with_run=True).add_columns(RunRow)
    if workload_key is not None:
        query = query.where(WorkloadRow.key == workload_key)
    query = query.order_by(RecordRow.id).execution_options(yield_per=1000)
    count = 0
    with _open_text(dest, "w") as out, db._reading() as s:
        for rec, wl, tg, run in s.execute(query):
            line = record_to_json(rows.to_record(rec, wl, tg), run, wl.dag_json)
            out.write(json.dumps(line, allow_nan=False) + "\n")
            count += 1
    return count


# ---------------------------------------------------------------- import

@dataclass(frozen=True)
class _RunFields:
    tuner: str
    seed: int | None
    trials_requested: int
    tool_version: str
    started_at: datetime | None
    finished_at: datetime | None
    status: str
    anchor_gflops: float | None = None
    ratio_interval: tuple[float, float] | None = None


def import_jsonl(db, source: str | os.PathLike | IO[str]) -> int:
    """Add the records of a JSON-lines file to ``db``; returns how many were new."""
    with _open_text(source, "r") as f:
        name = _name_of(source, f)
        try:
            parsed = [_parse_line(text, lineno, name) for lineno, text in enumerate(f, 1) if text.strip()]
        except UnicodeDecodeError as exc:
            raise RecordFormatError(f"{name}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    with db._writing() as s:
        serialize(s, IMPORT_LOCK)   # two imports of one file at once: the second sees the first's records
        return _Importer(s).add(parsed)


class _Importer:
    """Inserts parsed lines, reusing workload/target/run rows and skipping duplicates."""

    def __init__(self, session: Session):
        self.s = session
        self.workloads: dict[str, WorkloadRow] = {}
        self.targets: dict[TargetInfo, TargetRow] = {}
        self.runs: dict[tuple, RunRow] = {}
        self.seen: dict[tuple[int, int], set[tuple[str, datetime]]] = {}

    def add(self, parsed: list[tuple[MeasureRecord, _RunFields, str | None]]) -> int:
        added = 0
        for record, run_fields, dag_json in parsed:
            wl = self._workload(record)
            if dag_json is not None and wl.dag_json is None:
                rows.store_dag(self.s, wl, dag_json, _dag_hash(dag_json), run_fields.started_at or record.created_at)
            tg = self._target(record.target)
            seen = self._seen(wl.id, tg.id)
            identity = (record.config_hash, record.created_at)
            if identity in seen:
                continue
            seen.add(identity)
            self.s.add(rows.to_record_row(record, self._run(wl, tg, run_fields, record)))
            added += 1
        return added

    def _workload(self, r: MeasureRecord) -> WorkloadRow:
        if r.workload_key not in self.workloads:
            self.workloads[r.workload_key] = rows.get_or_create_workload(
                self.s, r.workload_key, r.workload_name, r.params)
        return self.workloads[r.workload_key]

    def _target(self, target: TargetInfo) -> TargetRow:
        if target not in self.targets:
            self.targets[target] = rows.get_or_create_target(self.s, target)
        return self.targets[target]

    def _seen(self, workload_id: int, target_id: int) -> set[tuple[str, datetime]]:
        pair = (workload_id, target_id)
        if pair not in self.seen:
            query = select(RecordRow.config_hash, RecordRow.created_at).where(
                RecordRow.workload_id == workload_id, RecordRow.target_id == target_id)
            self.seen[pair] = {tuple(row) for row in self.s.execute(query)}
        return self.seen[pair]

    def _run(self, wl: WorkloadRow, tg: TargetRow, f: _RunFields, first: MeasureRecord) -> RunRow:
        """The run an exported run maps to: found by (workload, target, tuner, seed, start)."""
        key = (wl.id, tg.id, f)
        if key in self.runs:
            return self.runs[key]
        run = None
        if f.started_at is not None:
            run = self.s.scalars(select(RunRow).filter_by(
                workload_id=wl.id, target_id=tg.id, tuner=f.tuner, seed=f.seed, started_at=f.started_at)).first()
        if run is None:
            low, high = f.ratio_interval or (None, None)
            run = RunRow(workload_id=wl.id, target_id=tg.id, tuner=f.tuner, seed=f.seed,
                         trials_requested=f.trials_requested, tool_version=f.tool_version,
                         started_at=f.started_at or first.created_at, finished_at=f.finished_at,
                         status=f.status, anchor_gflops=f.anchor_gflops,
                         ratio_low=low, ratio_high=high)
            self.s.add(run)
            self.s.flush()
        self.runs[key] = run
        return run


def _dag_hash(dag_json: str) -> str:
    """The digest ``te.Workload.dag_hash`` gives the same text (sha256, 16 hex digits)."""
    return hashlib.sha256(dag_json.encode()).hexdigest()[:16]


def _parse_line(text: str, lineno: int, name: str) -> tuple[MeasureRecord, _RunFields, str | None]:
    where = f"{name} line {lineno}"
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as exc:
        raise RecordFormatError(f"{where}: not valid JSON ({exc.msg} at column {exc.colno})") from None
    if not isinstance(obj, dict):
        raise RecordFormatError(f"{where}: expected a JSON object, got {type(obj).__name__}")
    if obj.get("format") != FORMAT:
        raise RecordFormatError(
            f"{where}: not an autotune record (format {obj.get('format')!r}, expected {FORMAT!r})")
    version = obj.get("version")
    if version != VERSION:
        newer = isinstance(version, int) and version > VERSION
        hint = "; upgrade autotune-te to read it" if newer else ""
        raise RecordFormatError(
            f"{where}: unsupported record format version {version!r} (this tool reads {VERSION}){hint}")
    try:
        workload = _object(obj, "workload")
        target = TargetInfo(**_object(obj, "target"))
        fields = {name: obj[name] for name in _RECORD_FIELDS if name in obj}
        if "created_at" not in fields:
            raise ValueError("missing field 'created_at'")
        fields["created_at"] = _timestamp(fields["created_at"], "created_at")
        record = MeasureRecord(workload_key=_need(workload, "key", "workload.key"),
                               workload_name=_need(workload, "name", "workload.name"),
                               params=workload.get("params", {}), target=target,
                               config=_need(obj, "config", "config"), status=_need(obj, "status", "status"),
                               **{k: v for k, v in fields.items() if k not in ("config", "status")})
        run = _run_fields(obj.get("run") or {}, record)
        dag_json = workload.get("dag")
        if dag_json is not None and not isinstance(dag_json, str):
            raise ValueError(f"field 'workload.dag' must be a string (te.serialize JSON), got {type(dag_json).__name__}")
    except (TypeError, ValueError) as exc:
        raise RecordFormatError(f"{where}: {exc}") from None
    return record, run, dag_json


def _run_fields(run: dict, record: MeasureRecord) -> _RunFields:
    if not isinstance(run, dict):
        raise ValueError(f"field 'run' must be an object, got {run!r}")
    finished = run.get("finished_at")
    started = run.get("started_at")
    seed = run.get("seed")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
        raise ValueError(f"field 'run.seed' must be an integer or null, got {seed!r}")
    anchor = run.get("anchor_gflops")
    if anchor is not None and (isinstance(anchor, bool) or not isinstance(anchor, (int, float)) or anchor <= 0):
        raise ValueError(f"field 'run.anchor_gflops' must be a positive number or null, got {anchor!r}")
    interval = check_ratio_interval(run.get("ratio_interval"), "field 'run.ratio_interval'")
    return _RunFields(
        tuner=str(run.get("tuner", "imported")),
        seed=seed,
        trials_requested=int(run.get("trials_requested", 0)),
        tool_version=str(run.get("tool_version", record.tool_version)),
        started_at=_timestamp(started, "run.started_at") if started is not None else None,
        finished_at=_timestamp(finished, "run.finished_at") if finished is not None else None,
        status=check_run_status(run.get("status", "finished")),
        anchor_gflops=None if anchor is None else float(anchor),
        ratio_interval=interval,
    )


def _need(obj: dict, key: str, label: str):
    if key not in obj:
        raise ValueError(f"missing field {label!r}")
    return obj[key]


def _object(obj: dict, key: str) -> dict:
    value = _need(obj, key, key)
    if not isinstance(value, dict):
        raise ValueError(f"field {key!r} must be an object, got {value!r}")
    return value


def _timestamp(value, label: str) -> datetime:
    if not isinstance(value, str):
        raise ValueError(f"field {label!r} must be an ISO 8601 string, got {value!r}")
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise ValueError(f"field {label!r} is not an ISO 8601 time: {value!r}") from None
    return as_utc(parsed, label)


# ---------------------------------------------------------------- files

def _name_of(target, handle) -> str:
    if isinstance(target, (str, os.PathLike)):
        return os.fspath(target)
    return str(getattr(handle, "name", "<stream>"))


@contextmanager
def _open_text(target, mode: str) -> Iterator[IO[str]]:
    """``target`` itself if it is a file object (left open), else the file at that path."""
    if not isinstance(target, (str, os.PathLike)):
        yield target
        return
    try:
        handle = open(target, mode, encoding="utf-8", newline="\n" if mode == "w" else None)
    except OSError as exc:
        verb = "write" if mode == "w" else "read"
        raise DatabaseError(f"cannot {verb} {os.fspath(target)}: {exc.strerror or exc}") from None
    with handle:
        yield handle
