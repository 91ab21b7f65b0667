"""Plain records passed into and out of the tuning database.

Callers (the tuner, the command line, the build-time dispatch) see only these frozen
dataclasses, never ORM rows, so a session closing or a row expiring cannot break them:

    TargetInfo     where a measurement ran: kind, device, compiler, flags, host
    MeasureRecord  one trial: workload, target, the schedule ``config``, status, timings
    RunInfo        one tuning run (a session of trials) with its record counts
    WorkloadSummary, TargetSummary   rows of the ``list_*`` queries

Values are checked and normalised where a record is built (status vocabulary, JSON-able
config, timezone-aware UTC timestamps, long error texts cut), so everything stored is
already valid and a record read back compares equal to the one written.
"""
from __future__ import annotations

import hashlib
import json
import math
import numbers
from dataclasses import dataclass, field
from datetime import datetime, timezone
from enum import Enum
from functools import lru_cache
from typing import Any, NamedTuple


class Status(str, Enum):
    """The status of every trial (the README, "Architecture"). Failures are data: stored
    and scored as infinitely slow, never fatal to a run.

    A ``str`` whose value is the word stored in the database, so ``Status("ok") == "ok"``
    and ``str(Status.OK) == "ok"``: the stored format is the plain word.
    """

    OK = "ok"                        # built, verified against the reference, timed
    COMPILE_ERROR = "compile_error"  # the compiler rejected the generated code (or lowering failed)
    RUNTIME_ERROR = "runtime_error"  # the kernel crashed (signal) or raised while running
    WRONG_ANSWER = "wrong_answer"    # it ran but its outputs differ from the reference
    TIMEOUT = "timeout"              # building or running took longer than allowed
    INVALID = "invalid"              # the config breaks a resource limit (never built, or refused)
    WORKER_LOST = "worker_lost"      # the machine building or measuring it went away (twice: it is
                                     # retried once elsewhere first); says nothing about the config

    __str__ = str.__str__
    __format__ = str.__format__


#: The status words, in ``Status`` order (plain strings, as stored).
STATUSES = tuple(s.value for s in Status)
ERROR_STATUSES = STATUSES[1:]
RUN_STATUSES = ("running", "finished", "interrupted")
#: The tuner name of a final timing run (``autotune.final_timing``): its records rank first.
FINAL_TUNER = "final"

# Compiler logs can be megabytes; the head (first error) and the tail (summary) are kept.
MAX_ERROR_CHARS = 4096
_ERROR_TAIL_CHARS = 1024


def utc_now() -> datetime:
    return datetime.now(timezone.utc)


@lru_cache(maxsize=1)
def default_tool_version() -> str:
    """The installed autotune-te version, stamped on records that do not name one."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("autotune-te")
    except PackageNotFoundError:
        return "unknown"


def canonical_json(value: Any) -> str:
    """Deterministic JSON text (sorted keys, no spaces, no NaN/inf) for storage and hashing."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), allow_nan=False)


def config_hash(config: dict) -> str:
    """A stable 16-hex-digit hash of a schedule config, used to skip configs already measured."""
    return hashlib.sha256(canonical_json(config).encode()).hexdigest()[:16]


def check_status(status: str) -> Status:
    """``status`` as a ``Status`` (a member or its word); ValueError for any other value."""
    try:
        return Status(status)
    except ValueError:
        raise ValueError(f"unknown record status {status!r}; expected one of {', '.join(STATUSES)}") from None


def check_target_kind(kind: str) -> str:
    """A target kind must be a non-empty identifier ("cpu", "cuda", "cpu_noomp").

    Which kinds exist is decided by the target registry (``schedule.targets``), which
    this package does not import (it imports only ``te``): the database stores the kind
    as a key and accepts any well-formed one, so a newly registered kind needs no change
    here, and records of a kind this process has not registered can still be read.
    """
    if not isinstance(kind, str) or not kind.isidentifier():
        raise ValueError(f"unknown target kind {kind!r}; a target kind is a non-empty identifier "
                         f"such as 'cpu' or 'cuda'")
    return kind


def check_run_status(status: str) -> str:
    if status not in RUN_STATUSES:
        raise ValueError(f"unknown run status {status!r}; expected one of {', '.join(RUN_STATUSES)}")
    return status


def check_ratio_interval(interval, what: str = "ratio_interval") -> tuple[float, float] | None:
    """A final timing run's 90 % interval of its winner's ratio to the anchor as (low, high)
    floats, or None; anything else (not two finite positive numbers with low <= high) is a
    ValueError naming ``what``, so that no stored interval is empty, inverted or infinite."""
    if interval is None:
        return None
    try:
        low, high = interval
    except (TypeError, ValueError):
        low = high = None
    real = all(isinstance(v, numbers.Real) and not isinstance(v, bool) for v in (low, high))
    if not real or not (math.isfinite(low) and math.isfinite(high) and 0 < low <= high):
        raise ValueError(f"{what} must be two finite positive numbers [low, high] with low <= high, "
                         f"or none; got {interval!r}")
    return float(low), float(high)


def truncate_error(text: str | None) -> str | None:
    """Cut ``text`` to at most about MAX_ERROR_CHARS, keeping its head and its tail."""
    if text is None or len(text) <= MAX_ERROR_CHARS:
        return text
    head = MAX_ERROR_CHARS - _ERROR_TAIL_CHARS
    cut = len(text) - head - _ERROR_TAIL_CHARS
    return f"{text[:head]}\n... [{cut} characters cut] ...\n{text[-_ERROR_TAIL_CHARS:]}"


def as_utc(value: datetime, what: str) -> datetime:
    if not isinstance(value, datetime):
        raise ValueError(f"{what} must be a datetime, got {value!r}")
    if value.tzinfo is None:
        raise ValueError(f"{what} must be timezone-aware (use datetime.now(timezone.utc)), got {value!r}")
    return value.astimezone(timezone.utc)


def _check_json(value: Any, what: str) -> None:
    try:
        canonical_json(value)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{what} must be JSON-serialisable: {exc}") from None


def _optional_float(value, what: str) -> float | None:
    if value is None:
        return None
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"{what} must be finite or None, got {value!r}")
    return value


@dataclass(frozen=True)
class TargetInfo:
    """Where a measurement ran. Queries match targets by ``kind`` and ``device``."""

    kind: str                 # the target kind, e.g. "cpu" or "cuda" (see check_target_kind)
    device: str = ""          # CPU model or GPU name, e.g. "NVIDIA H100 80GB HBM3"
    compiler: str = ""        # e.g. "gcc 12.2.0" or "nvrtc 13.0"
    flags: str = ""           # compiler flags that change the code, e.g. "-O3 -march=native"
    host: str = ""            # machine name, for telling identical devices apart

    def __post_init__(self):
        check_target_kind(self.kind)
        for name in ("device", "compiler", "flags", "host"):
            if not isinstance(getattr(self, name), str):
                raise ValueError(f"TargetInfo.{name} must be a string, got {getattr(self, name)!r}")

    def describe(self) -> str:
        """Short human form: ``cuda (NVIDIA H100)`` or ``cpu``."""
        return f"{self.kind} ({self.device})" if self.device else self.kind

    def same_device(self, other: "TargetInfo") -> bool:
        """Whether ``other`` is the same kind of device built the same way, maybe on another
        host: records of the two are timings of one population (a run on a cluster)."""
        return (self.kind, self.device, self.compiler, self.flags) == (other.kind, other.device, other.compiler,
                                                                       other.flags)

    def to_dict(self) -> dict[str, str]:
        return {"kind": self.kind, "device": self.device, "compiler": self.compiler,
                "flags": self.flags, "host": self.host}


@dataclass(frozen=True, kw_only=True)
class MeasureRecord:
    """One measured trial: everything needed to replay it and to rank it.

    ``config_hash`` left empty is computed from ``config``. ``median_s`` is required for
    ``ok`` records and may be None for failures. ``id`` and ``run_id`` are filled in on
    records read from a database and take no part in equality.
    """

    workload_key: str                      # te.workload_key(name, params)
    workload_name: str                     # the registered op name, e.g. "matmul"
    params: dict[str, Any]
    target: TargetInfo
    config: dict[str, Any]                 # the schedule decisions, not the code
    status: Status                         # a Status (its word is accepted and converted)
    config_hash: str = ""
    costs: list[float] = field(default_factory=list)   # seconds per timed repeat
    median_s: float | None = None
    spread: float | None = None            # relative spread of costs, e.g. (max-min)/median
    gflops: float | None = None
    build_s: float = 0.0
    run_s: float = 0.0
    error: str | None = None               # cut to about MAX_ERROR_CHARS
    trial: int = 0                         # index within its run
    created_at: datetime = field(default_factory=utc_now)
    tool_version: str = field(default_factory=default_tool_version)
    id: int | None = field(default=None, compare=False)
    run_id: int | None = field(default=None, compare=False)

    def __post_init__(self):
        status = check_status(self.status)
        if not isinstance(self.target, TargetInfo):
            raise ValueError(f"MeasureRecord.target must be a TargetInfo, got {self.target!r}")
        for name in ("workload_key", "workload_name"):
            if not isinstance(getattr(self, name), str) or not getattr(self, name):
                raise ValueError(f"MeasureRecord.{name} must be a non-empty string")
        for name in ("params", "config"):
            if not isinstance(getattr(self, name), dict):
                raise ValueError(f"MeasureRecord.{name} must be a dict, got {getattr(self, name)!r}")
            _check_json(getattr(self, name), f"MeasureRecord.{name}")
        costs = [float(c) for c in self.costs]
        if not all(math.isfinite(c) and c >= 0 for c in costs):
            raise ValueError(f"MeasureRecord.costs must be finite non-negative seconds, got {costs!r}")
        median = _optional_float(self.median_s, "MeasureRecord.median_s")
        if status is Status.OK and (median is None or median <= 0):
            raise ValueError(f"an 'ok' record needs a positive median_s, got {self.median_s!r}")
        if isinstance(self.trial, bool) or not isinstance(self.trial, int) or self.trial < 0:
            raise ValueError(f"MeasureRecord.trial must be a non-negative int, got {self.trial!r}")
        if self.error is not None and not isinstance(self.error, str):
            raise ValueError(f"MeasureRecord.error must be a string or None, got {self.error!r}")
        normalised = {
            "status": status,
            "costs": costs,
            "median_s": median,
            "spread": _optional_float(self.spread, "MeasureRecord.spread"),
            "gflops": _optional_float(self.gflops, "MeasureRecord.gflops"),
            "build_s": float(self.build_s),
            "run_s": float(self.run_s),
            "error": truncate_error(self.error),
            "created_at": as_utc(self.created_at, "MeasureRecord.created_at"),
            "config_hash": self.config_hash or config_hash(self.config),
        }
        for name, value in normalised.items():
            object.__setattr__(self, name, value)


@dataclass(frozen=True, kw_only=True)
class RunInfo:
    """One tuning run and what it produced so far."""

    id: int
    workload_key: str
    workload_name: str
    target: TargetInfo
    tuner: str
    seed: int | None
    trials_requested: int
    tool_version: str
    started_at: datetime
    finished_at: datetime | None           # None while running (or after a crash)
    status: str                            # one of RUN_STATUSES, as stored
    n_records: int = 0
    n_ok: int = 0
    best_gflops: float | None = None       # of this run's own records
    pid: int | None = None                 # the tuning process, and its machine
    host: str | None = None
    heartbeat_at: datetime | None = None   # renewed with every stored batch
    resumed_from: int | None = None        # the run a resumed run continues
    baseline_gflops: float | None = None   # a resumed run: the best stored before it began
    anchor_gflops: float | None = None     # a final timing run: the anchor, timed with its records
    ratio_low: float | None = None         # a final timing run: the 90 % interval of its winner's
    ratio_high: float | None = None        # ratio to the anchor

    def state(self, **kwargs) -> str:
        """The status, or "stale" for a "running" run whose process is gone (``liveness.run_state``,
        whose keyword arguments this passes on)."""
        from .liveness import run_state

        return run_state(self, **kwargs)


class WorkloadSummary(NamedTuple):
    key: str
    name: str
    n_records: int
    best_gflops: float | None


class TargetSummary(NamedTuple):
    target: TargetInfo
    n_workloads: int
    n_records: int
