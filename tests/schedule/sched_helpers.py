"""Helpers of the schedule and backend tests (tests/backends imports them too): build a schedule, run it, compare.

    wl = te.create_workload("matmul", M=13, N=17, K=11)
    s = schedule.create_schedule(wl.outputs)
    ...primitives...
    check(s, wl)          # lower + verify + build + run on random inputs + compare every output

Tolerances depend on the dtype and on the longest reduction in the DAG: a float sum of K
terms in the kernel's order differs from the float64-accumulated reference by about
sqrt(K) roundings of the partial sums.
"""
from __future__ import annotations

import math

import numpy as np

import backends
import schedule
import te
from te.tensor import ComputeOp

#: (rtol, atol per sqrt(reduction length)) by dtype; integers must match exactly.
FLOAT_TOLERANCE = {
    "float16": (1e-2, 4e-3),
    "float32": (1e-4, 1e-5),
    "float64": (1e-10, 1e-12),
}

#: Matmul-like shapes with prime extents: no split factor of interest divides them.
M, N, K = 13, 17, 11


def workload(args, num_inputs: int | None = None, name: str = "custom") -> te.Workload:
    """A ``te.Workload`` around hand-built tensors (inputs first, then outputs)."""
    args = list(args)
    if num_inputs is None:
        num_inputs = sum(isinstance(t.op, te.PlaceholderOp) for t in args)
    return te.Workload(name, {}, args, num_inputs)


def reduction_length(outputs) -> int:
    """The longest reduction (product of reduce extents) of any compute behind ``outputs``."""
    longest = 1
    for op in te.topological_order(outputs):
        if isinstance(op, ComputeOp) and op.reduce_axis:
            longest = max(longest, math.prod(iv.extent for iv in op.reduce_axis))
    return longest


def tolerance(dtype: str, length: int = 1) -> tuple[float, float]:
    """(rtol, atol) for a result of ``dtype`` behind a reduction of ``length`` terms."""
    rtol, atol = FLOAT_TOLERANCE[dtype]
    return rtol, atol * math.sqrt(max(1, length))


def assert_matches(actual: np.ndarray, expected: np.ndarray, dtype: str, length: int = 1, what: str = "") -> None:
    if dtype in FLOAT_TOLERANCE:
        rtol, atol = tolerance(dtype, length)
        np.testing.assert_allclose(
            actual.astype(np.float64), np.asarray(expected).astype(np.float64), rtol=rtol, atol=atol,
            err_msg=what,
        )
    else:
        np.testing.assert_array_equal(actual, np.asarray(expected).astype(actual.dtype), err_msg=what)


def poisoned(tensor: te.Tensor) -> np.ndarray:
    """An output array pre-filled with a value no correct kernel leaves behind (NaN for floats)."""
    dt = np.dtype(tensor.dtype)
    fill = np.nan if dt.kind == "f" else (np.iinfo(dt).min if dt.kind in "iu" else True)
    return np.full(tensor.shape, fill, dtype=dt)


def run(module, wl: te.Workload, seed: int = 0) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Run ``module`` on ``wl``'s random inputs; (outputs, reference outputs)."""
    inputs = wl.random_inputs(seed)
    saved = [x.copy() for x in inputs]
    outputs = [poisoned(t) for t in wl.outputs]
    module(*inputs, *outputs)
    for x, before, t in zip(inputs, saved, wl.inputs):
        np.testing.assert_array_equal(x, before, err_msg=f"the kernel wrote into input {t.name!r}")
    return outputs, wl.reference(*inputs)


def check(s: schedule.Schedule, wl: te.Workload, seed: int = 0, length: int | None = None):
    """Lower (and verify) ``s``, build it for the CPU, run it and compare every output.

    Returns the built module (its ``.source`` and ``.func`` stay inspectable).
    """
    func = schedule.lower(s, wl.args)
    schedule.verify(func)
    module = backends.build(s, wl.args, target="cpu")
    schedule.verify(module.func)
    outputs, expected = run(module, wl, seed)
    length = reduction_length(wl.outputs) if length is None else length
    for t, got, want in zip(wl.outputs, outputs, expected):
        assert_matches(got, want, t.dtype, length, what=f"output {t.name!r}\n{module.func}")
    return module


def register_tile_matmul(rows: int, columns: int, m: int, n: int, k: int = 32, dtype: str = "float32",
                         across_rows: bool = False) -> tuple[schedule.Schedule, te.Workload]:
    """A matmul whose output is computed in ``rows`` x ``columns`` register tiles (a local
    cache-write stage, promoted to registers): rows unrolled, columns vectorized
    (``across_rows``: the other way round, so the vector loop reads A at a stride)."""
    wl = te.create_workload("matmul", M=m, N=n, K=k, dtype=dtype)
    C = wl.outputs[0]
    s = schedule.create_schedule(C)
    CL = s.cache_write(C, "local")
    io, jo, ii, ji = s[C].tile(*C.op.axis, rows, columns)
    s[CL].compute_at(s[C], jo)
    i, j = s[CL].op.axis
    (kk,) = s[CL].op.reduce_axis
    unrolled, vector = (j, i) if across_rows else (i, j)
    s[CL].reorder(kk, unrolled, vector)
    s[CL].unroll(unrolled)
    s[CL].vectorize(vector)
    return s, wl


def register_tile_batch_matmul(tile: tuple[int, int, int], batch: int, m: int, n: int, k: int = 16
                               ) -> tuple[schedule.Schedule, te.Workload]:
    """A batch matmul computed in (batch, rows, columns) ``tile`` register tiles, batch and
    rows unrolled, columns vectorized. With sizes that none of the tile's three sizes
    divide, each tile loop has a tail: too many combinations for a copy of each, so the
    tile keeps one tail copy with variable loops."""
    wl = te.create_workload("batch_matmul", B=batch, M=m, N=n, K=k)
    C = wl.outputs[0]
    s = schedule.create_schedule(C)
    CL = s.cache_write(C, "local")
    splits = [s[C].split(axis, size) for axis, size in zip(C.op.axis, tile)]
    s[C].reorder(*(outer for outer, _ in splits), *(inner for _, inner in splits))
    s[CL].compute_at(s[C], splits[-1][0])
    b, i, j = s[CL].op.axis
    (kk,) = s[CL].op.reduce_axis
    s[CL].reorder(kk, b, i, j)
    s[CL].unroll(b)
    s[CL].unroll(i)
    s[CL].vectorize(j)
    return s, wl


def tensor(wl_or_outputs, name: str) -> te.Tensor:
    """The tensor called ``name`` in the DAG behind a workload's (or a list of) outputs."""
    outputs = wl_or_outputs.outputs if isinstance(wl_or_outputs, te.Workload) else wl_or_outputs
    for op in te.topological_order(outputs):
        if op.name == name:
            return op.output(0)
    raise KeyError(f"no tensor {name!r} behind {outputs}")


def runnable(spec: str):
    """The target ``spec`` (a preset such as ``cpu:avx512``) with kernels this machine can run:
    the preset's space (vector width, register file) compiled for this CPU's instructions
    where it lacks the preset's. Tests that run kernels of a fixed preset take it, so they
    pass on AVX2-only machines too (gcc splits the wider vectors)."""
    from schedule.targets import parse_target
    from schedule.targets.cpu import host_cpu_facts, missing_instructions

    target = parse_target(spec)
    host = host_cpu_facts()
    if missing_instructions(target.facts, host) is None:
        return target
    return target.with_facts(isa_flags=host.isa_flags)
