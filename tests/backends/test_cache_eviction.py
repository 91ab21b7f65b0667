"""Evicting arrays from the CPU caches: what is evicted (each array's whole memory span), that
the data survive it, and the timing protocol's flushes built on it (candidates and anchors).

Whether lines really leave the caches can only be seen in timings, which no test reads; the
benchmark that compares the two flushes is in ``bench/RESULTS.md``."""
import time

import numpy as np
import pytest

from autotune import timing_protocol
from backends import cache_eviction

needs_x86 = pytest.mark.skipif(not cache_eviction.eviction_available(), reason="cache-line eviction is x86-64 only")


@pytest.fixture
def spans(monkeypatch):
    """The (address, bytes) each call of the compiled routine gets, the routine not run."""
    calls = []
    monkeypatch.setattr(cache_eviction, "_routine", lambda: lambda p, n: calls.append((p, n)))
    monkeypatch.setattr(cache_eviction, "eviction_available", lambda: True)
    return calls


def test_each_array_is_evicted_over_its_whole_memory_span(spans):
    a = np.zeros((64, 32), np.float32)
    cache_eviction.evict([a, a.T, a[::2, 1:5], np.zeros(0)])
    base = a.ctypes.data
    assert spans[0] == (base, a.nbytes)
    assert spans[1] == (base, a.nbytes)                       # the transpose spans the same memory
    first, last = a[0, 1:5].ctypes.data, a[62, 4:5].ctypes.data + 4
    assert spans[2] == (first, last - first)                  # a strided view: first to last element
    assert len(spans) == 3                                    # nothing to evict in an empty array


@needs_x86
def test_evicted_data_are_unchanged_also_when_just_written():
    rng = np.random.default_rng(0)
    a = rng.random((257, 129), dtype=np.float32)  # not a multiple of a cache line
    expected = a.copy()
    a[5:] += 1.0  # dirty lines: written back, not dropped
    expected[5:] += 1.0
    cache_eviction.evict([a, a[3:, ::3]])
    np.testing.assert_array_equal(a, expected)


def test_without_a_cache_line_flush_it_says_so(monkeypatch):
    monkeypatch.setattr(cache_eviction.platform, "machine", lambda: "riscv64")
    assert not cache_eviction.eviction_available()
    with pytest.raises(RuntimeError, match="x86-64 only"):
        cache_eviction.evict([np.zeros(4)])


def test_a_candidates_flush_evicts_its_arrays(spans):
    arrays = [np.zeros(100, np.float32), np.zeros((8, 8))]
    flush = timing_protocol.evicting_flush(arrays)
    assert spans == []                                        # nothing until the flush runs
    flush()
    flush()
    assert spans == [(x.ctypes.data, x.nbytes) for x in arrays] * 2


def test_an_anchors_flush_evicts_its_inputs_and_its_last_output(spans):
    x = np.ones(64, np.float32)
    outs = [np.empty(64, np.float32), np.empty(64, np.float32)]
    calls = []

    def anchor():
        calls.append(1)
        out = outs[len(calls) % 2]  # a library may return a new array each call
        np.multiply(x, 2, out=out)
        return out

    call, flush = timing_protocol.anchor_with_flush(anchor, [x])
    assert call() is None and len(calls) == 1
    flush()
    assert spans == [(x.ctypes.data, x.nbytes), (outs[1].ctypes.data, outs[1].nbytes)]
    call()
    spans.clear()
    flush()
    assert spans == [(x.ctypes.data, x.nbytes), (outs[0].ctypes.data, outs[0].nbytes)]


def test_an_anchor_returning_several_outputs_has_each_evicted(spans):
    x, y, z = np.ones(16), np.zeros(16), np.zeros(32)
    call, flush = timing_protocol.anchor_with_flush(lambda: [y, z], [x])
    call()
    flush()
    assert [n for _, n in spans] == [x.nbytes, y.nbytes, z.nbytes]


def test_without_eviction_the_flush_is_the_shared_cache_flusher(monkeypatch):
    monkeypatch.setattr(cache_eviction, "eviction_available", lambda: False)
    made = []
    monkeypatch.setattr(timing_protocol, "CacheFlusher", lambda: made.append(1) or object())
    timing_protocol._shared_cache_flusher.cache_clear()
    try:
        first = timing_protocol.evicting_flush([np.zeros(4)])
        _, second = timing_protocol.anchor_with_flush(lambda: None, [np.zeros(4)])
        assert first is second and made == [1]               # one big buffer per process
    finally:
        timing_protocol._shared_cache_flusher.cache_clear()


@needs_x86
def test_the_cpu_measuring_process_builds_the_routine_while_it_sets_up(tmp_path, monkeypatch):
    """Built at setup, so no candidate's timeout pays for the compile: present, and older than
    this process's first look for it, once the measuring process is ready and before any
    candidate was sent."""
    from autotune import Task
    from autotune.runner import LocalRunner
    from backends.cpu import compile_source

    monkeypatch.setenv("AUTOTUNE_CACHE_DIR", str(tmp_path))  # the measuring process inherits it
    task = Task("matmul", dict(M=8, N=8, K=8))
    with LocalRunner(timeout=10.0) as runner:
        runner._ensure(task)  # the setup message only
        ready = time.time()
        built = compile_source(cache_eviction.EVICT_SOURCE)  # found, or compiled now
    assert built.parent.parent == tmp_path
    assert built.stat().st_mtime <= ready
