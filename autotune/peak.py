"""The CPU's fp32 peak, measured: what "% of peak" figures are relative to.

    peak = measure_cpu_peak(target.facts)   # a Peak: GFLOP/s, cores, lanes, chains
    print(peak.describe())                  # "213 GFLOP/s fp32 (FMA throughput measured ...)"

Every usable core runs independent chains of vector FMAs, as wide as the target's vectors,
enough of them to cover the FMA latency on every pipe, for a few short runs; the fastest
run is the peak. It is measured rather than computed from the ISA facts because the facts
do not say it: the clock under load is not the one /proc/cpuinfo shows (a virtual machine
often shows a nominal one), and the FMA width differs within one ISA (AVX-512 runs on
256-bit units on Zen 4, on 512-bit units on Zen 5 and most Intel server cores), which halves
or doubles the peak. No generated kernel can beat this loop, so a kernel's share of it is
an honest "% of peak".
"""
from __future__ import annotations

import ctypes
import time
from dataclasses import dataclass
from typing import Callable

#: Runs of the FMA loop; the fastest is the peak.
RUNS = 5
#: Iterations of one run: about 20 ms on one modern core at 16 lanes and 12 chains.
ITERATIONS = 1 << 20

_SOURCE = """#include <omp.h>
typedef float vf __attribute__((vector_size({vector_bytes})));

int peak_threads(void) {{ return omp_get_max_threads(); }}

/* {chains} independent FMA chains per thread; the sum keeps the compiler from dropping them. */
float peak_fma(long iters, float b, float c) {{
    float total = 0.0f;
    #pragma omp parallel reduction(+:total)
    {{
        vf acc[{chains}];
        for (int i = 0; i < {chains}; i++) acc[i] = (vf){{}} + (float)i;
        for (long it = 0; it < iters; it++) {{
            #pragma GCC unroll {chains}
            for (int i = 0; i < {chains}; i++) acc[i] = acc[i] * b + c;
        }}
        vf sum = (vf){{}};
        for (int i = 0; i < {chains}; i++) sum += acc[i];
        for (int l = 0; l < {lanes}; l++) total += sum[l];
    }}
    return total;
}}
"""


@dataclass(frozen=True)
class Peak:
    """A measured fp32 peak: ``gflops`` over ``cores`` threads of ``lanes``-wide FMAs."""

    gflops: float
    cores: int
    lanes: int
    chains: int

    def describe(self) -> str:
        return (f"{self.gflops:.0f} GFLOP/s fp32 (FMA throughput measured on {self.cores} "
                f"core{'s' if self.cores != 1 else ''}, {self.lanes} lanes)")

    def share(self, gflops: float) -> float:
        """``gflops`` as a fraction of this peak."""
        return gflops / self.gflops


def peak_source(vector_bytes: int, registers: int) -> tuple[str, int, int]:
    """(C source of the FMA loop, lanes, chains) for vectors of ``vector_bytes`` bytes and a
    register file of ``registers`` vectors: chains fill it but for a few registers of
    constants, at least the 8 that two pipes of 4-cycle FMAs keep in flight."""
    lanes = max(1, vector_bytes // 4)
    chains = max(8, min(24, registers - 4))
    return _SOURCE.format(vector_bytes=lanes * 4, chains=chains, lanes=lanes), lanes, chains


def measure_cpu_peak(facts, timer: Callable[[], float] = time.perf_counter, runs: int = RUNS,
                     iterations: int = ITERATIONS) -> Peak:
    """The fp32 peak of the CPU ``facts`` describe (a ``CpuFacts``), measured here with the
    target's own compiler flags. ``timer`` is injectable so the arithmetic can be tested."""
    from backends.cpu import cflags, compile_source

    source, lanes, chains = peak_source(facts.vector_bytes, facts.vector_registers)
    lib = ctypes.CDLL(str(compile_source(source, cflags(facts.isa_flags))))
    lib.peak_fma.restype = ctypes.c_float
    lib.peak_fma.argtypes = (ctypes.c_long, ctypes.c_float, ctypes.c_float)
    threads = lib.peak_threads()
    lib.peak_fma(2 * iterations, 0.999999, 1e-6)  # warm-up: threads started, clocks up (tens of ms)
    fastest = None
    for _ in range(runs):
        start = timer()
        lib.peak_fma(iterations, 0.999999, 1e-6)
        elapsed = timer() - start
        fastest = elapsed if fastest is None else min(fastest, elapsed)
    flops = 2.0 * threads * iterations * chains * lanes
    return Peak(flops / max(fastest, 1e-12) / 1e9, threads, lanes, chains)
