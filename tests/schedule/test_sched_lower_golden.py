"""Golden text of ``schedule.lower`` for small schedules, and determinism of lowering and building."""
from __future__ import annotations

import textwrap

import backends
import schedule
import te
from sched_helpers import check, workload


def golden(text: str) -> str:
    return textwrap.dedent(text).strip("\n")


def small_matmul():
    A = te.placeholder((10, 6), name="A")
    B = te.placeholder((6, 8), name="B")
    k = te.reduce_axis((0, 6), name="k")
    C = te.compute((10, 8), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    return A, B, C


def two_stages():
    X = te.placeholder((10, 8), name="X")
    T = te.compute((10, 8), lambda i, j: X[i, j] * 2.0, name="T")
    Y = te.compute((10, 8), lambda i, j: T[i, j] + 1.0, name="Y")
    return X, T, Y


def test_default_matmul_nest():
    A, B, C = small_matmul()
    s = schedule.create_schedule(C)
    assert str(schedule.lower(s, [A, B, C])) == golden("""
        def kernel(A: float32[10, 6], B: float32[6, 8], C: float32[10, 8]):
          for i in range(10):
            for j in range(8):
              C[i, j] = 0.0f
              for k in range(6):
                C[i, j] = C[i, j] + A[i, k] * B[k, j]
    """)


def test_non_dividing_split_tail_becomes_loop_bound():
    """A guard every statement of a loop shares turns into that loop's bound (a tail loop)."""
    A, B, C = small_matmul()
    s = schedule.create_schedule(C)
    s[C].split(C.op.axis[0], factor=4)
    assert str(schedule.lower(s, [A, B, C])) == golden("""
        def kernel(A: float32[10, 6], B: float32[6, 8], C: float32[10, 8]):
          for i_outer in range(3):
            for i_inner in range(min(4, 10 - i_outer * 4)):
              for j in range(8):
                C[i_outer * 4 + i_inner, j] = 0.0f
                for k in range(6):
                  C[i_outer * 4 + i_inner, j] = C[i_outer * 4 + i_inner, j] + A[i_outer * 4 + i_inner, k] * B[k, j]
    """)
    check(s, workload([A, B, C]))


def test_non_dividing_split_is_guarded():
    """With the inner part outside, no loop can take the tail: the statements are guarded."""
    A, B, C = small_matmul()
    s = schedule.create_schedule(C)
    io, ii = s[C].split(C.op.axis[0], factor=4)
    s[C].reorder(ii, io)
    assert str(schedule.lower(s, [A, B, C])) == golden("""
        def kernel(A: float32[10, 6], B: float32[6, 8], C: float32[10, 8]):
          for i_inner in range(4):
            for i_outer in range(3):
              for j in range(8):
                if i_outer * 4 + i_inner < 10:
                  C[i_outer * 4 + i_inner, j] = 0.0f
                for k in range(6):
                  if i_outer * 4 + i_inner < 10:
                    C[i_outer * 4 + i_inner, j] = C[i_outer * 4 + i_inner, j] + A[i_outer * 4 + i_inner, k] * B[k, j]
    """)
    check(s, workload([A, B, C]))


def test_reduction_split_tail_and_guard_in_c():
    A, B, C = small_matmul()
    s = schedule.create_schedule(C)
    ko, ki = s[C].split(C.op.reduce_axis[0], factor=4)
    s[C].reorder(ki, ko)
    text = str(schedule.lower(s, [A, B, C]))
    assert "for k_inner in range(4):" in text
    assert "if k_outer * 4 + k_inner < 6:" in text
    module = check(s, workload([A, B, C]))
    assert "if (((k_outer * 4) + k_inner) < 6) {" in module.source


def test_dividing_split_guard_is_dropped():
    A, B, C = small_matmul()
    s = schedule.create_schedule(C)
    s[C].split(C.op.axis[0], factor=5)
    s[C].split(C.op.axis[1], nparts=2)
    text = str(schedule.lower(s, [A, B, C]))
    assert "for i_outer in range(2):" in text
    assert "for j_outer in range(2):" in text and "for j_inner in range(4):" in text
    assert "if " not in text


def test_compute_at_places_region_inside_host_loop():
    X, T, Y = two_stages()
    s = schedule.create_schedule(Y)
    io, ii = s[Y].split(Y.op.axis[0], factor=4)
    s[T].compute_at(s[Y], io)
    assert str(schedule.lower(s, [X, Y])) == golden("""
        def kernel(X: float32[10, 8], Y: float32[10, 8]):
          for i_outer in range(3):
            allocate T[4, 8] float32 in global
            for i in range(min(4, 10 - i_outer * 4)):
              for j in range(8):
                T[i, j] = X[i_outer * 4 + i, j] * 2.0f
            for i_inner in range(min(4, 10 - i_outer * 4)):
              for j_1 in range(8):
                Y[i_outer * 4 + i_inner, j_1] = T[i_inner, j_1] + 1.0f
    """)
    check(s, workload([X, Y]))


def test_compute_inline_and_annotations_text():
    X, T, Y = two_stages()
    s = schedule.create_schedule(Y)
    s[T].compute_inline()
    i, j = Y.op.axis
    s[Y].parallel(i)
    s[Y].vectorize(j)
    assert str(schedule.lower(s, [X, Y])) == golden("""
        def kernel(X: float32[10, 8], Y: float32[10, 8]):
          for i in range(10) (parallel):
            for j in range(8) (vectorized):
              Y[i, j] = X[i, j] * 2.0f + 1.0f
    """)


def test_root_intermediate_is_allocated_around_the_nests():
    X, T, Y = two_stages()
    s = schedule.create_schedule(Y)
    lines = str(schedule.lower(s, [X, Y])).splitlines()
    assert lines[1] == "  allocate T[10, 8] float32 in global"
    assert lines.index("  for i in range(10):") < lines.index("  for i_1 in range(10):")


def tiled_schedule():
    wl = te.create_workload("matmul", M=13, N=17, K=11)
    A, B, C = wl.args
    s = schedule.create_schedule(C)
    CL = s.cache_write(C, "local")
    io, jo, ii, ji = s[C].tile(*C.op.axis, 4, 8)
    f = s[C].fuse(io, jo)
    s[C].parallel(f)
    s[C].vectorize(ji)
    s[CL].compute_at(s[C], f)
    AL = s.cache_read(A, "local", [CL])
    ko, ki = s[CL].split(s[CL].op.reduce_axis[0], factor=4)
    s[CL].reorder(ko, *s[CL].op.axis, ki)
    s[AL].compute_at(s[CL], ko)
    return s, wl


def test_lowering_is_deterministic():
    s, wl = tiled_schedule()
    first = str(schedule.lower(s, wl.args))
    assert str(schedule.lower(s, wl.args)) == first
    s2, wl2 = tiled_schedule()                  # new tensors, new variables, same schedule
    assert str(schedule.lower(s2, wl2.args)) == first


def test_building_is_deterministic():
    s, wl = tiled_schedule()
    m1 = backends.build(s, wl.args)
    m2 = backends.build(s, wl.args)
    s2, wl2 = tiled_schedule()
    m3 = backends.build(s2, wl2.args)
    assert m1.source == m2.source == m3.source
    assert m1.path == m2.path == m3.path
    check(s2, wl2)


def test_lowering_leaves_the_schedule_usable():
    X, T, Y = two_stages()
    s = schedule.create_schedule(Y)
    before = str(schedule.lower(s, [X, Y]))
    io, ii = s[Y].split(Y.op.axis[0], factor=4)
    s[T].compute_at(s[Y], io)
    after = str(schedule.lower(s, [X, Y]))
    assert before != after and "allocate T[4, 8]" in after
    check(s, workload([X, Y]))
