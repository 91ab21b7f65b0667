"""Register promotion and one-iteration loops in the lowered IR."""
from __future__ import annotations

import te
import schedule
from schedule import ir
from sched_helpers import check, register_tile_batch_matmul


def _matmul_two_level(M=24, N=48, K=19, s2=(3, 2), s3=(4, 8), unroll_k=False):
    wl = te.create_workload("matmul", M=M, N=N, K=K)
    A, B, C = wl.args
    s = schedule.create_schedule(C)
    CL = s.cache_write(C, "local")
    i, j = C.op.axis
    io, jo, ii, ji = s[C].tile(i, j, s2[0] * s3[0], s2[1] * s3[1])
    s[CL].compute_at(s[C], jo)
    ci, cj = s[CL].op.axis
    (k,) = s[CL].op.reduce_axis
    ci2, ci3 = s[CL].split(ci, factor=s3[0])
    cj2, cj3 = s[CL].split(cj, factor=s3[1])
    ko, ki = s[CL].split(k, factor=4)
    s[CL].reorder(ko, ci2, cj2, ki, ci3, cj3)
    s[CL].unroll(ci3)
    s[CL].vectorize(cj3)
    if unroll_k:
        s[CL].unroll(ki)
    return s, wl


def _allocations(func):
    return [x.buffer for x in ir.walk(func.body) if isinstance(x, ir.Allocate)]


def test_accumulator_tile_is_promoted_across_the_inner_reduce_loop():
    s, wl = _matmul_two_level()
    func = schedule.lower(s, wl.args)
    acc = [b for b in _allocations(func) if b.name == "C.local.acc"]
    assert len(acc) == 1 and acc[0].shape == (4, 8) and acc[0].scope == "local"
    assert [b.name for b in _allocations(func) if b.in_registers] == ["C.local.acc"]
    text = str(func)
    assert "C.local.acc[i_inner, j_inner] = C.local.acc[i_inner, j_inner] + " in text
    check(s, wl)


def _loops(stmt):
    return [x for x in ir.walk(stmt) if isinstance(x, ir.For)]


def _promoted_tiles(func):
    return [x for x in ir.walk(func.body) if isinstance(x, ir.Allocate) and x.buffer.name == "C.local.acc"]


def _tile_loops(alloc):
    """The loops over the promoted tile ``alloc`` allocates (its variables index it)."""
    tile_vars = {v for x in ir.walk(alloc.body) if isinstance(x, ir.BufferStore) and x.buffer is alloc.buffer
                 for v in x.indices}
    return [l for l in _loops(alloc) if l.var in tile_vars]


def test_a_tile_with_tails_is_versioned_into_tiles_of_constant_extents():
    # M = 22 in cache blocks of 12 rows, tiles of 4: the last tile has the 2 rows left,
    # whichever block it is in. N = 40 in blocks of 16, tiles of 8: the last block holds
    # one whole tile and one past the edge, which has nothing to compute. So there are two
    # copies, a 4x8 tile and a 2x8 one, each with constant loops (unrolled and vectorized
    # as written), chosen by the rows left. (K = 19 leaves the reduction a tail of its own.)
    s, wl = _matmul_two_level(M=22, N=40)
    func = schedule.lower(s, wl.args)
    tiles = _promoted_tiles(func)
    assert [t.buffer.shape for t in tiles] == [(4, 8), (2, 8)]
    for tile in tiles:
        tile_loops = _tile_loops(tile)
        assert all(ir.const_int(l.extent) is not None for l in tile_loops), str(tile)
        assert {l.kind for l in tile_loops} == {ir.UNROLLED, ir.VECTORIZED}
    text = str(func)
    assert "if 4 <= 22 - " in text and "if 0 < 22 - " in text and "if 8 <= 40 - " in text
    check(s, wl)


def test_a_tile_with_tails_on_three_axes_keeps_one_tail_copy_with_variable_loops():
    # Tails on all three axes would take eight copies (over MAX_VERSIONS): the full tile
    # gets constant loops, one tail copy keeps min(size, rest), its loops rolled.
    s, wl = register_tile_batch_matmul((2, 3, 8), batch=5, m=7, n=20)
    func = schedule.lower(s, wl.args)
    versions = [x for x in ir.walk(func.body) if isinstance(x, ir.IfThenElse)
                and isinstance(x.then_case, ir.Allocate) and x.then_case.buffer.name == "C.local.acc"]
    assert len(versions) == 1 and len(_promoted_tiles(func)) == 2
    full, tail = versions[0].then_case, versions[0].else_case
    assert all(ir.const_int(l.extent) is not None for l in _loops(full))
    tail_tile = _tile_loops(tail)
    assert tail_tile and all(ir.const_int(l.extent) is None for l in tail_tile)
    assert not any(l.kind == ir.UNROLLED for l in tail_tile)
    check(s, wl)


def test_only_the_innermost_unrolled_loop_around_a_tail_loop_stays_unrolled():
    # N = 45 in blocks of 16, tiles of 8: the last tile has 5 columns, not whole vectors,
    # so its copy keeps the vector loop's variable extent. Around it the rows (unrolled x4)
    # stay unrolled, but the reduction step (unrolled x4 as well) is rolled: unrolled, it
    # would copy the tail loop and its remainder code once per step. The whole tile keeps
    # both unrolled.
    s, wl = _matmul_two_level(M=24, N=45, K=16, unroll_k=True)
    func = schedule.lower(s, wl.args)
    versions = [x for x in ir.walk(func.body) if isinstance(x, ir.IfThenElse)
                and isinstance(x.then_case, ir.Allocate) and x.then_case.buffer.name == "C.local.acc"]
    assert len(versions) == 1
    full, tail = versions[0].then_case, versions[0].else_case
    kinds = {(l.var.name, l.kind) for l in _loops(full)}
    assert {("k.inner", ir.UNROLLED), ("i.inner", ir.UNROLLED)} <= kinds
    (step,) = [l for l in _loops(tail) if l.var.name == "k.inner"]
    assert step.kind == ir.SERIAL
    rows = [l for l in _loops(tail) if l.kind == ir.UNROLLED]
    assert len(rows) == 3 and all(l.var.name == "i.inner" for l in rows)  # copy in, update, copy out
    for row in rows:  # each directly around the column loop of variable extent
        (column,) = _loops(row.body)
        assert column.kind == ir.VECTORIZED and ir.const_int(column.extent) is None
    check(s, wl)


def test_a_tile_that_divides_is_not_versioned():
    s, wl = _matmul_two_level()
    func = schedule.lower(s, wl.args)
    assert not any(isinstance(x, ir.IfThenElse) for x in ir.walk(func.body))


def test_no_promotion_when_a_tile_loop_reaches_two_elements_of_one_dimension():
    # D[i] += X[i, j]: the tile loop j does not appear in D's index, so the accumulation
    # is itself a reduction over the tile and must stay in place.
    X = te.placeholder((6, 5), name="X")
    k = te.reduce_axis((0, 5), name="k")
    D = te.compute((6,), lambda i: te.sum(X[i, k], axis=k), name="D")
    s = schedule.create_schedule(D)
    func = schedule.lower(s, [X, D])
    assert not any(b.name.endswith(".acc") or b.in_registers for b in _allocations(func))


def test_loops_of_one_iteration_disappear():
    s, wl = _matmul_two_level(M=8, N=16, K=8, s2=(1, 2), s3=(8, 8))
    text = str(schedule.lower(s, wl.args))
    assert "range(1)" not in text
    check(s, wl)
