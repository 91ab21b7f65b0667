"""The builder compiles each source as soon as it is generated, while it lowers the rest.

A fake backend stands in for gcc: it records what it compiles, and the builder's source
step for the last candidate waits until the first compile has started. A builder that
generated every source before compiling any would never see it start.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path

from autotune.builder import LocalBuilder
from autotune.measure import MeasureInput, Status
from schedule.config import ConfigError

WAIT_S = 30.0  # a bound on waiting for the other thread, never reached when the builder streams


@dataclass(frozen=True)
class FakeTask:
    target: str = "fake"


class RecordingBackend:
    """Compiles nothing: records each source and answers a path named after it."""

    target = "fake"

    def __init__(self):
        self.first_started = threading.Event()
        self.compiled: list[str] = []
        self.lock = threading.Lock()

    def compile_source(self, source: str, timeout: float | None = None) -> Path:
        with self.lock:
            self.compiled.append(source)
        self.first_started.set()
        return Path(f"/compiled/{source}.so")


class ScriptedBuilder(LocalBuilder):
    """Sources come from ``sources`` (config -> source text, or an exception to raise); the
    source of ``wait_at`` waits until a compile has started and records whether one did."""

    def __init__(self, sources: dict, wait_at=None):
        super().__init__(n_workers=2)
        self.fake = RecordingBackend()
        self.sources = sources
        self.wait_at = wait_at
        self.compile_started_first: bool | None = None

    def backend(self, target):
        return self.fake

    def source(self, inp: MeasureInput) -> str:
        if inp.config == self.wait_at:
            self.compile_started_first = self.fake.first_started.wait(WAIT_S)
        made = self.sources[inp.config]
        if isinstance(made, Exception):
            raise made
        return made


def test_the_first_compile_starts_before_the_last_source_is_generated():
    sources = {n: f"kernel {n}" for n in range(4)}
    builder = ScriptedBuilder(sources, wait_at=3)
    results = builder.build([MeasureInput(FakeTask(), n) for n in range(4)])
    assert builder.compile_started_first is True
    assert [r.status for r in results] == [Status.OK] * 4
    assert [r.artifact for r in results] == [f"/compiled/kernel {n}.so" for n in range(4)]


def test_identical_sources_compile_once_and_failures_keep_their_place():
    sources = {0: "same", 1: ConfigError("no such tile"), 2: "same", 3: "other"}
    builder = ScriptedBuilder(sources)
    results = builder.build([MeasureInput(FakeTask(), n) for n in range(4)])
    assert sorted(builder.fake.compiled) == ["other", "same"]
    assert [r.status for r in results] == [Status.OK, Status.INVALID, Status.OK, Status.OK]
    assert results[0].artifact == results[2].artifact == "/compiled/same.so"
    assert results[0].source_hash == results[2].source_hash != results[3].source_hash
    assert "no such tile" in results[1].error
