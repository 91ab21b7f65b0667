"""Illegal schedules are refused with a clear error: at the primitive call where the
primitive alone shows the mistake, else at lowering (or building), never with wrong code."""
from __future__ import annotations

import pytest

import backends
import schedule
import te
from schedule import IRVerifyError, ScheduleError
from sched_helpers import K, M, N, check, tensor


def matmul():
    wl = te.create_workload("matmul", M=M, N=N, K=K)
    C = wl.outputs[0]
    s = schedule.create_schedule(C)
    i, j = C.op.axis
    (k,) = C.op.reduce_axis
    return wl, s, s[C], i, j, k


def chain():
    wl = te.create_workload("elementwise_chain", shape=[M, N])
    out = wl.outputs[0]
    return wl, schedule.create_schedule(out), tensor(wl, "T_mul"), tensor(wl, "T_add1"), out


# ---------------------------------------------------------------- at the primitive call


def test_reorder_with_axis_of_another_stage():
    wl, s, T1, T2, out = chain()
    with pytest.raises(ScheduleError, match=r"reorder on stage 'T_relu': axis 'i1' is not an axis of this stage"):
        s[out].reorder(out.op.axis[0], T1.op.axis[1])


def test_reorder_with_repeated_axis():
    wl, s, st, i, j, k = matmul()
    with pytest.raises(ScheduleError, match=r"axis 'i' is listed twice"):
        st.reorder(i, j, i)


def test_reorder_with_axis_already_split():
    wl, s, st, i, j, k = matmul()
    st.split(i, factor=4)
    with pytest.raises(ScheduleError, match=r"axis 'i' was already split or fused; use the axes that split/fuse returned"):
        st.reorder(j, i)


def test_split_of_axis_already_fused():
    wl, s, st, i, j, k = matmul()
    st.fuse(i, j)
    with pytest.raises(ScheduleError, match=r"split on stage 'C': axis 'j' was already split or fused"):
        st.split(j, factor=2)


def test_fuse_non_adjacent():
    wl, s, st, i, j, k = matmul()
    with pytest.raises(ScheduleError, match=r"axes 'i' and 'k' are not adjacent"):
        st.fuse(i, k)


def test_fuse_inner_then_outer_is_not_adjacent():
    wl, s, st, i, j, k = matmul()
    with pytest.raises(ScheduleError, match=r"not adjacent with 'j' directly outside"):
        st.fuse(j, i)


def test_fuse_spatial_and_reduce():
    wl, s, st, i, j, k = matmul()
    with pytest.raises(ScheduleError, match=r"cannot fuse spatial and reduce axes \('j', 'k'\)"):
        st.fuse(j, k)


def test_fuse_annotated_axis():
    wl, s, st, i, j, k = matmul()
    st.parallel(i)
    with pytest.raises(ScheduleError, match=r"axis 'i' is already marked parallel"):
        st.fuse(i, j)


@pytest.mark.parametrize("primitive", ["vectorize", "parallel"])
def test_vectorize_or_parallel_of_reduction_axis(primitive):
    wl, s, st, i, j, k = matmul()
    with pytest.raises(ScheduleError, match=rf"{primitive} on stage 'C': axis 'k' is a reduction axis"):
        getattr(st, primitive)(k)


def test_vectorize_of_split_reduction_axis():
    wl, s, st, i, j, k = matmul()
    ko, ki = st.split(k, factor=4)
    with pytest.raises(ScheduleError, match=r"axis 'k.inner' is a reduction axis"):
        st.vectorize(ki)


def test_annotating_twice():
    wl, s, st, i, j, k = matmul()
    st.unroll(j)
    with pytest.raises(ScheduleError, match=r"vectorize on stage 'C': axis 'j' is already marked unroll"):
        st.vectorize(j)


def test_split_of_annotated_axis():
    wl, s, st, i, j, k = matmul()
    st.parallel(i)
    with pytest.raises(ScheduleError, match=r"axis 'i' is already parallel"):
        st.split(i, factor=2)


def test_compute_at_unrelated_stage():
    X = te.placeholder((M, N), name="X")
    P = te.compute((M, N), lambda i, j: X[i, j] * 2.0, name="P")
    Q = te.compute((M, N), lambda i, j: X[i, j] + 1.0, name="Q")
    Y = te.compute((M, N), lambda i, j: P[i, j] - 1.0, name="Y")
    Z = te.compute((M, N), lambda i, j: Q[i, j] * Y[i, j], name="Z")
    W = te.compute((M, N), lambda i, j: Q[i, j] + 3.0, name="W")
    s = schedule.create_schedule([Z, W])
    # W reads Q, a sibling of P: it does not read P, not even through other stages
    with pytest.raises(ScheduleError, match=r"compute_at: stage 'W' does not read 'P' \(directly or through other stages\)"):
        s[P].compute_at(s[W], W.op.axis[0])
    s[Q].compute_inline()  # nor through an inlined stage
    with pytest.raises(ScheduleError, match=r"compute_at: stage 'W' does not read 'P'"):
        s[P].compute_at(s[W], W.op.axis[0])


def test_compute_at_a_producer_of_the_stage():
    wl, s, T1, T2, out = chain()
    # T_mul is read by T_add1, so it cannot host it
    with pytest.raises(ScheduleError, match=r"compute_at: stage 'T_mul' does not read 'T_add1'"):
        s[T2].compute_at(s[T1], T1.op.axis[0])


def test_compute_at_through_a_stored_stage_is_allowed():
    wl, s, T1, T2, out = chain()
    s[T1].compute_at(s[out], out.op.axis[0])  # T_relu reads T_mul through the stored T_add1
    s[T2].compute_at(s[out], out.op.axis[0])
    func = check(s, wl).func
    text = str(func)
    assert f"allocate T_mul[1, {N}]" in text and f"allocate T_add1[1, {N}]" in text, text


def test_compute_at_is_allowed_through_an_inlined_reader():
    wl, s, T1, T2, out = chain()
    s[T2].compute_inline()
    s[T1].compute_at(s[out], out.op.axis[0])  # T_relu reads T_mul through the inlined T_add1
    func = check(s, wl).func                  # lowers, builds, runs, compares with NumPy
    text = str(func)
    assert f"allocate T_mul[1, {N}]" in text, text  # one row of T_mul per row of T_relu
    assert "T_add1" not in text, text


def test_compute_at_itself():
    wl, s, T1, T2, out = chain()
    with pytest.raises(ScheduleError, match=r"stage 'T_add1' cannot be computed at itself"):
        s[T2].compute_at(s[T2], T2.op.axis[0])


def test_compute_at_axis_not_of_host():
    wl, s, T1, T2, out = chain()
    with pytest.raises(ScheduleError, match=r"compute_at on stage 'T_relu': axis 'i0' is not an axis of this stage"):
        s[T2].compute_at(s[out], T2.op.axis[0])


def test_compute_at_of_an_output():
    X = te.placeholder((M,), name="X")
    Y = te.compute((M,), lambda i: X[i] * 2.0, name="Y")
    Z = te.compute((M,), lambda i: Y[i] + 1.0, name="Z")
    s = schedule.create_schedule([Y, Z])
    with pytest.raises(ScheduleError, match=r"stage 'Y' is an output of the schedule"):
        s[Y].compute_at(s[Z], Z.op.axis[0])


@pytest.mark.parametrize(
    "call",
    [
        lambda st, s, T1, out: st.split(T1.op.axis[0], factor=2),
        lambda st, s, T1, out: st.reorder(*T1.op.axis),
        lambda st, s, T1, out: st.fuse(*T1.op.axis),
        lambda st, s, T1, out: st.vectorize(T1.op.axis[1]),
        lambda st, s, T1, out: st.unroll(T1.op.axis[1]),
        lambda st, s, T1, out: st.parallel(T1.op.axis[0]),
        lambda st, s, T1, out: st.bind(T1.op.axis[0], "blockIdx.x"),
        lambda st, s, T1, out: st.compute_at(s[out], out.op.axis[0]),
        lambda st, s, T1, out: st.compute_inline(),
        lambda st, s, T1, out: st.compute_root(),
        lambda st, s, T1, out: s.cache_write(T1, "local"),
    ],
    ids=["split", "reorder", "fuse", "vectorize", "unroll", "parallel", "bind", "compute_at",
         "compute_inline", "compute_root", "cache_write"],
)
def test_any_primitive_on_inlined_stage(call):
    wl, s, T1, T2, out = chain()
    s[T1].compute_inline()
    with pytest.raises(ScheduleError, match=r"on stage 'T_mul', which is inlined \(compute_inline\)"):
        call(s[T1], s, T1, out)


def test_cache_read_for_inlined_reader():
    wl, s, T1, T2, out = chain()
    s[T1].compute_inline()
    A = wl.args[0]
    with pytest.raises(ScheduleError, match=r"which is inlined"):
        s.cache_read(A, "local", [T1])


def test_compute_inline_of_reduction():
    wl = te.create_workload("dense", M=M, N=N, K=K)
    s = schedule.create_schedule(wl.outputs[0])
    with pytest.raises(ScheduleError, match=r"compute_inline: stage 'dense' is a reduction"):
        s[tensor(wl, "dense")].compute_inline()


def test_compute_inline_of_output():
    wl, s, T1, T2, out = chain()
    with pytest.raises(ScheduleError, match=r"compute_inline: stage 'T_relu' is an output and must be stored"):
        s[out].compute_inline()


def test_compute_inline_of_a_host():
    wl, s, T1, T2, out = chain()
    s[T1].compute_at(s[T2], T2.op.axis[0])
    with pytest.raises(ScheduleError, match=r"stages T_mul are computed at 'T_add1'; move them first"):
        s[T2].compute_inline()


def test_bind_unknown_tag():
    wl, s, st, i, j, k = matmul()
    with pytest.raises(ScheduleError, match=r"unknown thread tag 'threadIdx.w'"):
        st.bind(i, "threadIdx.w")


def test_bind_same_tag_twice():
    wl, s, st, i, j, k = matmul()
    st.bind(i, "blockIdx.x")
    with pytest.raises(ScheduleError, match=r"blockIdx.x is already bound to another axis"):
        st.bind(j, "blockIdx.x")


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(factor=0), r"split factor of 'i' must be positive, got 0"),
        (dict(nparts=-2), r"split nparts of 'i' must be positive, got -2"),
        (dict(factor=2.5), r"split factor of 'i' must be a positive int, got 2.5"),
        (dict(factor=True), r"must be a positive int, got True"),
        (dict(factor=2, nparts=2), r"give exactly one of factor= or nparts="),
        (dict(), r"give exactly one of factor= or nparts="),
    ],
)
def test_split_bad_arguments(kwargs, message):
    wl, s, st, i, j, k = matmul()
    with pytest.raises(ScheduleError, match=message):
        st.split(i, **kwargs)
    assert st.leaf_iter_vars == [i, j, k] and not st.relations  # nothing half-done


def test_split_of_non_axis():
    wl, s, st, i, j, k = matmul()
    with pytest.raises(ScheduleError, match=r"expected an axis \(IterVar\), got 3"):
        st.split(3, factor=2)


def test_cache_write_after_split():
    wl, s, st, i, j, k = matmul()
    st.split(i, factor=4)
    with pytest.raises(ScheduleError, match=r"cache_write on 'C' must come before split/fuse/annotations"):
        s.cache_write(wl.outputs[0], "local")


@pytest.mark.parametrize("primitive", ["cache_read", "cache_write"])
def test_cache_unknown_scope(primitive):
    wl, s, st, i, j, k = matmul()
    A, B, C = wl.args
    with pytest.raises(ScheduleError, match=rf"{primitive}: unknown scope 'register'"):
        if primitive == "cache_read":
            s.cache_read(A, "register", [C])
        else:
            s.cache_write(C, "register")


def test_cache_read_by_non_reader():
    wl, s, T1, T2, out = chain()
    A = wl.args[0]
    with pytest.raises(ScheduleError, match=r"cache_read: stage 'T_relu' does not read 'A'"):
        s.cache_read(A, "local", [out])


def test_placeholder_has_no_stage():
    wl, s, st, i, j, k = matmul()
    with pytest.raises(ScheduleError, match=r"'A' is a placeholder \(an input\)"):
        s[wl.args[0]]


def test_tensor_of_another_dag():
    wl, s, st, i, j, k = matmul()
    other = te.create_workload("matmul", M=M, N=N, K=K).outputs[0]
    with pytest.raises(ScheduleError, match=r"'C' is not part of this schedule"):
        s[other]


def test_create_schedule_of_placeholder():
    A = te.placeholder((3,), name="A")
    with pytest.raises(ScheduleError, match=r"'A' is a placeholder; outputs must be computed tensors"):
        schedule.create_schedule(A)


# ---------------------------------------------------------------- at lowering or building


def test_compute_at_host_axis_split_afterwards():
    wl, s, T1, T2, out = chain()
    i, j = out.op.axis
    s[T2].compute_at(s[out], i)
    s[out].split(i, factor=4)
    with pytest.raises(ScheduleError, match=r"computed at axis 'i0' of 'T_relu', which is no longer a loop there"):
        schedule.lower(s, wl.args)


def test_producer_at_one_host_but_read_by_another():
    wl = te.create_workload("softmax", shape=[M, N])
    Y = wl.outputs[0]
    E = tensor(wl, "softmax_exp")
    s = schedule.create_schedule(Y)
    s[E].compute_at(s[Y], Y.op.axis[0])     # but softmax_sum reads softmax_exp too
    with pytest.raises(ScheduleError, match=r"'softmax_exp' is computed at 'softmax' inside loop 'i0' but read by "
                                            r"softmax_sum, softmax, and not every reader runs inside that loop "
                                            r"\(softmax_sum is computed at the root\)"):
        schedule.lower(s, wl.args)


def test_reader_attached_outside_the_producers_loop():
    wl = te.create_workload("softmax", shape=[M, N])
    Y = wl.outputs[0]
    E, S = tensor(wl, "softmax_exp"), tensor(wl, "softmax_sum")
    s = schedule.create_schedule(Y)
    i, j = Y.op.axis
    s[E].compute_at(s[Y], j)                # exp per element...
    s[S].compute_at(s[Y], i)                # ...but sum, per row, runs before the column loop
    with pytest.raises(ScheduleError, match=r"'softmax_exp' is computed at 'softmax' inside loop 'i1' .*"
                                            r"\(softmax_sum is computed at 'softmax' inside loop 'i0'\); "
                                            r"compute_at needs every reader inside it"):
        schedule.lower(s, wl.args)


def test_reader_is_the_host_of_the_host():
    wl, s, T1, T2, out = chain()
    T3 = te.compute(T2.shape, lambda i, j: T1[i, j] + T2[i, j], name="T3")
    s = schedule.create_schedule(T3)
    s[T2].compute_at(s[T3], T3.op.axis[0])
    s[T1].compute_at(s[T2], T2.op.axis[0])  # but T3 reads T_mul too, outside T_add1's loops
    with pytest.raises(ScheduleError, match=r"'T_mul' is computed at 'T_add1' .* \(T3 is computed at the root\)"):
        schedule.lower(s, wl.args[:1] + [T3])


def test_placeholder_missing_from_args():
    wl, s, st, i, j, k = matmul()
    A, B, C = wl.args
    with pytest.raises(ScheduleError, match=r"placeholder\(s\) B are read but not in the arguments"):
        schedule.lower(s, [A, C])
    with pytest.raises(ScheduleError, match=r"placeholder\(s\) B are read"):
        backends.build(s, [A, C])


def test_output_missing_from_args():
    wl, s, st, i, j, k = matmul()
    A, B, C = wl.args
    with pytest.raises(ScheduleError, match=r"output 'C' of the schedule is missing from the arguments"):
        schedule.lower(s, [A, B])


def test_argument_listed_twice():
    wl, s, st, i, j, k = matmul()
    A, B, C = wl.args
    with pytest.raises(ScheduleError, match=r"a tensor is listed twice"):
        schedule.lower(s, [A, B, A, C])


def test_argument_computed_by_inlined_stage():
    wl, s, T1, T2, out = chain()
    s[T2].compute_inline()
    with pytest.raises(ScheduleError, match=r"argument 'T_add1' is computed by an inlined stage"):
        schedule.lower(s, wl.args + [T2])


def test_vectorize_non_innermost_loop():
    wl, s, st, i, j, k = matmul()
    st.vectorize(j)                         # k stays inside j
    with pytest.raises((IRVerifyError, ScheduleError), match=r"vectorized loop 'j' is not innermost"):
        schedule.lower(s, wl.args)


def test_vectorize_loop_hosting_a_stage():
    wl, s, T1, T2, out = chain()
    i, j = out.op.axis
    s[out].vectorize(j)
    s[T2].compute_at(s[out], j)
    with pytest.raises((IRVerifyError, ScheduleError), match=r"not innermost"):
        schedule.lower(s, wl.args)


def test_nested_parallel_loops():
    wl, s, st, i, j, k = matmul()
    st.parallel(i)
    st.parallel(j)
    with pytest.raises((IRVerifyError, ScheduleError), match=r"parallel loop 'j' nested in another parallel loop"):
        schedule.lower(s, wl.args)


def test_build_bind_for_cpu():
    wl, s, st, i, j, k = matmul()
    st.bind(i, "blockIdx.x")
    st.bind(j, "threadIdx.x")
    with pytest.raises(backends.BuildError, match=r"bound to blockIdx.x; schedules that bind GPU threads build with target='cuda'"):
        backends.build(s, wl.args, target="cpu")


def test_build_unknown_target():
    wl, s, st, i, j, k = matmul()
    with pytest.raises(ValueError, match=r"unknown target 'tpu'"):
        backends.build(s, wl.args, target="tpu")
