"""Between ORM rows and plain records: conversions, filters and get-or-create helpers.

Shared by ``database.py`` (the query API) and ``jsonl.py`` (import/export), so that both
read and write rows the same way and no ORM object leaves the package.
"""
from __future__ import annotations

from typing import Any, Callable

from sqlalchemy import JSON, Select, select, type_coerce, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import InstrumentedAttribute, Session
from sqlalchemy.sql.elements import BinaryExpression

from .models import RecordRow, RunRow, TargetRow, WorkloadRow
from .records import MeasureRecord, TargetInfo

# A query's target: a TargetInfo (matched on kind, and on device when it names one),
# a bare kind such as "cuda", or None for every target.
TargetFilter = TargetInfo | str | None


def target_conditions(target: TargetFilter) -> list:
    if target is None:
        return []
    if isinstance(target, str):
        TargetInfo(target)  # validates the kind
        return [TargetRow.kind == target]
    conditions = [TargetRow.kind == target.kind]
    if target.device:
        conditions.append(TargetRow.device == target.device)
    return conditions


def json_field(column: InstrumentedAttribute, key: str) -> BinaryExpression:
    """``column[key]`` of a JSON column (``WorkloadRow.params``, ``RecordRow.config``) as SQL
    that SQLite (``JSON_EXTRACT``) and PostgreSQL (``->``) both run; compare it through
    ``.as_integer()``, ``.as_float()``, ``.as_string()``::

        select(WorkloadRow).where(json_field(WorkloadRow.params, "M").as_integer() == 1024)
    """
    return type_coerce(column, JSON)[key]


def select_records(*, with_run: bool = False) -> Select:
    """Records joined with their workload and target, ready for ``to_record``; ``with_run``:
    with their run too, for conditions and orderings on it (``RunRow.tuner``)."""
    query = (
        select(RecordRow, WorkloadRow, TargetRow)
        .join(WorkloadRow, RecordRow.workload_id == WorkloadRow.id)
        .join(TargetRow, RecordRow.target_id == TargetRow.id)
    )
    return query.join(RunRow, RecordRow.run_id == RunRow.id) if with_run else query


def to_target(row: TargetRow) -> TargetInfo:
    return TargetInfo(kind=row.kind, device=row.device, compiler=row.compiler, flags=row.flags, host=row.host)


def to_record(rec: RecordRow, wl: WorkloadRow, tg: TargetRow) -> MeasureRecord:
    return MeasureRecord(
        workload_key=wl.key, workload_name=wl.name, params=wl.params, target=to_target(tg),
        config=rec.config, config_hash=rec.config_hash, status=rec.status, costs=rec.costs,
        median_s=rec.median_s, spread=rec.spread, gflops=rec.gflops, build_s=rec.build_s,
        run_s=rec.run_s, error=rec.error, trial=rec.trial, created_at=rec.created_at,
        tool_version=rec.tool_version, id=rec.id, run_id=rec.run_id,
    )


def to_record_row(record: MeasureRecord, run: RunRow, target_id: int | None = None) -> RecordRow:
    """The row of ``record`` of ``run``, on the run's target unless ``target_id`` is given."""
    return RecordRow(
        run_id=run.id, workload_id=run.workload_id, target_id=run.target_id if target_id is None else target_id,
        trial=record.trial,
        config=record.config, config_hash=record.config_hash, status=record.status.value,
        costs=record.costs, median_s=record.median_s, spread=record.spread, gflops=record.gflops,
        build_s=record.build_s, run_s=record.run_s, error=record.error,
        created_at=record.created_at, tool_version=record.tool_version,
    )


#: The INSERT of the dialects that have ``ON CONFLICT DO NOTHING`` (all that is used here).
_INSERTS: dict[str, Callable] = {"postgresql": postgresql.insert, "sqlite": sqlite.insert}


def _get_or_create(session: Session, model, identity: dict[str, Any], extra: dict[str, Any]):
    """The row of ``model`` matching ``identity`` (its unique key), inserted (with ``extra``) if missing.

    Never read-then-write: a missing row is added with ``INSERT ... ON CONFLICT DO NOTHING``
    and then read. When another process adds the same row at the same moment, the insert
    does nothing (PostgreSQL first waits for that transaction to end) and the read finds
    the other's row, so concurrent tuners share one workload or target row and none fails.
    Dialects without that clause insert in a savepoint and read the winner's row on the
    unique constraint's failure.
    """
    found = session.scalars(select(model).filter_by(**identity)).first()
    if found is not None:
        return found
    insert = _INSERTS.get(session.get_bind().dialect.name)
    if insert is None:
        return _insert_in_savepoint(session, model, identity, extra)
    session.execute(insert(model.__table__).values(**identity, **extra).on_conflict_do_nothing())
    return session.scalars(select(model).filter_by(**identity)).one()


def _insert_in_savepoint(session: Session, model, identity: dict[str, Any], extra: dict[str, Any]):
    try:
        with session.begin_nested():
            row = model(**identity, **extra)
            session.add(row)
        return row
    except IntegrityError:
        return session.scalars(select(model).filter_by(**identity)).one()


def get_or_create_workload(session: Session, key: str, name: str, params: dict) -> WorkloadRow:
    return _get_or_create(session, WorkloadRow, {"key": key}, {"name": name, "params": params})


def store_dag(session: Session, row: WorkloadRow, dag_json: str, dag_hash: str, now) -> None:
    """Give a workload row its DAG if it has none; a DAG stored earlier is kept (the one its
    first records were measured with).

    One conditional UPDATE (``WHERE dag_json IS NULL``), not a read then a write: of two
    processes storing a DAG at once, the first to commit wins and the other changes nothing.
    ``row``'s DAG fields are reloaded on their next use.
    """
    session.execute(
        update(WorkloadRow).where(WorkloadRow.id == row.id, WorkloadRow.dag_json.is_(None))
        .values(dag_json=dag_json, dag_hash=dag_hash, dag_stored_at=now)
        .execution_options(synchronize_session=False)
    )
    session.expire(row, ["dag_json", "dag_hash", "dag_stored_at"])


def get_or_create_target(session: Session, target: TargetInfo) -> TargetRow:
    return _get_or_create(session, TargetRow, target.to_dict(), {})
