"""The CPU backend: argument checks, generated C, the compile cache, heap buffers, integer semantics."""
from __future__ import annotations

import os
import re
from pathlib import Path

import numpy as np
import pytest

import backends
import schedule
import te
from backends import cpu
from schedule import ir
from sched_helpers import check, register_tile_batch_matmul, register_tile_matmul, run, tensor, workload


@pytest.fixture(scope="module")
def matmul_module():
    """One built float32 matmul (13x11 @ 11x17), shared by the argument-check tests."""
    wl = te.create_workload("matmul", M=13, N=17, K=11)
    s = schedule.create_schedule(wl.outputs[0])
    return backends.build(s, wl.args), wl


def arrays(wl, seed=0):
    return [*wl.random_inputs(seed), np.zeros(wl.outputs[0].shape, np.float32)]


# ---------------------------------------------------------------- argument checks


def test_module_runs_and_exposes_params(matmul_module):
    module, wl = matmul_module
    a, b, c = arrays(wl)
    module(a, b, c)
    np.testing.assert_allclose(c, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-5)
    assert [p.name for p in module.params] == ["A", "B", "C"]
    assert module.path.suffix == ".so" and module.path.name in repr(module)


def test_call_unchecked_with_pointers(matmul_module):
    module, wl = matmul_module
    a, b, c = arrays(wl)
    module.call_unchecked([x.ctypes.data for x in (a, b, c)])
    np.testing.assert_allclose(c, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-5)


def test_wrong_argument_count(matmul_module):
    module, wl = matmul_module
    a, b, c = arrays(wl)
    with pytest.raises(ValueError, match=r"kernel 'kernel' takes 3 arrays \(A, B, C\), got 2"):
        module(a, b)
    with pytest.raises(ValueError, match=r"takes 3 arrays"):
        module(a, b, c, c.copy())


def test_wrong_shape(matmul_module):
    module, wl = matmul_module
    a, b, c = arrays(wl)
    with pytest.raises(ValueError, match=r"argument 1 \(B\): expected shape \(11, 17\), got \(17, 11\)"):
        module(a, np.ascontiguousarray(b.T), c)


def test_wrong_dtype(matmul_module):
    module, wl = matmul_module
    a, b, c = arrays(wl)
    with pytest.raises(ValueError, match=r"argument 2 \(C\): expected dtype float32, got float64"):
        module(a, b, c.astype(np.float64))


def test_non_contiguous(matmul_module):
    module, wl = matmul_module
    a, b, c = arrays(wl)
    strided = np.zeros((13, 22), np.float32)[:, :11]
    strided[...] = a
    with pytest.raises(ValueError, match=r"argument 0 \(A\): array must be C-contiguous"):
        module(strided, b, c)
    with pytest.raises(ValueError, match=r"argument 2 \(C\): array must be C-contiguous"):
        module(a, b, np.asfortranarray(c))


def test_not_an_array(matmul_module):
    module, wl = matmul_module
    a, b, c = arrays(wl)
    with pytest.raises(ValueError, match=r"argument 0 \(A\): expected a numpy.ndarray, got list"):
        module(a.tolist(), b, c)


def test_same_array_twice():
    wl = te.create_workload("matmul", M=7, N=7, K=7)
    module = backends.build(schedule.create_schedule(wl.outputs[0]), wl.args)
    a, b, c = arrays(wl)
    with pytest.raises(ValueError, match=r"argument 2 \(C\): same memory as argument 0 \(A\)"):
        module(a, b, a)
    with pytest.raises(ValueError, match=r"argument 1 \(B\): same memory as argument 0 \(A\)"):
        module(a, a, c)


def test_overlapping_views():
    """Partly overlapping arrays alias through `restrict` pointers just as much."""
    wl = te.create_workload("elementwise", op="relu", shape=[8])
    module = backends.build(schedule.create_schedule(wl.outputs[0]), wl.args)
    storage = np.arange(12, dtype=np.float32)
    with pytest.raises(ValueError, match=r"argument 1 \(T_relu\): same memory as argument 0 \(A\)"):
        module(storage[:8], storage[4:])
    halves = np.zeros(16, np.float32)
    module(halves[:8], halves[8:])            # neighbours that touch but do not overlap are fine


def test_read_only_output(matmul_module):
    module, wl = matmul_module
    a, b, c = arrays(wl)
    c.flags.writeable = False
    with pytest.raises(ValueError, match=r"argument 2 \(C\): the kernel writes this array, but it is read-only"):
        module(a, b, c)
    a.flags.writeable = False                # read-only inputs are fine
    c = np.zeros_like(c)
    module(a, b, c)


# ---------------------------------------------------------------- generated source


def test_source_pragmas_for_parallel_vectorize_unroll():
    wl = te.create_workload("matmul", M=13, N=17, K=11)
    C = wl.outputs[0]
    s = schedule.create_schedule(C)
    io, jo, ii, ji = s[C].tile(*C.op.axis, 4, 8)
    ko, ki = s[C].split(C.op.reduce_axis[0], factor=2)
    s[C].reorder(io, jo, ko, ii, ki, ji)
    s[C].parallel(io)
    s[C].unroll(ki)
    s[C].vectorize(ji)
    module = check(s, wl)
    src = module.source
    assert "#pragma omp parallel for" in src
    assert "#pragma omp simd" in src
    assert "#pragma GCC unroll 2" in src
    lines = src.splitlines()
    for pragma, loop in (("#pragma omp parallel for", "i_outer"), ("#pragma omp simd", "j_inner")):
        n = next(n for n, line in enumerate(lines) if pragma in line)
        assert lines[n + 1].strip().startswith(f"for (int64_t {loop} = 0;")


@pytest.mark.parametrize("m,rows,chunk", [(64, 16, 1), (64, 12, 1), (1000, 1, 15), (4096, 8, 8)])
def test_a_parallel_loop_is_handed_out_in_chunks_of_consecutive_iterations(m, rows, chunk):
    # About PARALLEL_CHUNKS chunks, at least one iteration each: a thread that starts late
    # (its CPU halted while idle) leaves the other a chunk to wait for, not half the loop,
    # and blocks of unequal work (12-row blocks of 64 rows: the last has 4) even out.
    wl = te.create_workload("matmul", M=m, N=32, K=8)
    C = wl.outputs[0]
    s = schedule.create_schedule(C)
    io, ii = s[C].split(C.op.axis[0], factor=rows)
    s[C].parallel(io)
    module = check(s, wl)
    pragmas = [line.strip() for line in module.source.splitlines() if "omp parallel for" in line]
    assert pragmas == [f"#pragma omp parallel for schedule(dynamic, {chunk})"]
    assert chunk == max(1, -(-m // rows) // cpu.PARALLEL_CHUNKS)


@pytest.mark.parametrize("guarded", [False, True])
def test_a_parallel_loop_of_unknown_extent_keeps_fixed_shares(guarded):
    # Without an extent there is no chunk size to choose: contiguous shares, dealt out one
    # iteration at a time where a guard inside depends on the loop (unequal iterations).
    i, n = te.var("i"), te.var("n")
    body = ir.IfThenElse(i < 5, ir.Seq(())) if guarded else ir.Seq(())
    loop = ir.For(i, n, ir.PARALLEL, body)
    assert cpu.CPUDialect().loop_pragmas(loop) == [
        f"#pragma omp parallel for schedule({'static, 1' if guarded else 'static'})"]


@pytest.fixture
def tiles_as_arrays(monkeypatch):
    """Print every register tile as an array, as a tile not shaped for vector variables is
    (a tail of rows, a tile read at a stride; ``backends.vector_tile``): the rules below are
    those of the array."""
    monkeypatch.setattr(cpu.CPUDialect, "register_tile", lambda self, alloc: None)


def _vector_loops(src: str) -> list[tuple[str, str, str]]:
    """(pragma, loop header, loop body) of every loop under ``omp simd`` or ``GCC ivdep``."""
    lines = [line.strip() for line in src.splitlines()]
    out = []
    for n, line in enumerate(lines[:-1]):
        if line in ("#pragma GCC ivdep", "#pragma omp simd"):
            head = next(m for m in range(n + 1, len(lines)) if not lines[m].startswith("#pragma"))
            depth, body = 0, []
            for inner in lines[head:]:
                depth += inner.count("{") - inner.count("}")
                body.append(inner)
                if depth == 0:
                    break
            out.append((line, lines[head], "\n".join(body[1:])))
    return out


def test_register_tile_vector_loops_are_ivdep_loops_and_tails_keep_omp_simd(tiles_as_arrays):
    """A register tile promoted to a local accumulator (``C_local_acc``) is kept in
    registers by gcc only in plain loops: its vector loops get ``GCC ivdep``, not ``omp
    simd``. A tail copy of variable trip counts (tails on three axes: 5x7x20 in 2x3x8
    tiles) and every other vector loop (zeroing ``C_local``, the copy-out to ``C``) keep
    ``omp simd``."""
    s, wl = register_tile_batch_matmul((2, 3, 8), batch=5, m=7, n=20)
    loops = _vector_loops(check(s, wl).source)
    tile = [(pragma, head) for pragma, head, body in loops if "C_local_acc" in body]
    full = [pragma for pragma, head in tile if "at_min" not in head]
    tail = [pragma for pragma, head in tile if "at_min" in head]
    others = [pragma for pragma, head, body in loops if "C_local_acc" not in body]
    assert full == ["#pragma GCC ivdep"] * 3, loops  # copy-in, the update, copy-out
    assert tail == ["#pragma omp simd"] * 3, loops
    assert others and set(others) == {"#pragma omp simd"}, loops


def test_a_tail_tile_of_constant_size_gets_the_full_tiles_ivdep_loops(tiles_as_arrays):
    """20 columns in tiles of 8: the last tile is a copy of 4 columns, constant like the
    full one, and its vector loops are ``GCC ivdep`` loops as well."""
    s, wl = register_tile_matmul(4, 8, 16, 20)
    loops = _vector_loops(check(s, wl).source)
    tile = [(pragma, head) for pragma, head, body in loops if "C_local_acc" in body]
    assert [pragma for pragma, _ in tile] == ["#pragma GCC ivdep"] * 6, loops
    assert sorted(head.split("<")[1].split(";")[0].strip() for _, head in tile) == ["4"] * 3 + ["8"] * 3, loops


def _register_tile_source(columns: int, target: str, across_rows: bool = False) -> str:
    """The C source, for ``target``, of a matmul whose 8-row register tile is ``columns``
    floats wide: rows unrolled by the schedule, columns vectorized (``across_rows``: the
    other way round, so the vector loop reads A at a stride)."""
    s, wl = register_tile_matmul(8, columns, m=16, n=2 * columns, across_rows=across_rows)
    return backends.backend_for(target).generate_source(schedule.lower(s, wl.args))


def _tile_pragmas(src: str) -> tuple[list[list[str]], list[list[str]]]:
    """(pragmas above each vector loop of the register tile, pragmas above each loop
    directly around one)."""
    lines = [line.strip() for line in src.splitlines()]

    def pragmas_above(n: int) -> list[str]:
        out = []
        while n > 0 and lines[n - 1].startswith(("#pragma", "//")):
            n -= 1
            out.insert(0, lines[n])
        return out

    vector, around = [], []
    for n, line in enumerate(lines):
        if line.startswith("for (int64_t j") and "C_local_acc" in lines[n + 1]:
            vector.append(pragmas_above(n))
            outer = next(m for m in range(n - 1, -1, -1) if lines[m].startswith("for ("))
            around.append(pragmas_above(outer))
    return vector, around


def test_a_register_tile_one_vector_wide_keeps_its_vector_loop_and_leaves_its_rows_to_gcc(tiles_as_arrays):
    """gcc unrolls a loop exactly one vector long before it vectorizes, then vectorizes the
    tile's rows around it with permutes (an 8x8 AVX2 tile ran 100x slower). Such a loop,
    where it updates the tile, gets ``GCC unroll 1`` and its rows a comment in place of the
    unroll pragma; the
    tile's copies in and out keep theirs (under ``unroll 1`` they became ``memcpy``
    calls). Half a vector (the same tile for AVX-512) and two vectors (16 columns on AVX2)
    keep the rows' pragma everywhere, and so does a vector loop that reads at a stride."""
    ivdep, unroll_1, rows = "#pragma GCC ivdep", "#pragma GCC unroll 1", "#pragma GCC unroll 8"
    vector, around = _tile_pragmas(_register_tile_source(8, "cpu:avx2"))  # copy in, update, copy out
    assert vector == [[ivdep], [ivdep, unroll_1], [ivdep]], vector
    assert around == [[rows], [cpu.ROWS_LEFT_TO_GCC], [rows]], around
    for columns, target in ((8, "cpu:avx512"), (16, "cpu:avx2")):
        vector, around = _tile_pragmas(_register_tile_source(columns, target))
        assert vector == [[ivdep]] * 3, (columns, target, vector)
        assert around == [[rows]] * 3, (columns, target, around)
    # Rows vectorized: the loop reads A a row apart, and gcc's own choice (the contiguous
    # loop around it) stays.
    assert "#pragma GCC unroll 1" not in _register_tile_source(8, "cpu:avx2", across_rows=True)


@pytest.mark.skipif(os.uname().machine != "x86_64", reason="x86 vector registers")
def test_a_one_vector_register_tile_compiles_to_full_width_fmas(tmp_path, monkeypatch, tiles_as_arrays):
    """The 8x8 AVX2 tile's update compiles to FMAs on whole ymm registers; without the rule
    gcc vectorizes its rows with xmm halves (compiled to assembly only: any x86 machine)."""
    import subprocess

    def fma_registers(source: str) -> set[str]:
        src, asm = tmp_path / "k.c", tmp_path / "k.s"
        src.write_text(source)
        flags = [f for f in backends.backend_for("cpu:avx2").flags if f not in ("-shared", "-fPIC")]
        subprocess.run([cpu.CC, *flags, "-S", str(src), "-o", str(asm)], check=True)
        return {m for line in asm.read_text().splitlines() if "vfmadd" in line for m in re.findall(r"%([xyz]mm)", line)}

    assert fma_registers(_register_tile_source(8, "cpu:avx2")) == {"ymm"}
    monkeypatch.setattr(cpu.CPUDialect, "_one_vector_of_tile", lambda self, loop: False)
    assert "xmm" in fma_registers(_register_tile_source(8, "cpu:avx2"))


def test_source_without_annotations_has_no_pragmas_but_the_reduction_fold():
    wl = te.create_workload("matmul", M=5, N=6, K=7)
    src = backends.build(schedule.create_schedule(wl.outputs[0]), wl.args).source
    pragmas = [line.strip() for line in src.splitlines() if "#pragma" in line]
    assert pragmas == ["#pragma omp simd reduction(+:C_acc)"]  # the k loop folds into a scalar
    assert "#include <math.h>" not in src  # no math function: gcc need not parse the header
    assert "#include <stdint.h>" in src
    assert "void kernel(float* __restrict__ A, float* __restrict__ B, float* __restrict__ C) {" in src


def test_kernel_name_and_clashing_buffer_name():
    """A buffer named like the kernel (conv2d's "kernel" input) must not take the function's name."""
    wl = te.create_workload("conv2d", N=1, C=2, H=5, W=5, K=3, R=3, S=3, padding=1)
    module = check(schedule.create_schedule(wl.outputs[0]), wl)
    assert "void kernel(" in module.source and "kernel_1" in module.source
    other = backends.build(schedule.create_schedule(wl.outputs[0]), wl.args, name="conv_fn")
    assert "void conv_fn(" in other.source


@pytest.mark.parametrize("name", ["free", "expf", "int32_t", "INFINITY", "NAN", "aligned_alloc", "at_max_float32"])
def test_tensor_names_that_clash_with_c(name):
    """Tensors named like C types, macros or called functions get other C names."""
    X = te.placeholder((150, 150), name=name)
    T = te.compute((150, 150), lambda i, j: te.exp(X[i, j]) * 2.0, name=name)  # > 64 KB: heap, free()
    Y = te.compute((150, 150), lambda i, j: te.max(T[i, j], X[i, j]), name="Y")
    check(schedule.create_schedule(Y), workload([X, Y]))


def test_build_error_carries_gcc_diagnostics(tmp_path, monkeypatch):
    monkeypatch.setenv("AUTOTUNE_CACHE_DIR", str(tmp_path))
    with pytest.raises(backends.BuildError, match=r"gcc failed:[\s\S]*error"):
        cpu.compile_source("void kernel( { syntax error")


# ---------------------------------------------------------------- compile cache


def test_compile_cache_builds_once(tmp_path, monkeypatch):
    monkeypatch.setenv("AUTOTUNE_CACHE_DIR", str(tmp_path))
    compiles = []
    real_run = cpu.run_group

    def counting_run(cmd, *args, **kwargs):
        if "-o" in cmd:
            compiles.append(cmd)
        return real_run(cmd, *args, **kwargs)

    monkeypatch.setattr(cpu, "run_group", counting_run)

    def build():
        wl = te.create_workload("matmul", M=9, N=10, K=3)
        C = wl.outputs[0]
        s = schedule.create_schedule(C)
        s[C].split(C.op.axis[1], factor=4)
        return backends.build(s, wl.args), wl

    first, wl = build()
    assert first.path.parent == tmp_path / "kernels"
    mtime = os.stat(first.path).st_mtime_ns
    second, _ = build()
    assert second.path == first.path
    assert os.stat(second.path).st_mtime_ns == mtime
    assert len(compiles) == 1
    assert [p.name for p in (tmp_path / "kernels").iterdir()] == [first.path.name]  # no leftovers
    outputs, expected = run(second, wl)
    np.testing.assert_allclose(outputs[0], expected[0], rtol=1e-4, atol=1e-5)

    other_wl = te.create_workload("matmul", M=9, N=10, K=4)
    other = backends.build(schedule.create_schedule(other_wl.outputs[0]), other_wl.args)
    assert other.path != first.path and len(compiles) == 2


def test_compile_cache_key_includes_flags(tmp_path, monkeypatch):
    monkeypatch.setenv("AUTOTUNE_CACHE_DIR", str(tmp_path))
    src = "void kernel(float* x) { x[0] = 1.0f; }\n"
    assert cpu.compile_source(src) == cpu.compile_source(src)
    assert cpu.compile_source(src, flags=cpu.CFLAGS + ("-O1",)) != cpu.compile_source(src)


def test_a_compile_works_in_a_directory_named_after_its_process(tmp_path, monkeypatch):
    # gcc's own temporaries go there too, so a compile killed with SIGKILL leaves one
    # directory a later process can recognize as orphaned
    monkeypatch.setenv("AUTOTUNE_CACHE_DIR", str(tmp_path / "cache"))
    seen = tmp_path / "tmpdir"
    wrapper = tmp_path / "cc"
    wrapper.write_text(f'#!/bin/sh\necho "$TMPDIR" > {seen}\nexec {cpu.CC} "$@"\n')
    wrapper.chmod(0o755)
    monkeypatch.setattr(cpu, "CC", str(wrapper))
    cpu.compile_source("void kernel(float* x) { x[0] = 2.0f; }\n")
    scratch = Path(seen.read_text().strip())
    assert scratch.name.startswith(f"autotune-cc-{os.getpid()}-") and not scratch.exists()


def test_compile_dirs_of_processes_that_are_gone_are_swept(tmp_path, monkeypatch):
    import subprocess
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    gone = subprocess.Popen(["true"])
    gone.wait()
    stale = tmp_path / f"autotune-cc-{gone.pid}-x1"
    live = tmp_path / f"autotune-cc-{os.getppid()}-x2"
    mine = tmp_path / f"autotune-cc-{os.getpid()}-x3"
    unnamed = tmp_path / "autotune-cc-x4"  # an older version's: no process to ask
    for d in (stale, live, mine, unnamed):
        d.mkdir()
    (stale / "ccAbCd.s").write_text("left by a killed gcc")
    assert cpu.sweep_compile_dirs.__wrapped__() == 1
    assert not stale.exists() and live.exists() and mine.exists() and unnamed.exists()


SIMD_LOOP = """
void kernel(float* __restrict__ a, const float* __restrict__ b, const float* __restrict__ c) {
  for (long i = 0; i < 1024; ++i) {
    #pragma omp simd
    for (long j = 0; j < 64; ++j) a[i * 64 + j] += b[i] * c[j];
  }
}
"""


def _fma_registers(tmp_path, flags) -> set[str]:
    """The vector registers of the FMAs gcc emits for SIMD_LOOP under ``flags`` (compiled to
    assembly only, so any x86 machine can check any x86 target)."""
    import re
    import subprocess

    src, asm = tmp_path / "k.c", tmp_path / "k.s"
    src.write_text(SIMD_LOOP)
    flags = [f for f in flags if f not in ("-shared", "-fPIC")]
    subprocess.run([cpu.CC, *flags, "-S", str(src), "-o", str(asm)], check=True)
    return {m for line in asm.read_text().splitlines() if "vfmadd" in line for m in re.findall(r"%([xyz]mm)", line)}


@pytest.mark.skipif(os.uname().machine != "x86_64", reason="x86 vector registers")
def test_kernels_vectorize_at_the_width_the_target_states(tmp_path):
    from schedule.targets.cpu import detect_cpu_facts

    # A host gcc knows as a Sapphire Rapids: its tuning prefers 256-bit vectors, while the
    # space sizes register tiles for the 512 bits the CPU has.
    facts = detect_cpu_facts("flags\t: avx512f avx512bw avx512dq avx512vl avx2 fma\n", caches={}, cores=2)
    as_host = ("-march=sapphirerapids", *facts.isa_flags[1:])
    assert _fma_registers(tmp_path, cpu.cflags(("-march=sapphirerapids",))) == {"ymm"}  # why the flag exists
    assert _fma_registers(tmp_path, cpu.cflags(as_host)) == {"zmm"}
    assert _fma_registers(tmp_path, backends.backend_for("cpu:avx512").flags) == {"zmm"}
    assert _fma_registers(tmp_path, backends.backend_for("cpu:avx2").flags) == {"ymm"}


# ---------------------------------------------------------------- buffers


def chain_256():
    wl = te.create_workload("elementwise_chain", shape=[256, 256])
    return wl, schedule.create_schedule(wl.outputs[0]), tensor(wl, "T_mul"), tensor(wl, "T_add1"), wl.outputs[0]


def test_large_root_intermediate_on_heap():
    wl, s, T1, T2, out = chain_256()          # two 256 KB intermediates at the root
    s[out].parallel(out.op.axis[0])
    module = check(s, wl)
    assert module.source.count("aligned_alloc(64, 262144)") == 2
    # each kept in a slot of the shared object between calls, freed when it is unloaded
    assert module.source.count("__atomic_exchange_n(&at_kept_") == 4
    assert module.source.count("__attribute__((destructor))") == 2


def test_heap_buffers_kept_between_calls_serve_repeated_and_concurrent_calls():
    """A call reuses the buffer the last one put back (stale contents and all), and calls
    running at once each get a buffer of their own."""
    import threading

    wl, s, T1, T2, out = chain_256()
    s[out].parallel(out.op.axis[0])
    module = check(s, wl)
    inputs = [wl.random_inputs(seed) for seed in range(6)]
    expected = [wl.reference(*x)[0] for x in inputs]
    for x, want in zip(inputs, expected):  # one after another: each call on the kept buffers
        got = np.full(want.shape, np.nan, want.dtype)
        module(*x, got)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    results: dict = {}

    def call(n: int) -> None:
        for _ in range(20):
            got = np.full(expected[n].shape, np.nan, expected[n].dtype)
            module(*inputs[n], got)
            results.setdefault(n, []).append(got)

    threads = [threading.Thread(target=call, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for n, outs in results.items():
        for got in outs:
            np.testing.assert_allclose(got, expected[n], rtol=1e-5, atol=1e-6)


def test_large_intermediate_computed_at_a_loop_on_heap():
    wl, s, T1, T2, out = chain_256()
    s[T1].compute_inline()
    io, ii = s[out].split(out.op.axis[0], factor=96)   # 96 x 256 floats = 96 KB per tile, 3 tiles
    s[out].parallel(io)
    s[T2].compute_at(s[out], io)
    module = check(s, wl)
    assert "aligned_alloc(64, 98304)" in module.source
    assert "free(__atomic_exchange_n(&at_kept_" in module.source


def test_small_intermediate_on_stack():
    wl, s, T1, T2, out = chain_256()
    s[T1].compute_inline()
    io, ii = s[out].split(out.op.axis[0], factor=8)     # 8 KB tiles
    s[T2].compute_at(s[out], io)
    module = check(s, wl)
    # on the stack, reached through a restrict pointer (a register tile keeps its own array)
    assert "float T_add1_storage[2048] __attribute__((aligned(64)));" in module.source
    assert "float* __restrict__ T_add1 = T_add1_storage;" in module.source
    assert "aligned_alloc" not in module.source


def test_a_register_tile_stays_an_array_beside_stack_buffers_reached_through_pointers(tiles_as_arrays):
    """gcc 12 held a register tile in memory when a local copy or a block of panels was a
    plain array beside it; every stack buffer but the tile is declared as storage and used
    through a restrict pointer."""
    wl = te.create_workload("matmul", M=16, N=32, K=32)
    A, B, C = wl.args
    s = schedule.create_schedule(C)
    CL = s.cache_write(C, "local")
    io, jo, ii, ji = s[C].tile(*C.op.axis, 4, 16)
    s[CL].compute_at(s[C], jo)
    i, j = s[CL].op.axis
    (k,) = s[CL].op.reduce_axis
    ko, ki = s[CL].split(k, factor=8)
    s[CL].reorder(ko, ki, i, j)
    s[CL].vectorize(j)
    BL = s.cache_read(B, "local", [CL])
    s[BL].compute_at(s[CL], ko)
    source = check(s, wl).source
    assert re.search(r"float C_local_acc\[64\] __attribute__", source), source
    assert "float* __restrict__ B_local = B_local_storage;" in source, source
    assert "C_local_acc_storage" not in source  # the promoted tile: an array of its own


# ---------------------------------------------------------------- integer semantics


def test_floor_division_and_modulo_of_negative_operands():
    n = 23
    X = te.placeholder((n,), "int32", name="X")
    Q = te.compute((n,), lambda i: (i - 5) // 3 + X[i] * 0, name="Q")
    R = te.compute((n,), lambda i: (i - 5) % 3, name="R")
    Qn = te.compute((n,), lambda i: (i - 5) // -3, name="Qn")
    Rn = te.compute((n,), lambda i: (i - 5) % -3, name="Rn")
    d = lambda i: te.if_then_else(te.equal(X[i], 0), te.const(7), X[i])  # noqa: E731  (never 0)
    Qx = te.compute((n,), lambda i: (i - 11) // d(i), name="Qx")
    Rx = te.compute((n,), lambda i: (i - 11) % d(i), name="Rx")
    outs = [Q, R, Qn, Rn, Qx, Rx]
    wl = workload([X, *outs])
    module = check(schedule.create_schedule(outs), wl)
    # The index expressions divide in the index width (int64 on the CPU).
    assert "at_floordiv_int64" in module.source and "at_floormod_int64" in module.source
    x = np.arange(-11, 12, dtype=np.int32)       # every sign combination against a tensor divisor
    results = [np.zeros(n, np.int32) for _ in outs]
    module(x, *results)
    i = np.arange(n)
    dx = np.where(x == 0, 7, x)
    for got, want in zip(results, [(i - 5) // 3, (i - 5) % 3, (i - 5) // -3, (i - 5) % -3,
                                   (i - 11) // dx, (i - 11) % dx]):
        np.testing.assert_array_equal(got, want)
    for got, want in zip(results, te.evaluate(outs, {X: x})):
        np.testing.assert_array_equal(got, want)


def test_non_negative_division_uses_plain_c_operators():
    X = te.placeholder((12,), "int32", name="X")
    Y = te.compute((12,), lambda i: X[i // 3 * 3 + i % 3] + i // 4, name="Y")
    module = check(schedule.create_schedule(Y), workload([X, Y]))
    assert "at_floordiv" not in module.source


@pytest.mark.parametrize("dtype", ["int8", "uint8", "int16"])
def test_narrow_integers_wrap(dtype):
    """Narrow integer arithmetic wraps in its own type, as in the evaluator."""
    X = te.placeholder((64,), dtype, name="X")
    Y = te.compute((64,), lambda i: X[i] * X[i] * 7 + 100, name="Y")
    wl = workload([X, Y])
    module = check(schedule.create_schedule(Y), wl)
    info = np.iinfo(dtype)
    x = np.linspace(info.min, info.max, 64).astype(dtype)
    y = np.zeros(64, dtype)
    module(x, y)
    np.testing.assert_array_equal(y, te.evaluate(Y, {X: x}))


# ---------------------------------------------------------------- dtypes and math in C


@pytest.mark.parametrize("dtype", ["int8", "uint8", "int16", "int32", "int64", "float16", "float32", "float64"])
def test_max_min_reductions_start_from_the_dtype_extremes(dtype):
    X = te.placeholder((5, 7), dtype, name="X")
    k1, k2 = te.reduce_axis((0, 7), "k"), te.reduce_axis((0, 7), "k")
    Y = te.compute((5,), lambda i: te.max(X[i, k1], axis=k1), name="Y")
    Z = te.compute((5,), lambda i: te.min(X[i, k2], axis=k2), name="Z")
    wl = workload([X, Y, Z])
    module = check(schedule.create_schedule([Y, Z]), wl)

    def reduce(x):
        y, z = np.zeros(5, dtype), np.zeros(5, dtype)      # a kernel that starts from 0 keeps a 0
        module(x, y, z)
        return y, z

    if dtype.startswith("int") or dtype == "uint8":
        info = np.iinfo(dtype)
        x = np.full((5, 7), info.min, dtype)
        x[:, 3] = info.max
        y, z = reduce(x)
        assert (y == info.max).all() and (z == info.min).all()
        y, z = reduce(np.full((5, 7), info.min, dtype))     # max of only the lowest value
        assert (y == info.min).all() and (z == info.min).all()
        y, z = reduce(np.full((5, 7), info.max, dtype))     # min of only the highest value
        assert (y == info.max).all() and (z == info.max).all()
    else:
        # all negative: max must not be 0; all positive: min must not be 0
        negative = -np.arange(1, 36, dtype=dtype).reshape(5, 7)
        y, z = reduce(negative)
        np.testing.assert_array_equal(y, negative.max(axis=1))
        np.testing.assert_array_equal(z, negative.min(axis=1))
        y, z = reduce(-negative)
        np.testing.assert_array_equal(y, (-negative).max(axis=1))
        np.testing.assert_array_equal(z, (-negative).min(axis=1))
        # the identities are -inf and +inf, not the largest finite values
        y, z = reduce(np.full((5, 7), -np.inf, dtype))
        assert (y == -np.inf).all() and (z == -np.inf).all()
        y, z = reduce(np.full((5, 7), np.inf, dtype))
        assert (y == np.inf).all() and (z == np.inf).all()


def test_math_h_is_included_where_a_math_function_or_infinity_is_printed(tmp_path):
    """gcc parses ``math.h`` only for sources that need it; a source that calls a function
    nothing declares fails to build instead of calling a scalar stand-in."""
    X = te.placeholder((6, 5), "float32", name="X")
    k = te.reduce_axis((0, 5), name="k")
    kernels = {
        "exp": [te.compute((6, 5), lambda i, j: te.exp(X[i, j]), name="Y")],
        "max": [te.compute((6,), lambda i: te.max(X[i, k], axis=k), name="Y")],  # starts from -INFINITY
        "add": [te.compute((6, 5), lambda i, j: X[i, j] + 1.0, name="Y")],
    }
    for name, outs in kernels.items():
        source = check(schedule.create_schedule(outs), workload([X, *outs])).source
        assert ("#include <math.h>" in source) == (name != "add"), (name, source)
    undeclared = tmp_path / "k.c"
    undeclared.write_text("float f(float x) { return not_declared_anywhere(x); }\n")
    with pytest.raises(backends.BuildError, match="implicit declaration"):
        cpu.compile_source(undeclared.read_text())


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_math_functions(dtype):
    X = te.placeholder((6, 5), dtype, name="X")
    pos = lambda i, j: te.abs(X[i, j]) + 0.5  # noqa: E731
    bodies = {
        "abs": lambda i, j: te.abs(X[i, j]), "sigmoid": lambda i, j: te.sigmoid(X[i, j]),
        "tanh": lambda i, j: te.tanh(X[i, j]), "exp": lambda i, j: te.exp(X[i, j]),
        "erf": lambda i, j: te.erf(X[i, j]), "sin": lambda i, j: te.sin(X[i, j]),
        "cos": lambda i, j: te.cos(X[i, j]), "floor": lambda i, j: te.floor(X[i, j] * 3.0),
        "ceil": lambda i, j: te.ceil(X[i, j] * 3.0), "sqrt": lambda i, j: te.sqrt(pos(i, j)),
        "rsqrt": lambda i, j: te.rsqrt(pos(i, j)), "log": lambda i, j: te.log(pos(i, j)),
        "pow": lambda i, j: pos(i, j) ** X[i, j], "div": lambda i, j: X[i, j] / pos(i, j),
        "max": lambda i, j: te.max(X[i, j], X[i, j] * -0.5), "cast": lambda i, j: te.cast("int8", X[i, j] * 100.0),
    }
    outs = [te.compute((6, 5), body, name=f"Y_{name}") for name, body in bodies.items()]
    check(schedule.create_schedule(outs), workload([X, *outs]))


def test_bool_and_int64_tensors():
    X = te.placeholder((9,), name="X")
    L = te.placeholder((9,), "int64", name="L")
    Bm = te.compute((9,), lambda i: X[i] > 0.25, name="Bm")
    Y = te.compute((9,), lambda i: te.if_then_else(Bm[i], X[i], -X[i]), name="Y")
    Z = te.compute((9,), lambda i: L[i] * 3000000000 + 5, name="Z")    # beyond int32
    module = check(schedule.create_schedule([Bm, Y, Z]), workload([X, L, Bm, Y, Z]))
    assert "bool* __restrict__ Bm" in module.source and "3000000000LL" in module.source
