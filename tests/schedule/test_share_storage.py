"""Buffers whose lifetimes do not overlap share storage (``passes.share_storage``): at the
root, and among the stages computed at one loop."""
from __future__ import annotations

import numpy as np

import schedule
import te
from schedule import ir
from schedule.explain import explain
from schedule.passes.share_storage import plan_slots, share_storage_in_loops
from sched_helpers import check, tensor, workload


def _chain(n: int = 6, cols: int = 50):
    """x -> a = exp(x) -> s = row sums of a -> b = log(s) -> c = b * 2 -> y = x * c: a and c
    are never live together, nor are s and y's inputs after c."""
    X = te.placeholder((n, cols), "float32", "X")
    A = te.compute((n, cols), lambda i, j: te.exp(X[i, j] * 0.1), name="A")
    k = te.reduce_axis((0, cols), "k")
    S = te.compute((n,), lambda i: te.sum(A[i, k], axis=k), name="S")
    B = te.compute((n,), lambda i: te.log(S[i]), name="B")
    C = te.compute((n, cols), lambda i, j: X[i, j] * B[i], name="C")
    Y = te.compute((n, cols), lambda i, j: te.exp(C[i, j] * 0.01), name="Y")
    return workload([X, Y]), Y


def _root_allocations(func) -> list[ir.Buffer]:
    out, body = [], func.body
    while isinstance(body, ir.Allocate):
        out.append(body.buffer)
        body = body.body
    return out


def test_an_unfused_chain_reuses_dead_intermediates_and_matches():
    wl, Y = _chain()
    s = schedule.create_schedule(Y)
    module = check(s, wl)
    names = [b.name for b in _root_allocations(module.func)]
    # A (6x50) is dead once S is summed: C (6x50) takes its storage. S and B are each live
    # in a statement where the other is, or A or C is.
    assert sorted(names) == ["A_C", "B", "S"], names
    unshared = schedule.lower(s, wl.args, pipeline=schedule.passes.pipeline("cpu")[:-2])
    assert explain(module.func.body).peak_bytes < explain(unshared.body).peak_bytes


def test_buffers_live_in_one_statement_never_share():
    a, b, c = (ir.Buffer(n, (4,), "float32") for n in "abc")
    i = te.var("i")
    out = ir.Buffer("out", (4,), "float32", is_arg=True)

    def copy(dst, src):
        return ir.For(i, te.const(4), ir.SERIAL, ir.BufferStore(dst, (i,), ir.BufferLoad(src, (i,), "float32")))

    stmts = (copy(a, out), copy(b, a), copy(c, b), copy(out, c))
    slots = plan_slots([a, b, c], stmts)
    assert sorted(sorted(m.name for m in s.members) for s in slots) == [["a", "c"], ["b"]]
    other = ir.Buffer("d", (4,), "int32")  # another dtype never shares
    slots = plan_slots([a, other], (copy(a, out), ir.For(i, te.const(4), ir.SERIAL,
                                                           ir.BufferStore(other, (i,), te.const(1, "int32")))))
    assert all(len(s.members) == 1 for s in slots)


def _loop_allocations(func) -> list[ir.Buffer]:
    """The buffers allocated below the root, in the order they are met."""
    root = set(_root_allocations(func))
    return [n.buffer for n in ir.walk(func.body) if isinstance(n, ir.Allocate) and n.buffer not in root]


def _chain_per_row(wl, Y):
    """The chain's schedule with every intermediate computed per row of Y."""
    s = schedule.create_schedule(Y)
    for name in "ASBC":
        s[tensor(wl, name)].compute_at(s[Y], Y.op.axis[0])
    return s


def test_stages_computed_at_one_loop_share_its_storage_where_their_lifetimes_allow():
    """Per row: A's row is dead once S is summed, so C's row takes its storage, as at the
    root; S and B (one value each) keep their own."""
    wl, Y = _chain()
    s = _chain_per_row(wl, Y)
    module = check(s, wl)
    assert not _root_allocations(module.func)
    assert sorted(b.name for b in _loop_allocations(module.func)) == ["A_C", "B", "S"]
    shared = next(b for b in _loop_allocations(module.func) if b.name == "A_C")
    assert shared.shape == (50,)
    unshared = schedule.lower(s, wl.args, pipeline=schedule.passes.pipeline("cpu")[:-2])
    assert sorted(b.name for b in _loop_allocations(unshared)) == ["A", "B", "C", "S"]
    assert explain(module.func.body).peak_bytes < explain(unshared.body).peak_bytes


def test_only_global_buffers_share_below_the_root():
    """A local tile stays an array of its own (registers), whatever its lifetime."""
    i, j = te.var("i"), te.var("j")
    out = ir.Buffer("out", (16,), "float32", is_arg=True)
    bufs = {n: ir.Buffer(n, (16,), "float32", scope) for n, scope in  # a cache line each
            (("a", "local"), ("b", "global"), ("c", "local"), ("d", "global"))}

    def copy(dst, src):
        return ir.For(j, te.const(16), ir.SERIAL, ir.BufferStore(dst, (j,), ir.BufferLoad(src, (j,), "float32")))

    names = "abcd"
    chain: ir.Stmt = ir.seq(copy(bufs["a"], out), *(copy(bufs[b], bufs[a]) for a, b in zip(names, names[1:])),
                            copy(out, bufs["d"]))
    for n in reversed(names):
        chain = ir.Allocate(bufs[n], chain)
    body = share_storage_in_loops(ir.For(i, te.const(3), ir.SERIAL, chain))
    found = sorted(n.buffer.name for n in ir.walk(body) if isinstance(n, ir.Allocate))
    assert found == ["a", "b_d", "c"], found  # a and c are disjoint too, but local


def test_fused_schedules_keep_their_loop_buffers_apart_while_live():
    """Softmax per row: the max is dead once the exponentials are taken and the sum is
    taken after them, but one value each is below what is worth sharing; the
    exponentials are live throughout."""
    wl = te.create_workload("softmax", shape=[8, 40])
    Y = wl.outputs[0]
    s = schedule.create_schedule(Y)
    for name in ("softmax_max", "softmax_exp", "softmax_sum"):
        stage = next(op for op in te.topological_order(wl.outputs) if op.name == name)
        s[stage].compute_at(s[Y], Y.op.axis[0])
    module = check(s, wl)
    assert not _root_allocations(module.func)
    assert sorted(b.name for b in _loop_allocations(module.func)) == ["softmax_exp", "softmax_max", "softmax_sum"]
    got = np.empty((8, 40), np.float32)
    x = wl.random_inputs(0)[0]
    module(x, got)
    np.testing.assert_allclose(got, wl.reference(x)[0], rtol=1e-5, atol=1e-6)
