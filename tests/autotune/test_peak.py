"""The measured CPU peak (what "% of peak" is relative to) and conv2d's anchor.

The peak's arithmetic is checked with an injected timer (no test depends on the machine's
speed); the FMA loop itself is compiled and run for real, briefly.
"""
from __future__ import annotations

import numpy as np
import pytest

import autotune
from autotune import anchor, targets
from autotune.peak import Peak, measure_cpu_peak, peak_source
from schedule.targets import parse_target


def test_the_fma_loop_fills_the_register_file_but_keeps_enough_chains():
    source, lanes, chains = peak_source(64, 32)  # AVX-512
    assert (lanes, chains) == (16, 24) and "vector_size(64)" in source and f"acc[{chains}]" in source
    assert peak_source(32, 16)[1:] == (8, 12)  # AVX2
    assert peak_source(16, 8)[1:] == (4, 8)  # never fewer than two pipes of 4-cycle FMAs keep in flight


def test_the_peak_is_the_fastest_run_of_every_thread_s_fmas():
    ticks = iter([0.0, 0.5, 1.0, 1.25, 2.0, 2.4])  # three runs: 0.5 s, 0.25 s, 0.4 s
    facts = parse_target("cpu:avx2").facts
    peak = measure_cpu_peak(facts, timer=lambda: next(ticks), runs=3, iterations=1000)
    assert (peak.lanes, peak.chains) == (8, 12) and peak.cores >= 1
    assert peak.gflops == pytest.approx(2.0 * peak.cores * 1000 * 12 * 8 / 0.25 / 1e9)
    assert next(ticks, None) is None  # two readings per run, none more


def test_the_peak_says_how_much_of_its_cores_the_fastest_run_had():
    ticks = iter([0.0, 0.5, 1.0, 1.25])   # wall: 0.5 s, then 0.25 s (the fastest)
    cpu = iter([1.0, 0.15])                # its threads' CPU time together: 0.15 s
    readings = []
    facts = parse_target("cpu:avx2").facts
    peak = measure_cpu_peak(facts, timer=lambda: next(ticks), runs=2, iterations=1000,
                            cpu_seconds=lambda seconds: readings.append(seconds) or next(cpu))
    assert peak.cpu_share == pytest.approx(0.15 / (0.25 * peak.cores))
    assert peak.busy
    assert len(readings) == 2 and all(r > 0 for r in readings)   # the loop reads its threads' clocks


def test_a_peak_read_on_a_quiet_machine_had_its_cores():
    facts = parse_target("cpu:avx2").facts
    peak = measure_cpu_peak(facts, runs=3, iterations=1 << 14)
    assert 0.0 < peak.cpu_share <= 1.0


def test_a_peak_read_on_a_busy_machine_is_reported_with_a_warning():
    from autotune.cli.report import peak_lines

    quiet, busy = Peak(200.0, 2, 16, 24, cpu_share=0.99), Peak(90.0, 2, 16, 24, cpu_share=0.45)
    assert not quiet.busy and not Peak(200.0, 2, 16, 24).busy   # unmeasured: no claim either way
    assert peak_lines(quiet, 150.0) == ["peak:     200 GFLOP/s fp32 (FMA throughput measured on 2 cores, 16 lanes); "
                                        "the best is 75 % of it"]
    lines = peak_lines(busy, 60.0)
    assert len(lines) == 2 and "busy while the peak was read (its threads had 45 % of their cores)" in lines[1]


def test_a_peak_describes_itself_and_gives_shares():
    peak = Peak(200.0, 2, 16, 24)
    assert peak.describe() == "200 GFLOP/s fp32 (FMA throughput measured on 2 cores, 16 lanes)"
    assert peak.share(150.0) == pytest.approx(0.75)


def test_only_float32_cpu_work_that_can_approach_it_has_a_peak():
    wl64 = autotune.Task("matmul", dict(M=8, N=8, K=8, dtype="float64"), target="cpu")
    assert targets.machine_peak(wl64) is None
    pooling = autotune.Task("pool2d", dict(N=1, C=2, H=8, W=8, kernel=2), target="cpu")
    assert targets.machine_peak(pooling) is None  # memory-bound: a share of the FMA peak says nothing
    assert targets.machine_peak(autotune.Task("matmul", dict(M=8, N=8, K=8), target="cpu")).gflops > 0
    assert targets.machine_peak(autotune.Task("matmul", dict(M=8, N=8, K=8), target="cuda_sim")) is None


CONV = dict(N=1, C=5, H=9, W=11, K=7, R=3, S=3, padding=1, stride=2)


@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
def test_the_numpy_conv2d_anchor_computes_the_workload_and_says_it_is_weak(monkeypatch, layout):
    monkeypatch.setenv(anchor.CONV_ANCHOR_ENV, "numpy")
    task = autotune.Task("conv2d", dict(CONV, layout=layout, dilation=2))
    assert anchor.torch_for_anchors() is None
    assert "a weak baseline" in anchor.NumpyAnchor().label(task)
    assert anchor.NumpyAnchor().label(autotune.Task("matmul", dict(M=8, N=8, K=8))) == "NumPy"
    fn, why = anchor.numpy_equivalent(task)
    (ref,) = task.workload.reference(*task.workload.random_inputs(seed=0))
    np.testing.assert_allclose(fn(), ref, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
def test_with_pytorch_installed_the_conv2d_anchor_is_its_convolution(monkeypatch, layout):
    pytest.importorskip("torch")
    monkeypatch.delenv(anchor.CONV_ANCHOR_ENV, raising=False)
    task = autotune.Task("conv2d", dict(CONV, layout=layout, dilation=2))
    assert anchor.NumpyAnchor().label(task).startswith("PyTorch ")
    fn, why = anchor.numpy_equivalent(task)
    (ref,) = task.workload.reference(*task.workload.random_inputs(seed=0))
    np.testing.assert_allclose(fn(), ref, rtol=1e-4, atol=1e-5)


DEPTHWISE = dict(N=1, C=4, H=9, W=8, R=3, S=3, padding=[1, 0, 2, 1], stride=2, multiplier=2)


def test_without_pytorch_depthwise_has_no_anchor_and_says_which_one_it_would_have(monkeypatch):
    monkeypatch.setenv(anchor.CONV_ANCHOR_ENV, "numpy")
    task = autotune.Task("depthwise_conv2d", DEPTHWISE)
    fn, why = anchor.numpy_equivalent(task)
    assert fn is None and "oneDNN" in why and not anchor.has_numpy_anchor(task)


def test_with_pytorch_installed_depthwise_is_anchored_on_its_grouped_convolution(monkeypatch):
    pytest.importorskip("torch")
    monkeypatch.delenv(anchor.CONV_ANCHOR_ENV, raising=False)
    task = autotune.Task("depthwise_conv2d", DEPTHWISE)
    assert anchor.NumpyAnchor().label(task).startswith("PyTorch ")
    fn, why = anchor.numpy_equivalent(task)
    (ref,) = task.workload.reference(*task.workload.random_inputs(seed=0))
    np.testing.assert_allclose(fn(), ref, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("params", [dict(N=1, C=3, H=9, W=8, kernel=3, stride=2, padding=1, pool_type="max"),
                                    dict(N=1, C=3, H=9, W=8, kernel=[3, 2], padding=[1, 1], pool_type="avg",
                                         layout="NHWC")])
def test_with_pytorch_installed_pooling_is_anchored_on_its_pooling(monkeypatch, params):
    pytest.importorskip("torch")
    monkeypatch.delenv(anchor.CONV_ANCHOR_ENV, raising=False)
    task = autotune.Task("pool2d", params)
    fn, why = anchor.numpy_equivalent(task)
    (ref,) = task.workload.reference(*task.workload.random_inputs(seed=0))
    np.testing.assert_allclose(fn(), ref, rtol=1e-5, atol=1e-6)
    wide = autotune.Task("pool2d", dict(params, kernel=3, padding=2))  # PyTorch pads at most half a window
    assert anchor.numpy_equivalent(wide)[0] is None and "at most half" in anchor.numpy_equivalent(wide)[1]
