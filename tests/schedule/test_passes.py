"""The pass layer of lowering: visitor/mutator bases, named pipelines, tracing, no writes onto te nodes."""
from __future__ import annotations

import dataclasses

import pytest

import schedule
import te
from schedule import ir, passes
from schedule.ir import Buffer, BufferLoad, BufferStore, For, LoweredFunc
from schedule.passes import GPUProgram, Pass, StmtMutator, StmtVisitor
from schedule.passes import verify
from te.expr import Const, Expr, post_order


def _matmul(M=32, N=24, K=16):
    A = te.placeholder((M, K), name="A")
    B = te.placeholder((K, N), name="B")
    k = te.reduce_axis((0, K), name="k")
    C = te.compute((M, N), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    return A, B, C


def _tiled_matmul():
    A, B, C = _matmul(13, 17, 11)  # nothing divides: tail guards and tail bounds
    s = schedule.create_schedule(C)
    io, jo, ii, ji = s[C].tile(C.op.axis[0], C.op.axis[1], 4, 8)
    ko, ki = s[C].split(C.op.reduce_axis[0], factor=4)
    s[C].reorder(io, jo, ko, ii, ki, ji)
    s[C].vectorize(ji)
    s[C].parallel(io)
    return s, [A, B, C]


def _gpu_matmul():
    A, B, C = _matmul(64, 64, 16)
    s = schedule.create_schedule(C)
    io, jo, ii, ji = s[C].tile(C.op.axis[0], C.op.axis[1], 8, 8)
    s[C].bind(io, "blockIdx.y")
    s[C].bind(jo, "blockIdx.x")
    s[C].bind(ii, "threadIdx.y")
    s[C].bind(ji, "threadIdx.x")
    return s, [A, B, C]


# ---------------------------------------------------------------- visitor and mutator


class _StoreLoops(StmtVisitor):
    """Records the enclosing loops (name, extent, kind, tag) at every store."""

    def __init__(self):
        super().__init__()
        self.seen: list[tuple[str, list[tuple]]] = []

    def visit_BufferStore(self, s):
        self.seen.append((s.buffer.name, [(lp.var.name, ir.const_int(lp.extent), lp.kind, lp.thread_tag)
                                          for lp in self.loops]))
        super().visit_BufferStore(s)


def test_visitor_tracks_the_enclosing_loops_at_each_store():
    i, j = te.var("i"), te.var("j")
    buf = Buffer("X", (4, 8), "float32", is_arg=True)
    store = BufferStore(buf, (i, j), Const(1.0, "float32"))
    body = For(i, Const(4), ir.PARALLEL, ir.seq(
        For(j, Const(8), ir.VECTORIZED, store),
        BufferStore(buf, (i, Const(0)), Const(2.0, "float32")),
    ))
    v = _StoreLoops()
    v.visit(body)
    assert v.seen == [
        ("X", [("i", 4, ir.PARALLEL, None), ("j", 8, ir.VECTORIZED, None)]),
        ("X", [("i", 4, ir.PARALLEL, None)]),
    ]
    assert v.loops == []  # the stack unwinds


def test_visitor_sees_thread_bindings_of_a_gpu_kernel():
    program = schedule.lower(*_gpu_matmul(), pipeline="gpu")
    v = _StoreLoops()
    v.visit(program.kernels[0].body)
    tags = {name: [lp[3] for lp in loops] for name, loops in v.seen}
    assert tags["C"][:4] == ["blockIdx.y", "blockIdx.x", "threadIdx.y", "threadIdx.x"]


def test_a_mutator_that_changes_nothing_returns_the_same_object():
    func = schedule.lower(*_tiled_matmul())
    assert StmtMutator().visit(func.body) is func.body
    program = schedule.lower(*_gpu_matmul(), pipeline="gpu")
    body = program.kernels[0].body
    assert StmtMutator().visit(body) is body


def test_a_mutator_rebuilds_only_the_changed_path():
    i = te.var("i")
    a = Buffer("a", (4,), "float32", is_arg=True)
    b = Buffer("b", (4,), "float32", is_arg=True)
    keep = For(i, Const(4), ir.SERIAL, BufferStore(a, (i,), Const(1.0, "float32")))
    j = te.var("j")
    change = For(j, Const(4), ir.SERIAL, BufferStore(b, (j,), Const(1.0, "float32")))
    body = ir.seq(keep, change)

    class Twice(StmtMutator):
        def visit_BufferStore(self, s):
            if s.buffer is not b:
                return s
            return BufferStore(s.buffer, s.indices, Const(2.0, "float32"))

    out = Twice().visit(body)
    assert out is not body
    assert out.stmts[0] is keep  # untouched sibling: the same object
    assert out.stmts[1] is not change and out.stmts[1].body.value.value == 2.0


# ---------------------------------------------------------------- pipelines


@pytest.mark.parametrize("name", ["cpu", "gpu"])
def test_each_pipeline_is_a_list_of_named_passes(name):
    steps = passes.pipeline(name)
    assert isinstance(steps, list) and steps
    assert all(isinstance(p, Pass) for p in steps)
    names = [p.name for p in steps]
    assert len(set(names)) == len(names)
    assert all(p.doc for p in steps)  # every pass says why it exists
    assert steps == {"cpu": passes.CPU_PIPELINE, "gpu": passes.CPU_PIPELINE + passes.GPU_PIPELINE}[name]
    assert steps is not passes.pipeline(name)  # a copy: editing it changes nothing


def test_pipeline_names_and_order():
    assert [p.name for p in passes.pipeline("cpu")] == [
        "remove_unit_loops", "simplify_bounds", "specialize_rows", "tail_bounds", "promote_accumulators", "share_storage", "verify"]
    assert [p.name for p in passes.pipeline("gpu")] == [
        "remove_unit_loops", "simplify_bounds", "specialize_rows", "tail_bounds", "promote_accumulators", "share_storage", "verify",
        "split_kernels", "constant_trip_loops", "inject_virtual_threads", "insert_barriers", "launch_dims",
        "verify_kernel"]
    with pytest.raises(ValueError, match="unknown pipeline"):
        passes.pipeline("tpu")


def test_every_cpu_pass_keeps_the_ir_valid():
    func = schedule.lower(*_tiled_matmul(), pipeline=[])  # the nest as built
    for p in passes.pipeline("cpu"):
        func = p(func)
        verify(func)
    assert str(func) == str(schedule.lower(*_tiled_matmul()))


def test_lower_with_an_explicit_list_runs_just_those_passes():
    built = schedule.lower(*_tiled_matmul(), pipeline=[])
    assert any(isinstance(n, ir.IfThenElse) for n in ir.walk(built.body))  # tail guards, not yet bounds
    bounded = schedule.lower(*_tiled_matmul(), pipeline=passes.pipeline("cpu")[:4])
    assert str(bounded) != str(built)


# ---------------------------------------------------------------- tracing


def test_trace_prints_one_section_per_pass_in_order(capsys):
    func = schedule.lower(*_tiled_matmul(), trace=True)
    out = capsys.readouterr().out
    headers = [line for line in out.splitlines() if line.startswith("# ---- after ")]
    assert [h.removeprefix("# ---- after ") for h in headers] == ["build"] + [p.name for p in passes.CPU_PIPELINE]
    assert out.rstrip().endswith(str(func))


def test_trace_callable_receives_each_pass_name_and_ir():
    sections: list[tuple[str, str]] = []
    program = schedule.lower(*_gpu_matmul(), pipeline="gpu", trace=lambda name, text: sections.append((name, text)))
    assert isinstance(program, GPUProgram)
    names = [n for n, _ in sections]
    assert names == ["build"] + [p.name for p in passes.CPU_PIPELINE + passes.GPU_PIPELINE]
    assert sections[-1][1] == str(program)
    assert str(program) == str(passes.lower_gpu(schedule.lower(*_gpu_matmul())))  # same as the two steps


def test_lower_gpu_traces_the_gpu_passes():
    func = schedule.lower(*_gpu_matmul())
    sections: list[str] = []
    program = passes.lower_gpu(func, trace=lambda name, text: sections.append(name))
    assert sections == [p.name for p in passes.GPU_PIPELINE]
    assert str(program) == str(passes.lower_gpu(func))
    assert program.kernels[0].block == (8, 8, 1)


# ---------------------------------------------------------------- te nodes stay untouched


def _expr_nodes(stmt) -> list[Expr]:
    nodes = []
    for s in ir.walk(stmt):
        exprs = []
        if isinstance(s, For):
            exprs = [s.extent]
        elif isinstance(s, ir.IfThenElse):
            exprs = [s.condition]
        elif isinstance(s, BufferStore):
            exprs = [*s.indices, s.value]
        for e in exprs:
            nodes.extend(post_order(e))
    return nodes


def _extra_attributes(node) -> set[str]:
    """Instance attributes beyond the node's dataclass fields (a cache written onto it)."""
    fields = {f.name for f in dataclasses.fields(node)}
    return set(getattr(node, "__dict__", {})) - fields


def test_lowering_writes_no_attribute_onto_te_nodes():
    s, args = _tiled_matmul()
    C = args[-1]
    body_nodes = list(post_order(C.op.body))
    before = [dict(vars(n)) for n in body_nodes]
    func = schedule.lower(s, args)
    assert [dict(vars(n)) for n in body_nodes] == before
    program = passes.lower_gpu(schedule.lower(*_gpu_matmul()))
    for stmt in [func.body] + [k.body for k in program.kernels]:
        nodes = _expr_nodes(stmt)
        assert nodes and any(isinstance(n, BufferLoad) for n in nodes)
        dirty = {type(n).__name__: _extra_attributes(n) for n in nodes if _extra_attributes(n)}
        assert dirty == {}


def test_lowered_functions_are_plain_data():
    func = schedule.lower(*_tiled_matmul())
    assert isinstance(func, LoweredFunc)
    assert str(func) == str(schedule.lower(*_tiled_matmul()))  # deterministic across lowerings
