"""``schedule.describe_lowered``: what the generated code does, read off the lowered IR.

Every claim is checked against the code the backend prints for the same function: a
loop is described parallel exactly when the C source has ``#pragma omp parallel for``
on it (and runs more than one iteration), vectorized exactly when it has ``omp simd``
(``GCC ivdep`` in a register tile), unrolled exactly when it has ``GCC unroll N`` with
the same N.
"""
from __future__ import annotations

import random
import re

import pytest

import te
from backends import backend_for
from backends import cpu
from backends.cpu import CPUDialect, generate_source
from schedule import describe_lowered, ir, lower
from schedule.config import Config
from schedule.explain import UNROLLED_INTO_VECTORS, explain
from schedule.printer import NameTable
from schedule.space import ConfigSpace
from te.expr import Const, Var

_FOR = re.compile(r"^\s*for \((?:int32_t|int64_t) (\w+) = 0; \1 < (.+); \+\+\1\) \{$")

#: matmul 16x16x16: the outer (a-level) loops have one iteration each (2*2*4 = 16 rows, 1*2*8 = 16
#: columns per tile), yet the config asks for both to be fused into a parallel loop.
ONE_ITERATION_OUTER = {"C.tile.i": (2, 2, 4), "C.tile.j": (1, 2, 8), "C.rtile.k": 1, "C.at": "a",
                       "C.parallel": 2, "C.unroll": 0, "C.pack": "none"}
#: The same shape with 2 x 2 outer tiles fused in parallel, A packed, unrolled inner loops.
FOUR_PARALLEL_TILES = {"C.tile.i": (1, 2, 4), "C.tile.j": (1, 1, 8), "C.rtile.k": 4, "C.at": "a",
                       "C.parallel": 2, "C.unroll": 64, "C.pack": "A"}


def _space(target: str = "cpu", **params) -> ConfigSpace:
    return ConfigSpace.from_workload(te.create_workload("matmul", **(params or dict(M=16, N=16, K=16))), target)


def _lowered(space: ConfigSpace, values: dict) -> ir.LoweredFunc:
    config = Config(space.knobs.sketch, values)
    assert space.check(config) is None
    s, args = space.apply(config)
    return lower(s, args)


def source_loops(source: str) -> list[tuple[str, str, list[str]]]:
    """(name, extent, pragmas on it) of every ``for`` of C ``source``, in order."""
    loops, pragmas = [], []
    for line in source.splitlines():
        text = line.strip()
        if text.startswith(("#pragma", "//")):  # a comment in place of a pragma: cpu.ROWS_LEFT_TO_GCC
            pragmas.append(text)
            continue
        m = _FOR.match(line)
        if m:
            loops.append((m.group(1), m.group(2), pragmas))
        pragmas = []
    return loops


def check_agrees_with_source(func: ir.LoweredFunc, dialect: CPUDialect | None = None) -> str:
    """Assert that the description of every loop of ``func`` matches the C the CPU backend
    prints for it (with ``dialect``, when given), loop by loop; returns the source.

    The loops over a register tile the dialect prints as vector variables are described
    (unrolled, or vector) but not printed as loops: those are checked to be the loops that
    index such a tile, and a loop inside one that the printer unrolled is printed once per
    unrolled iteration."""
    pragmas = None if dialect is None else dialect.loop_pragmas  # None: explain's own CPU rules
    dialect = dialect or backend_for("cpu").target_dialect
    bodies = [p.func.body for p in func.prepacks] + [func.body]  # the packing functions print first
    source = generate_source(func, dialect)
    described = []
    for body in bodies:
        notes = explain(body, pragmas=pragmas, vector_tiles=dialect.prints_vector_variables).loops
        loops = [s for s in ir.walk(body) if isinstance(s, ir.For)]
        names = NameTable()
        assert [names(loop.var) for loop in loops] == [n.name for n in notes]
        described += _as_printed(body, dict(zip(loops, notes)), dialect, held=())
    printed = source_loops(source)
    assert len(described) == len(printed)
    for note, (name, extent, pragmas) in zip(described, printed):
        text = " ".join(pragmas)
        on_one_thread = note.note.startswith(("parallel of 1 iteration", "parallel nested in"))
        marked_parallel = note.how == "parallel" or on_one_thread  # the pragma is printed
        assert ("omp parallel for" in text) == marked_parallel, (note, pragmas)
        if note.how == "parallel":
            assert note.trips > 1
        vector_pragma = "omp simd" in text or "GCC ivdep" in text  # ivdep: a register tile's vector loops
        assert vector_pragma == (note.how == "vector"), (note, pragmas)
        unroll_pragma = f"#pragma GCC unroll {note.trips}" in pragmas or cpu.ROWS_LEFT_TO_GCC in pragmas
        assert unroll_pragma == (note.how == "unrolled"), (note, pragmas)
        assert (extent == str(note.trips)) == (not note.tail), (note, extent)
        assert name == note.name
    return source


def _as_printed(s, notes: dict, dialect: CPUDialect, held: tuple) -> list:
    """The notes of the loops of ``s`` in the order and number the C source prints them:
    none for a loop over a register tile held in vector variables (``held``), the loops
    inside an unrolled one once per iteration."""
    if isinstance(s, ir.Allocate) and s.buffer.in_registers and dialect.prints_vector_variables(s):
        held = held + (s.buffer,)
    if isinstance(s, ir.For) and any(ir.indexes_register_tile(s, tile) for tile in held):
        note = notes[s]
        assert (note.how, note.trips) == ("vector" if s.kind == ir.VECTORIZED else "unrolled", ir.const_int(s.extent))
        assert note.note == ("" if s.kind in (ir.VECTORIZED, ir.UNROLLED) else UNROLLED_INTO_VECTORS), note
        inner = [n for child in ir.child_stmts(s) for n in _as_printed(child, notes, dialect, held)]
        return inner if s.kind == ir.VECTORIZED else inner * note.trips
    own = [notes[s]] if isinstance(s, ir.For) else []
    return own + [n for child in ir.child_stmts(s) for n in _as_printed(child, notes, dialect, held)]


def test_parallel_decision_over_loops_of_one_iteration_is_described_serial():
    space = _space()
    config = Config(space.knobs.sketch, ONE_ITERATION_OUTER)
    assert space.decisions(config)["C"].parallel == 2
    assert "2 outer loop(s) fused in parallel" in space.describe_config(config)  # what was asked
    func = _lowered(space, ONE_ITERATION_OUTER)
    text = describe_lowered(func)
    assert text.splitlines()[0].startswith("parallel: none, one thread runs every loop")
    assert "(parallel" not in text and "OpenMP" not in text
    source = check_agrees_with_source(func)
    assert "#pragma omp parallel" not in source


def test_parallel_loop_is_described_with_its_trip_count_and_has_the_pragma():
    func = _lowered(_space(), FOUR_PARALLEL_TILES)
    text = describe_lowered(func)
    assert text.splitlines()[0] == "parallel: i_outer_j_outer_fused, 4 iterations (OpenMP parallel for)"
    source = check_agrees_with_source(func)
    assert source.count("#pragma omp parallel for") == 1
    (name, extent, _), = [loop for loop in source_loops(source) if any("parallel" in p for p in loop[2])]
    assert (name, extent) == ("i_outer_j_outer_fused", "4")
    # C.local, A.local, the register tile C.local.acc and C: every buffer's nest starts in it
    assert text.count("i_outer_j_outer_fused 4 (parallel)") == 4


def test_vector_unrolled_loops_and_packed_buffer_are_named():
    func = _lowered(_space(), FOUR_PARALLEL_TILES)
    lines = describe_lowered(func).splitlines()
    local = next(line for line in lines if line.startswith("C.local "))
    assert local.startswith("C.local [local 8x8 float32, 256 B, allocated in i_outer_j_outer_fused]: ")
    tile = next(line for line in lines if line.startswith("C.local.acc "))  # the register tile
    assert tile.startswith("C.local.acc [local 4x8 float32, 128 B, allocated in i_inner_outer]: ")
    assert tile.endswith("> k_outer 4 > i_inner_outer 2 (unrolled x2) > k_inner 4 (unrolled x4) > "
                         "i_inner_inner 4 (unrolled x4) > j_inner_inner 8 (vector x8 float32)")
    packed = next(line for line in lines if line.startswith("A.local "))
    assert packed == ("A.local [local 8x4 float32, 128 B, allocated in k_outer]: "
                      "i_outer_j_outer_fused 4 (parallel) > k_outer 4 > i0 8 > i1 4")
    assert lines[-1] == ("C: i_outer_j_outer_fused 4 (parallel) > i_inner_inner_1 8 > "
                         "j_inner_inner_1 8 (vector x8 float32)")
    check_agrees_with_source(func)


def test_loop_names_are_those_of_the_printed_ir():
    func = _lowered(_space(), FOUR_PARALLEL_TILES)
    printed = set(re.findall(r"for (\w+) in range\(", str(func)))
    assert {note.name for note in explain(func.body).loops} == printed


def test_tail_loops_are_marked_with_their_most_iterations():
    space = _space(M=20, N=16, K=16)
    values = dict(FOUR_PARALLEL_TILES, **{"C.tile.i": (1, 1, 8), "C.pack": "none"})  # 8 does not divide 20
    func = _lowered(space, values)
    text = describe_lowered(func)
    assert re.search(r"\b\w+ <=8 \(tail", text), text
    check_agrees_with_source(func)


@pytest.mark.parametrize("name, params", [
    ("matmul", dict(M=20, N=24, K=9)),
    ("dense", dict(M=13, N=17, K=11, bias=True, relu=True)),
    ("softmax", dict(shape=[7, 13])),
])
def test_sampled_configs_are_described_as_the_c_source_runs_them(name, params):
    space = ConfigSpace.from_workload(te.create_workload(name, **params))
    rng = random.Random(7)
    for _ in range(12):
        s, args = space.apply(space.sample(rng))
        func = lower(s, args)
        source = check_agrees_with_source(func)
        described = explain(func.body).parallel
        assert source.count("#pragma omp parallel for") >= len(described)
        assert describe_lowered(func).startswith("parallel: none") == (not described)


def test_nested_and_single_iteration_parallel_loops_run_on_one_thread():
    buf = ir.Buffer("Y", (4, 8), "float32", is_arg=True)
    i, j, k = Var("i"), Var("j"), Var("k")
    store = ir.BufferStore(buf, (i, j), Const(1.0, "float32"))
    body = ir.seq(ir.For(i, Const(4), ir.PARALLEL, ir.For(j, Const(8), ir.PARALLEL, store)),
                  ir.For(k, Const(1), ir.PARALLEL, ir.BufferStore(buf, (k, k), Const(2.0, "float32"))))
    func = ir.LoweredFunc("kernel", (buf,), body)
    outer, inner, single = explain(body).loops
    assert (outer.how, inner.how, single.how) == ("parallel", "serial", "serial")
    assert "nested in i" in inner.note and "1 iteration" in single.note
    assert describe_lowered(func).splitlines()[0] == "parallel: i, 4 iterations (OpenMP parallel for)"
    source = check_agrees_with_source(func)
    assert source.count("#pragma omp parallel for") == 3, "the pragmas stay; the description says what runs"


def test_cuda_lowering_is_described_as_blocks_and_threads_not_openmp():
    from backends import cuda

    space = _space("cuda")
    rng = random.Random(1)
    for _ in range(4):
        s, args = space.apply(space.sample(rng))
        func = lower(s, args)
        text = describe_lowered(func)
        program = cuda.lower_program(func)
        source = cuda.generate_source(program)
        for kernel in program.kernels:
            assert f"// grid {kernel.grid}, block {kernel.block}" in source
            gx, gy, gz = kernel.grid
            bx, by, bz = kernel.block
            assert (f"kernel {kernel.name}: grid {gx}x{gy}x{gz} ({gx * gy * gz} blocks) x block {bx}x{by}x{bz} "
                    f"({bx * by * bz} threads)") in text
        loops = [note for k in program.kernels for note in explain(k.body, gpu=True).loops]
        assert source.count("#pragma unroll") == sum(note.how == "unrolled" for note in loops)
        for tag in ("blockIdx.x", "threadIdx.x"):  # each bound loop declares its index from the tag
            assert len(re.findall(rf"= \(int(?:32|64)_t\){re.escape(tag)};", source)) == \
                sum(note.how == tag for note in loops)
        assert re.search(rf"\w+ {program.kernels[0].grid[0]} \(blockIdx\.x\)", text)
        assert re.search(r"\w+ \d+ \(threadIdx\.x\)", text)
        assert "OpenMP parallel for" not in text and "(parallel" not in text and "vector x" not in text
        assert "parallel: " not in text


class _SerialDialect(CPUDialect):
    """A CPU dialect without OpenMP: parallel and vector loops print as plain loops."""

    def loop_pragmas(self, loop):
        return [] if loop.kind in (ir.PARALLEL, ir.VECTORIZED) else super().loop_pragmas(loop)


def test_a_dialect_without_openmp_is_described_by_its_own_pragmas():
    func = _lowered(_space(), FOUR_PARALLEL_TILES)
    dialect = _SerialDialect()
    text = describe_lowered(func, dialect.loop_pragmas)
    assert text.splitlines()[0].startswith("parallel: none")
    assert "vector x" not in text and "(unrolled x4)" in text
    assert "j_inner_inner 8 (vectorized without a pragma on this target)" in text
    assert "i_outer_j_outer_fused 4 (parallel without a pragma on this target)" in text
    source = check_agrees_with_source(func, dialect)
    assert "#pragma omp" not in source and "#pragma GCC unroll 4" in source


def test_peak_intermediate_memory_counts_nested_allocations_and_parallel_copies():
    # C.local 8x8 holds A.local 8x4 and the register tile C.local.acc 4x8 inside, 4 parallel tiles
    func = _lowered(_space(), FOUR_PARALLEL_TILES)
    what = explain(func.body)
    assert (what.peak_bytes, what.peak_bytes_all) == ((64 + 32 + 32) * 4, (64 + 32 + 32) * 4 * 4)
    assert describe_lowered(func).splitlines()[1] == \
        "intermediate memory: peak 512 B live at once in one thread, 2 KiB with every parallel iteration at once"


def test_sibling_allocations_reuse_memory_and_a_function_of_arguments_needs_none():
    out = ir.Buffer("Y", (64,), "float32", is_arg=True)
    a, b = ir.Buffer("a", (100,), "float32", scope="local"), ir.Buffer("b", (50,), "float64", scope="local")
    i = Var("i")
    first = ir.Allocate(a, ir.BufferStore(a, (i,), Const(1.0, "float32")))
    second = ir.Allocate(b, ir.BufferStore(b, (i,), Const(2.0, "float64")))
    body = ir.For(i, Const(8), ir.SERIAL, ir.seq(first, second, ir.BufferStore(out, (i,), Const(0.0, "float32"))))
    what = explain(body)
    assert (what.peak_bytes, what.peak_bytes_all) == (400, 400), "a then b, never both: the larger"
    nested = ir.Allocate(a, ir.seq(ir.BufferStore(a, (i,), Const(1.0, "float32")), second))
    assert explain(ir.For(i, Const(8), ir.PARALLEL, nested)).peak_bytes_all == 8 * 800
    on_threads = [explain(ir.For(i, Const(8), ir.PARALLEL, nested), threads=n).peak_bytes_threads for n in (1, 2, 16)]
    assert on_threads == [800, 2 * 800, 8 * 800], "as many copies as threads, at most one per iteration"
    func = ir.LoweredFunc("kernel", (out,), ir.For(i, Const(64), ir.SERIAL, ir.BufferStore(out, (i,), Const(0.0, "float32"))))
    assert describe_lowered(func).splitlines()[1].startswith("intermediate memory: none")


#: Two-row register tiles with no unroll budget: the rows loop is a plain loop in the IR.
SERIAL_TILE_ROWS = {"C.tile.i": (1, 1, 2), "C.tile.j": (1, 1, 16), "C.rtile.k": 2, "C.at": "b",
                    "C.parallel": 2, "C.unroll": 0, "C.pack": "block-panels:B"}


def test_a_register_tile_in_vector_variables_is_described_unrolled_as_printed():
    """The CPU dialect prints the 2x16 register tile as vector variables: its rows loop, a
    plain loop in the IR, is unrolled in the C, and the description says so when given the
    dialect's ``prints_vector_variables`` (without it, the tile is described as an array)."""
    func = _lowered(_space(), SERIAL_TILE_ROWS)
    dialect = backend_for("cpu").target_dialect
    tile = next(line for line in describe_lowered(func, dialect.loop_pragmas, dialect.prints_vector_variables)
                .splitlines() if line.startswith("C.local.acc "))
    assert tile.endswith(f"> k_inner 2 > i_inner 2 (unrolled x2, {UNROLLED_INTO_VECTORS}) > j_inner 16 (vector x16 float32)")
    as_array = next(line for line in describe_lowered(func).splitlines() if line.startswith("C.local.acc "))
    assert as_array.endswith("> k_inner 2 > i_inner 2 > j_inner 16 (vector x16 float32)")
    source = check_agrees_with_source(func)
    assert "C_local_acc_v1" in source and "C_local_acc[" not in source
