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
#include <time.h>
typedef float vf __attribute__((vector_size({vector_bytes})));

int peak_threads(void) {{ return omp_get_max_threads(); }}

static double thread_cpu_seconds(void) {{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return t.tv_sec + 1e-9 * t.tv_nsec;
}}

/* {chains} independent FMA chains per thread; the sum keeps the compiler from dropping them.
   *cpu: the CPU seconds the threads spent in the loop, together. */
float peak_fma(long iters, float b, float c, double* cpu) {{
    float total = 0.0f;
    double used = 0.0;
    #pragma omp parallel reduction(+:total, used)
    {{
        double start = thread_cpu_seconds();
        vf acc[{chains}];
        for (int i = 0; i < {chains}; i++) acc[i] = (vf){{}} + (float)i;
        for (long it = 0; it < iters; it++) {{
            #pragma GCC unroll {chains}
            for (int i = 0; i < {chains}; i++) acc[i] = acc[i] * b + c;
        }}
        vf sum = (vf){{}};
        for (int i = 0; i < {chains}; i++) sum += acc[i];
        for (int l = 0; l < {lanes}; l++) total += sum[l];
        used += thread_cpu_seconds() - start;
    }}
    *cpu = used;
    return total;
}}
"""


#: Least share of its threads' wall time that the fastest run must have had on a CPU for
#: the reading to be trusted; below it other processes held the cores, and the peak read low.
MIN_CPU_SHARE = 0.9


@dataclass(frozen=True)
class Peak:
    """A measured fp32 peak: ``gflops`` over ``cores`` threads of ``lanes``-wide FMAs.

    ``cpu_share``: the CPU time the fastest run got over its wall time times ``cores``
    (1.0 when every thread ran throughout; None where it was not measured). A loaded
    machine gives the loop less than its cores, and the peak reads low with no other sign.
    """

    gflops: float
    cores: int
    lanes: int
    chains: int
    cpu_share: float | None = None

    def describe(self) -> str:
        return (f"{self.gflops:.0f} GFLOP/s fp32 (FMA throughput measured on {self.cores} "
                f"core{'s' if self.cores != 1 else ''}, {self.lanes} lanes)")

    @property
    def busy(self) -> bool:
        """Whether other work held the cores while the peak was read (it then reads low)."""
        return self.cpu_share is not None and self.cpu_share < MIN_CPU_SHARE

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
                     iterations: int = ITERATIONS, cpu_seconds: Callable[[float], float] | None = None) -> Peak:
    """The fp32 peak of the CPU ``facts`` describe (a ``CpuFacts``), measured here with the
    target's own compiler flags. ``timer`` is injectable so the arithmetic can be tested, and
    so is ``cpu_seconds`` (the loop's own reading of its threads' CPU time in -> the one to
    use). The threads read their own CPU clocks: the process's clock counts another running
    thread's time only at its next scheduler tick, so it missed half of a 20 ms run."""
    from backends.cpu import cflags, compile_source

    source, lanes, chains = peak_source(facts.vector_bytes, facts.vector_registers)
    lib = ctypes.CDLL(str(compile_source(source, cflags(facts.isa_flags))))
    lib.peak_fma.restype = ctypes.c_float
    lib.peak_fma.argtypes = (ctypes.c_long, ctypes.c_float, ctypes.c_float, ctypes.POINTER(ctypes.c_double))
    threads = lib.peak_threads()
    used = ctypes.c_double()
    lib.peak_fma(2 * iterations, 0.999999, 1e-6, used)  # warm-up: threads started, clocks up (tens of ms)
    fastest = share = None
    for _ in range(runs):
        start = timer()
        lib.peak_fma(iterations, 0.999999, 1e-6, used)
        elapsed = timer() - start
        cpu = used.value if cpu_seconds is None else cpu_seconds(used.value)
        if fastest is None or elapsed < fastest:
            fastest, share = elapsed, cpu / max(elapsed * threads, 1e-12)
    flops = 2.0 * threads * iterations * chains * lanes
    return Peak(flops / max(fastest, 1e-12) / 1e9, threads, lanes, chains, min(1.0, share))
