"""What glibc's vector math and folded reductions buy: fused row-statistics kernels with
and without them, against NumPy composed, timed alternately in one process.

    python bench/vector_math.py                  # softmax and layernorm, 4096 x 4096

Each workload is scheduled by hand as the space's fused starting points are: every row
statistic (and softmax's exponentials) computed per row inside the output's parallel row
loop, the element-wise loops vectorized. The same generated C is compiled twice: as the
backend prints it, and with the two measures taken out (the ``__FAST_MATH__`` definition
around ``math.h``, without which ``expf`` is called one lane at a time, and the
``omp simd reduction`` pragmas, without which gcc leaves max reductions scalar). Five
rounds, each timing the three (best of 7 calls after a warm-up) in turn; medians printed.
"""
from __future__ import annotations

import re
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "bench")]

from anchor import blas_description, reexec_without_blas_overrides  # noqa: E402

WORKLOADS = {"softmax": dict(shape=[4096, 4096]), "layernorm": dict(M=4096, N=4096)}


def fused_rows_schedule(wl):
    """Every stage but the output computed at the output's row loop, which runs in parallel."""
    import schedule
    import te

    out = wl.outputs[0]
    s = schedule.create_schedule(out)
    row, col = out.op.axis
    for op in te.topological_order(wl.outputs):
        if isinstance(op, te.ComputeOp) and op is not out.op:
            if not op.is_reduction and len(op.axis) == 1 and op.reduce_axis == ():
                s[op].compute_inline()  # layernorm's mean: a division
                continue
            s[op].compute_at(s[out], row)
            if not op.is_reduction:
                s[op].vectorize(op.axis[-1])
    s[out].parallel(row)
    s[out].vectorize(col)
    return s


def without_vector_measures(source: str) -> str:
    """``source`` as the backend printed it before vector math and folded reductions."""
    source = re.sub(r"#if defined\(__x86_64__\) && !defined\(__FAST_MATH__\)\n.*?#endif\n", "", source, flags=re.S)
    source = re.sub(r"#ifdef AT_VECTOR_MATH_DECLARED\n.*?#endif\n", "", source, flags=re.S)
    return re.sub(r"^\s*#pragma omp simd reduction\(.*\)\n", "", source, flags=re.M)


def best_of(fn, calls: int = 7) -> float:
    fn()
    times = []
    for _ in range(calls):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main() -> None:
    reexec_without_blas_overrides()
    import numpy as np

    import schedule
    import te
    from autotune.anchor import numpy_equivalent_on
    from backends import cpu

    print(f"# fused row statistics, with and without vector math and folded reductions; NumPy: {blas_description()}")
    print("| workload | NumPy composed | without (ms, ratio) | with (ms, ratio) |")
    print("| --- | --- | --- | --- |")
    for name, params in WORKLOADS.items():
        wl = te.create_workload(name, **params)
        func = schedule.lower(fused_rows_schedule(wl), wl.args)
        source = cpu.generate_source(func)
        assert source != without_vector_measures(source), "nothing to take out: the printer changed"
        modules = [cpu.CPUModule(func, text, cpu.compile_source(text))
                   for text in (without_vector_measures(source), source)]
        inputs = wl.random_inputs(seed=0)
        (reference,) = wl.reference(*inputs)
        outputs = [np.empty_like(reference) for _ in modules]
        for module, out in zip(modules, outputs):
            module(*inputs, out)
            np.testing.assert_allclose(out, reference, rtol=1e-4, atol=1e-5)
        anchor = numpy_equivalent_on(wl, inputs)
        rounds = [[best_of(anchor)] + [best_of(lambda m=m, o=o: m(*inputs, o)) for m, o in zip(modules, outputs)]
                  for _ in range(5)]
        numpy_s, without, with_ = (statistics.median(r[n] for r in rounds) for n in range(3))
        print(f"| {name} {params} | {numpy_s * 1e3:.2f} ms | {without * 1e3:.2f} ms, {numpy_s / without:.2f}x | "
              f"{with_ * 1e3:.2f} ms, {numpy_s / with_:.2f}x |", flush=True)


if __name__ == "__main__":
    main()
