"""A register tile printed as vector variables (``backends.vector_tile``): which tiles become
variables and of what vector type, which stay arrays, and that the kernels compute the
product (``check`` runs each against NumPy)."""
from __future__ import annotations

import os
import re
import subprocess

import pytest

import backends
import schedule
from backends import cpu, vector_tile
from schedule import ir
from schedule.ir import Allocate, Buffer, BufferLoad, BufferStore, For
from schedule.targets import parse_target
from sched_helpers import check, register_tile_batch_matmul, register_tile_matmul
from te.expr import Binary, Const, Var


def _tiled_matmul(rows: int, columns: int, m: int = 12, n: int = 32, k: int = 24, dtype: str = "float32",
                  across_rows: bool = False):
    """A matmul with a ``rows`` x ``columns`` register tile (``register_tile_matmul``)."""
    return register_tile_matmul(rows, columns, m, n, k, dtype, across_rows)


def _declared_vectors(source: str) -> list[tuple[str, int]]:
    """(vector type, number of variables) of every tile declared as vector variables."""
    return [(m.group(1), len(m.group(2).split(","))) for m in re.finditer(r"(at_f\d+x\d+) (C_local_acc_v0[^;]*);", source)]


def _host_vector(columns: int, dtype: str) -> tuple[str, int]:
    """(vector type, lanes) the host target holds a row of ``columns`` elements in: as wide as
    the row, at most the host's vector (AVX2 and AVX-512 hosts both run these tests)."""
    nbytes = 4 if dtype == "float32" else 8
    lanes = min(columns, parse_target("cpu").facts.vector_bytes // nbytes)
    return f"at_f{8 * nbytes}x{lanes}", lanes


@pytest.mark.parametrize("rows, columns, dtype", [
    (4, 16, "float32"),   # two vectors a row on AVX2, one on AVX-512
    (3, 4, "float32"),    # narrower than the machine's vector: SSE's 128 bits
    (3, 8, "float64"),
])
def test_a_whole_register_tile_is_held_in_vector_variables(rows, columns, dtype):
    s, wl = _tiled_matmul(rows, columns, m=4 * rows, n=2 * columns, dtype=dtype)
    source = check(s, wl).source
    vector, lanes = _host_vector(columns, dtype)
    assert _declared_vectors(source) == [(vector, rows * columns // lanes)], source
    assert "C_local_acc[" not in source, source  # no array left for gcc to keep in memory
    ctype, nbytes = ("float", 4) if dtype == "float32" else ("double", 8)
    assert f"typedef {ctype} {vector} __attribute__((vector_size({lanes * nbytes})));" in source


@pytest.mark.parametrize("columns, target, vector", [
    (16, "cpu:avx512", ("at_f32x16", 4)),
    (8, "cpu:avx512", ("at_f32x8", 4)),    # half of a 512-bit vector: the widest that fits
    (16, "cpu:avx2", ("at_f32x8", 8)),
])
def test_the_vector_type_follows_the_target(columns, target, vector):
    s, wl = _tiled_matmul(4, columns, m=8, n=2 * columns)
    source = backends.backend_for(target).generate_source(schedule.lower(s, wl.args))
    assert _declared_vectors(source) == [vector], source


def test_a_tail_of_rows_is_a_tile_of_vector_variables_of_its_own():
    """14 rows in tiles of 4: whole tiles are vector variables, and so are the last two rows,
    a tile of their own with a constant number of rows."""
    s, wl = _tiled_matmul(4, 16, m=14)
    source = check(s, wl).source
    vector, lanes = _host_vector(16, "float32")
    assert _declared_vectors(source) == [(vector, 4 * 16 // lanes), (vector, 2 * 16 // lanes)], source
    assert "C_local_acc[" not in source, source


def test_a_tail_of_a_variable_number_of_rows_stays_an_array_beside_the_whole_tiles():
    """Tails on three axes keep one tail copy with variable loops: that tile is an array."""
    s, wl = register_tile_batch_matmul((2, 3, 8), batch=5, m=7, n=20)
    source = check(s, wl).source
    assert _declared_vectors(source) == [("at_f32x8", 6)], source
    assert re.search(r"float C_local_acc\[48\] __attribute__", source), source


@pytest.mark.parametrize("rows, columns, across_rows", [
    (4, 2, False),   # a row of two floats: narrower than any vector register
    (8, 8, True),    # the vector loop runs across rows and reads A at a stride
])
def test_tiles_not_shaped_for_vectors_stay_arrays(rows, columns, across_rows):
    s, wl = _tiled_matmul(rows, columns, m=2 * rows, n=4 * columns, across_rows=across_rows)
    source = check(s, wl).source
    assert _declared_vectors(source) == [], source
    assert "C_local_acc[" in source, source


@pytest.mark.skipif(os.uname().machine != "x86_64", reason="x86 assembly")
def test_the_update_of_vector_variables_compiles_to_packed_fmas_only(tmp_path):
    """A 3x16 tile (a shape for which gcc 12 once left the array in memory and multiplied
    element by element): every FMA of the kernel is a packed one on whole AVX2 registers."""
    s, wl = _tiled_matmul(3, 16, m=12, n=32, k=64)
    src, asm = tmp_path / "k.c", tmp_path / "k.s"
    src.write_text(backends.backend_for("cpu:avx2").generate_source(schedule.lower(s, wl.args)))
    flags = [f for f in backends.backend_for("cpu:avx2").flags if f not in ("-shared", "-fPIC")]
    subprocess.run([cpu.CC, *flags, "-S", str(src), "-o", str(asm)], check=True)
    fmas = [line.split()[0] for line in asm.read_text().splitlines() if re.match(r"\s*vfn?m(add|sub)", line)]
    assert fmas and all(f.endswith("ps") for f in fmas), fmas
    assert all("ymm" in line for line in asm.read_text().splitlines() if re.match(r"\s*vfn?m(add|sub)", line))


# ---------------------------------------------------------------- the rewriter on its own


def _tile_scope(value_of, extent=Const(8), kind=ir.VECTORIZED):
    """A register tile of 8 floats set by one vector loop: ``acc[j] = value_of(acc, x, j)``."""
    acc = Buffer("acc", (8,), "float32", "local", in_registers=True)
    x = Buffer("x", (8,), "float32", "global")
    j = Var("j")
    store = BufferStore(acc, (j,), value_of(acc, x, j))
    return Allocate(acc, For(j, extent, kind, store))


def _load(buf, *indices):
    return BufferLoad(buf, tuple(indices), buf.dtype)


def test_the_rewriter_turns_a_vector_loop_into_one_statement_per_vector():
    tile = vector_tile.vector_tile(_tile_scope(lambda acc, x, j: Binary("add", _load(acc, j), _load(x, j), "float32")), 256)
    assert tile.vtype == vector_tile.VectorType("float32", 8)
    name, update = tile.body.stmts  # the loop's variable keeps its name, then one vector
    assert isinstance(name, vector_tile.LoopName) and name.var.name == "j"
    assert update.target_vector == 0
    assert update.value[0] == "bin" and update.value[2] == ("tile", 0) and update.value[3][0] == "load"
    halves = vector_tile.vector_tile(_tile_scope(lambda acc, x, j: _load(x, j)), 128)  # SSE: two vectors
    assert [s.target_vector for s in halves.body.stmts[1:]] == [0, 1]


@pytest.mark.parametrize("value_of, extent, kind, why", [
    (lambda acc, x, j: Binary("max", _load(acc, j), _load(x, j), "float32"), Const(8), ir.VECTORIZED, "Binary"),
    (lambda acc, x, j: _load(x, Const(7) - j), Const(8), ir.VECTORIZED, "stride of -1"),
    (lambda acc, x, j: _load(x, j), Var("n"), ir.VECTORIZED, "variable extent"),
    (lambda acc, x, j: Binary("add", _load(x, j), _load(acc, Const(0)), "float32"), Const(8), ir.VECTORIZED,
     "one element of the tile"),
    (lambda acc, x, j: _load(x, j), Const(8), ir.SERIAL, "variable extent, or none"),
])
def test_the_rewriter_refuses_what_vectors_cannot_hold(value_of, extent, kind, why):
    with pytest.raises(vector_tile.NotVectorizable, match=why):
        vector_tile.vector_tile(_tile_scope(value_of, extent, kind), 256)
    assert not vector_tile.vectorizable(_tile_scope(value_of, extent, kind), 256)


def _rows_scope(row_offset, rows: int = 2):
    """A register tile of ``rows`` x 8 floats set row by row: ``acc[row_offset(i) + j] = x[j]``
    under an unrolled loop ``i`` and a vector loop ``j``."""
    acc = Buffer("acc", (rows * 8,), "float32", "local", in_registers=True)
    x = Buffer("x", (8,), "float32", "global")
    i, j = Var("i"), Var("j")
    store = BufferStore(acc, (row_offset(i) + j,), _load(x, j))
    return Allocate(acc, For(i, Const(rows), ir.SERIAL, For(j, Const(8), ir.VECTORIZED, store)))


@pytest.mark.parametrize("row_offset, rows, holds", [
    (lambda i: i * 8, 2, True),       # rows whole vectors apart
    (lambda i: i * 4, 2, False),      # the second row starts mid-vector
    (lambda i: i * 4, 1, True),       # ... unless there is no second row
    (lambda i: i * i * 8, 2, True),   # not linear in i: the check leaves it to the rewrite
    (lambda i: i * i * 4, 3, False),
])
def test_the_quick_check_agrees_with_the_rewrite(row_offset, rows, holds):
    """``vectorizable`` decides without unrolling what ``vector_tile`` decides by unrolling."""
    scope = _rows_scope(row_offset, rows)
    try:
        vector_tile.vector_tile(scope, 256)
        rewritten = True
    except vector_tile.NotVectorizable:
        rewritten = False
    assert rewritten == holds
    assert vector_tile.vectorizable(scope, 256) == holds


@pytest.mark.parametrize("workload, params", [
    ("matmul", dict(M=127, N=1023, K=511)),
    ("dense", dict(M=40, N=96, K=48, bias=True, relu=True)),
    ("batch_matmul", dict(B=2, M=30, N=64, K=24)),
])
def test_the_quick_check_agrees_with_the_rewrite_on_sampled_schedules(workload, params):
    """On the register tiles of sampled schedules (whole and tail tiles, both kinds of answer)."""
    import random
    from autotune.task import Task

    task = Task(workload, params, "cpu")
    rng = random.Random(5)
    answers = set()
    for _ in range(30):
        func = task.lower(task.space.sample(rng))
        for alloc in (n for n in ir.walk(func.body) if isinstance(n, Allocate) and n.buffer.in_registers):
            for bits in (512, 256):
                try:
                    vector_tile.vector_tile(alloc, bits)
                    rewritten = True
                except vector_tile.NotVectorizable:
                    rewritten = False
                assert vector_tile.vectorizable(alloc, bits) == rewritten
                answers.add(rewritten)
    assert answers == {True, False}


@pytest.mark.skipif(os.uname().machine != "x86_64", reason="x86 assembly")
def test_an_avx512_tile_compiles_to_fmas_on_zmm_registers(tmp_path):
    """On an AVX-512 target a 16-float row is one 512-bit variable, and gcc keeps it whole
    (compiled to assembly only, so any x86 machine checks it)."""
    backend = backends.backend_for("cpu:avx512")
    s, wl = _tiled_matmul(4, 32, m=8, n=64, k=64)
    src, asm = tmp_path / "k.c", tmp_path / "k.s"
    src.write_text(backend.generate_source(schedule.lower(s, wl.args)))
    assert _declared_vectors(src.read_text()) == [("at_f32x16", 8)]
    flags = [f for f in backend.flags if f not in ("-shared", "-fPIC")]
    subprocess.run([cpu.CC, *flags, "-S", str(src), "-o", str(asm)], check=True)
    fmas = [line for line in asm.read_text().splitlines() if re.match(r"\s*vfn?m(add|sub)", line)]
    assert fmas and all("ps" in f.split()[0] and "zmm" in f for f in fmas), fmas
