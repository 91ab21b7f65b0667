"""The IR verifier: accepts what lowering produces, rejects hand-built broken IR."""
from __future__ import annotations

import pytest

import schedule
import te
from schedule import IRVerifyError, ir
from schedule.ir import Allocate, Buffer, BufferLoad, BufferStore, For, IfThenElse, LoweredFunc, seq
from te.expr import Const, Var


def buffers():
    a = Buffer("a", (4, 3), "float32", is_arg=True)
    b = Buffer("b", (4, 3), "float32", is_arg=True)
    return a, b


def copy_nest(a, b, i, j, load_idx=None, store_idx=None, kind_i=ir.SERIAL, kind_j=ir.SERIAL):
    load = BufferLoad(a, load_idx or (i, j), "float32")
    store = BufferStore(b, store_idx or (i, j), load)
    return For(i, Const(4), kind_i, For(j, Const(3), kind_j, store))


def test_well_formed_ir_passes():
    a, b = buffers()
    i, j = Var("i"), Var("j")
    t = Buffer("t", (3,), "float32")
    body = For(i, Const(4), ir.PARALLEL, Allocate(t, seq(
        For(j, Const(3), ir.VECTORIZED, BufferStore(t, (j,), BufferLoad(a, (i, j), "float32"))),
        IfThenElse(i < 3, BufferStore(b, (i, Const(0)), BufferLoad(t, (Const(2),), "float32"))),
    )))
    schedule.verify(LoweredFunc("ok", (a, b), body))


def test_unbound_variable():
    a, b = buffers()
    i, j, stray = Var("i"), Var("j"), Var("stray")
    func = LoweredFunc("f", (a, b), copy_nest(a, b, i, j, load_idx=(i, stray)))
    with pytest.raises(IRVerifyError, match=r"f: variable 'stray' used outside any loop binding it"):
        schedule.verify(func)


def test_variable_used_after_its_loop():
    a, b = buffers()
    i, j = Var("i"), Var("j")
    after = BufferStore(b, (Const(0), Const(0)), BufferLoad(a, (i, Const(0)), "float32"))
    func = LoweredFunc("f", (a, b), seq(copy_nest(a, b, i, j), after))
    with pytest.raises(IRVerifyError, match=r"variable 'i' used outside any loop"):
        schedule.verify(func)


def test_unbound_variable_in_guard():
    a, b = buffers()
    i, j, n = Var("i"), Var("j"), Var("n")
    func = LoweredFunc("f", (a, b), For(i, Const(4), ir.SERIAL, IfThenElse(i < n, For(
        j, Const(3), ir.SERIAL, BufferStore(b, (i, j), Const(0.0, "float32"))))))
    with pytest.raises(IRVerifyError, match=r"variable 'n'"):
        schedule.verify(func)


def test_undeclared_buffer_load():
    a, b = buffers()
    ghost = Buffer("ghost", (4, 3), "float32")
    i, j = Var("i"), Var("j")
    func = LoweredFunc("f", (a, b), copy_nest(ghost, b, i, j))
    with pytest.raises(IRVerifyError, match=r"load of buffer 'ghost', which is neither a parameter nor allocated here"):
        schedule.verify(func)


def test_undeclared_buffer_store():
    a, b = buffers()
    i, j = Var("i"), Var("j")
    func = LoweredFunc("f", (a,), copy_nest(a, b, i, j))
    with pytest.raises(IRVerifyError, match=r"store of buffer 'b'"):
        schedule.verify(func)


def test_buffer_used_outside_its_allocation():
    a, b = buffers()
    t = Buffer("t", (4, 3), "float32")
    i, j = Var("i"), Var("j")
    func = LoweredFunc("f", (a, b), seq(Allocate(t, copy_nest(a, t, i, j)), copy_nest(t, b, Var("i"), Var("j"))))
    with pytest.raises(IRVerifyError, match=r"load of buffer 't'"):
        schedule.verify(func)


@pytest.mark.parametrize("where", ["load", "store"])
def test_wrong_index_arity(where):
    a, b = buffers()
    i, j = Var("i"), Var("j")
    kw = {"load_idx": (i,)} if where == "load" else {"store_idx": (i, j, Const(0))}
    func = LoweredFunc("f", (a, b), copy_nest(a, b, i, j, **kw))
    dims = "1 indices for 2 dims" if where == "load" else "3 indices for 2 dims"
    with pytest.raises(IRVerifyError, match=rf"{where} of '{'a' if where == 'load' else 'b'}' with {dims}"):
        schedule.verify(func)


def test_constant_index_out_of_range():
    a, b = buffers()
    i, j = Var("i"), Var("j")
    func = LoweredFunc("f", (a, b), copy_nest(a, b, i, j, load_idx=(i, Const(3))))
    with pytest.raises(IRVerifyError, match=r"constant index 3 out of range for 'a' dim of extent 3"):
        schedule.verify(func)


def test_non_positive_extent():
    a, b = buffers()
    i = Var("i")
    func = LoweredFunc("f", (a, b), For(i, Const(0), ir.SERIAL, BufferStore(b, (i, i), Const(0.0, "float32"))))
    with pytest.raises(IRVerifyError, match=r"loop 'i' has extent 0"):
        schedule.verify(func)


def test_nested_parallel():
    a, b = buffers()
    i, j = Var("i"), Var("j")
    func = LoweredFunc("f", (a, b), copy_nest(a, b, i, j, kind_i=ir.PARALLEL, kind_j=ir.PARALLEL))
    with pytest.raises(IRVerifyError, match=r"parallel loop 'j' nested in another parallel loop"):
        schedule.verify(func)


def test_vectorized_loop_not_innermost():
    a, b = buffers()
    i, j = Var("i"), Var("j")
    func = LoweredFunc("f", (a, b), copy_nest(a, b, i, j, kind_i=ir.VECTORIZED))
    with pytest.raises(IRVerifyError, match=r"vectorized loop 'i' is not innermost"):
        schedule.verify(func)


def test_lowered_library_schedules_verify():
    """Default schedules of every library workload lower to verified IR."""
    cases = [
        ("matmul", dict(M=5, N=6, K=7)),
        ("batch_matmul", dict(B=2, M=3, N=4, K=5)),
        ("dense", dict(M=3, N=4, K=5)),
        ("conv2d", dict(N=1, C=2, H=5, W=5, K=3, R=3, S=3, padding=1)),
        ("depthwise_conv2d", dict(N=1, C=2, H=5, W=5, R=3, S=3, padding=1)),
        ("softmax", dict(shape=[3, 4])),
        ("pool2d", dict(N=1, C=2, H=5, W=5, kernel=2, padding=1, pool_type="avg")),
        ("elementwise", dict(op="sigmoid", shape=[3, 4])),
        ("elementwise_chain", dict(shape=[3, 4])),
    ]
    for name, params in cases:
        wl = te.create_workload(name, **params)
        func = schedule.lower(schedule.create_schedule(wl.outputs), wl.args)
        schedule.verify(func)
        assert [p.name for p in func.params] == [t.name for t in wl.args]
