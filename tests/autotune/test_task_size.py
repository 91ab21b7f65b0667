"""Tasks too large for memory are refused before anything is allocated, with one clear message."""
from __future__ import annotations

import pytest

import autotune
from autotune import task as task_module
from autotune.task import MemoryNeed, Task, TaskTooLarge, available_memory

MB = 1000 ** 2


def test_available_memory_reads_memavailable(tmp_path):
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:       16000000 kB\nMemFree:         1000000 kB\nMemAvailable:    7340032 kB\n")
    assert available_memory(str(meminfo)) == 7340032 * 1024


def test_available_memory_falls_back_without_meminfo(tmp_path):
    found = available_memory(str(tmp_path / "missing"))
    assert found is None or (isinstance(found, int) and found > 0)


def test_memory_need_counts_inputs_outputs_and_the_float64_reference():
    need = Task("matmul", dict(M=64, N=32, K=16)).memory_need()
    a, b, c = 64 * 16, 16 * 32, 64 * 32
    assert need.inputs == (a + b) * 4
    assert need.outputs == c * 4
    # the result, its float64 accumulator and float64 copies of A and B (the einsum path)
    assert need.reference == c * 4 + (c + a + b) * 8
    assert need.anchor == (a + b + c) * 4              # NumPy's inputs and output
    assert need.total == need.inputs + need.outputs + need.reference


def test_the_peak_is_the_anchor_when_it_needs_more():
    assert MemoryNeed(inputs=1, outputs=1, reference=1, anchor=10).total == 10
    assert MemoryNeed(inputs=5, outputs=5, reference=5, anchor=10).total == 15


def test_a_task_over_the_available_memory_is_refused_naming_sizes():
    task = Task("matmul", dict(M=1024, N=1024, K=1024))
    task.check_fits_memory(available=task.memory_need().total)   # exactly enough: accepted
    with pytest.raises(TaskTooLarge) as caught:
        task.check_fits_memory(available=10 * MB)
    message = str(caught.value)
    assert message.startswith("matmul(M=1024, N=1024, K=1024, dtype=float32")
    assert "too large to tune here" in message and "10.0 MB is available" in message
    assert "inputs 8.4 MB" in message and "\n" not in message
    assert isinstance(caught.value, autotune.TaskError)   # the CLI shows it as one line


def test_tune_refuses_before_making_inputs_or_a_runner(monkeypatch):
    """The figure of available memory is injected; the shape itself is ordinary."""
    def forbidden(*args, **kwargs):
        raise AssertionError("allocated or started something before the size check")

    monkeypatch.setattr(task_module, "available_memory", lambda: 1 * MB)
    monkeypatch.setattr("te.workload.Workload.random_inputs", forbidden)
    monkeypatch.setattr("autotune.targets.make_runner", forbidden)
    from autotune.tuning import tune

    with pytest.raises(TaskTooLarge, match="only 1.0 MB is available"):
        tune(Task("matmul", dict(M=512, N=512, K=512)), trials=4, tuner="random")


def test_an_absurd_shape_is_refused_whatever_the_machine():
    task = Task("matmul", dict(M=100_000_000, N=1_000_000, K=1_000_000))
    with pytest.raises(TaskTooLarge, match="too large to tune here"):
        task.check_fits_memory()
