"""Index width in generated code: int64 on the CPU; on GPUs int32 while every index
fits, int64 when one can pass 2**31 - 1.

The large shapes here are only lowered and printed, never allocated or run; the wide form's
arithmetic is checked by running it on a small matmul.
"""
from __future__ import annotations

import platform
import re
import shutil
import subprocess

import numpy as np
import pytest

import schedule
import te
from backends import cpu, cuda
from backends.c_family import CSourcePrinter
from backends.cpu import CPUDialect, CPUModule


def loop_types(source: str) -> set[str]:
    return set(re.findall(r"for \((\w+) \w+ = 0;", source))


def add_one(*shape):
    A = te.placeholder(shape, name="A")
    B = te.compute(shape, lambda *i: A[i] + 1.0, name="B")
    return schedule.create_schedule(B), [A, B]


def narrow_source(s, args) -> str:
    """C source with the GPU dialects' choice of index width (int32 while indices fit)."""
    return cpu.generate_source(schedule.lower(s, args), CPUDialect(wide_index=False))


def test_functions_whose_indices_fit_keep_int32_loops_in_a_narrow_dialect():
    s, args = add_one(64, 64)
    assert loop_types(narrow_source(s, args)) == {"int32_t"}
    s, args = add_one(46_000, 46_000)   # 2.1e9 elements: the last flat index is just below 2**31 - 1
    assert loop_types(narrow_source(s, args)) == {"int32_t"}


def test_a_flat_index_past_int32_makes_every_loop_int64():
    s, args = add_one(70_000, 70_000)   # 4.9e9 elements: (i * 70000 + j) overflows int32
    source = narrow_source(s, args)
    assert loop_types(source) == {"int64_t"}
    assert "int32_t" not in source.split("void ", 1)[1]


def test_a_loop_extent_past_int32_makes_int64_loops():
    s, args = add_one(3_000_000_000)
    assert loop_types(narrow_source(s, args)) == {"int64_t"}


def test_cpu_code_indexes_in_64_bits_even_when_indices_fit():
    s, args = add_one(64, 64)
    assert loop_types(cpu.generate_source(schedule.lower(s, args))) == {"int64_t"}


def _assembly(source: str) -> str:
    flags = [f for f in cpu.cflags(("-march=skylake-avx512",)) if f not in ("-shared", "-fPIC")]
    done = subprocess.run([cpu.CC, *flags, "-S", "-x", "c", "-", "-o", "-"], input=source,
                          capture_output=True, text=True, check=True)
    return done.stdout


@pytest.mark.skipif(platform.machine() != "x86_64" or shutil.which(cpu.CC) is None,
                    reason="reads x86 assembly from gcc")
def test_a_contiguous_copy_inside_an_index_sum_is_not_a_gather_or_scatter():
    # Packing B into panels: the innermost loop copies contiguous elements to contiguous
    # places, but each address is a sum of div/mod terms of an outer fused loop. With
    # int32 indices under -fwrapv, gcc cannot prove the sum affine and gathers/scatters.
    wl = te.create_workload("matmul", M=8, N=1000, K=1000)
    A, B, C = wl.args
    s = schedule.create_schedule(C)
    packed = s.pack_panels(B, 1, 32, [s[C]])
    outer, middle, inner = s[packed].op.axis
    s[packed].parallel(s[packed].fuse(outer, middle))
    s[packed].vectorize(inner)
    func = schedule.lower(s, wl.args)
    assembly = _assembly(cpu.generate_source(func))
    assert "vmovups" in assembly or "vmovaps" in assembly
    assert not re.search(r"\bv(p?gather|p?scatter)", assembly)
    narrow = _assembly(cpu.generate_source(func, CPUDialect(wide_index=False)))
    assert re.search(r"\bv(p?gather|p?scatter)", narrow)  # the failure this guards against


def test_cuda_thread_indices_widen_with_the_loops():
    s, args = add_one(70_000, 70_000)
    B = args[1]
    bx, tx = s[B].split(s[B].fuse(*B.op.axis), factor=256)
    s[B].bind(bx, "blockIdx.x")
    s[B].bind(tx, "threadIdx.x")
    source = cuda.generate_source(schedule.lower(s, args))
    assert re.search(r"const int64_t \w+ = \(int64_t\)blockIdx\.x;", source), source
    assert "int32_t" not in source.split("void ", 1)[1]

    small, small_args = add_one(64, 64)
    Bs = small_args[1]
    bx, tx = small[Bs].split(small[Bs].fuse(*Bs.op.axis), factor=256)
    small[Bs].bind(bx, "blockIdx.x")
    small[Bs].bind(tx, "threadIdx.x")
    assert "const int32_t" in cuda.generate_source(schedule.lower(small, small_args))


def test_int64_indices_compute_the_same_matmul():
    wl = te.create_workload("matmul", M=13, N=17, K=11)
    C = wl.outputs[0]
    s = schedule.create_schedule(C)
    s[C].split(C.op.axis[0], factor=4)   # a tail guard too
    func = schedule.lower(s, wl.args)
    helpers, body = CSourcePrinter(CPUDialect(), wide_index=True).function(func)
    source = "\n".join(part for part in (cpu.PREAMBLE, helpers, body) if part) + "\n"
    assert loop_types(source) == {"int64_t"}
    module = CPUModule(func, source, cpu.compile_source(source))
    a, b = wl.random_inputs(0)
    c = np.zeros(C.shape, np.float32)
    module(a, b, c)
    np.testing.assert_allclose(c, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-5)
