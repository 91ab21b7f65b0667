"""Expression API: dtype rules, printer output (golden strings), DAG helpers."""
import pytest

import te


@pytest.fixture
def tensors():
    return dict(
        F=te.placeholder((4, 4), "float32", "F"),
        H=te.placeholder((4, 4), "float16", "H"),
        I=te.placeholder((4, 4), "int32", "I"),
        B8=te.placeholder((4, 4), "int8", "B8"),
    )


# ---------------------------------------------------------------- dtype rules


def test_mixing_float32_and_float16_names_both_dtypes(tensors):
    i, j = te.var("i"), te.var("j")
    with pytest.raises(te.DTypeError, match=r"float32.*float16") as info:
        tensors["F"][i, j] + tensors["H"][i, j]
    assert isinstance(info.value, te.TEError)


def test_int_literals_adapt_to_float_and_narrow_int_expressions(tensors):
    i = te.var("i")
    e = tensors["F"][i, 0] + 1
    assert e.dtype == "float32" and isinstance(e.b, te.Const) and e.b.dtype == "float32"
    assert (2 * tensors["H"][i, 0]).dtype == "float16"
    assert (tensors["B8"][i, 0] + 3).dtype == "int8"
    assert (tensors["F"][i, 0] * 0.5).dtype == "float32"


def test_float_literal_never_becomes_an_int(tensors):
    with pytest.raises(te.DTypeError, match="literal 1.5 does not fit dtype int32"):
        tensors["I"][0, 0] + 1.5


def test_int_literal_out_of_range_for_int8(tensors):
    with pytest.raises(te.DTypeError, match="literal 300 does not fit dtype int8"):
        tensors["B8"][0, 0] + 300


def test_true_division_on_ints_raises(tensors):
    with pytest.raises(te.DTypeError, match="'/' on integers"):
        tensors["I"][0, 0] / 2
    i = te.var("i")
    with pytest.raises(te.DTypeError, match="'/' on integers"):
        i / 2


def test_floor_division_on_floats_raises(tensors):
    with pytest.raises(te.DTypeError, match="'//' needs integers, got float32"):
        tensors["F"][0, 0] // 2


def test_exp_on_int_raises(tensors):
    with pytest.raises(te.DTypeError, match="te.exp needs a float argument, got int32"):
        te.exp(tensors["I"][0, 0])


def test_arithmetic_on_bool_raises(tensors):
    i = te.var("i")
    with pytest.raises(te.DTypeError, match="not defined on bool"):
        (i < 2) + (i < 3)


def test_cast_changes_dtype_and_is_a_noop_for_same_dtype(tensors):
    i = te.var("i")
    x = tensors["B8"][i, 0]
    assert te.cast("int32", x).dtype == "int32"
    assert te.cast("int8", x) is x
    with pytest.raises(te.DTypeError, match="unsupported dtype 'float8'"):
        te.cast("float8", x)


def test_expression_has_no_truth_value():
    i = te.var("i")
    with pytest.raises(te.TEError, match="no truth value"):
        if i < 3:
            pass


def test_if_then_else_needs_bool_condition_and_matching_branches(tensors):
    i = te.var("i")
    with pytest.raises(te.DTypeError, match="if_then_else needs a bool condition"):
        te.if_then_else(i, 1, 0)
    with pytest.raises(te.DTypeError, match="float32.*float16"):
        te.if_then_else(i < 2, tensors["F"][i, 0], tensors["H"][i, 0])


def test_index_dtype_promotion(tensors):
    # An int8 index is converted to the int32 index dtype; a float index is rejected.
    read = tensors["F"][tensors["B8"][0, 0], 1]
    assert read.indices[0].dtype == "int32"
    with pytest.raises(te.ShapeError, match="must be an integer expression, got float32"):
        tensors["F"][tensors["F"][0, 0], 0]


def test_structural_equal():
    A = te.placeholder((4,), name="A")
    i = te.var("i")
    assert te.structural_equal(A[i] * 2.0 + 1.0, A[i] * 2.0 + 1.0)
    assert not te.structural_equal(A[i] * 2.0, A[i] * 3.0)
    assert not te.structural_equal(A[i] + 1.0, A[i] - 1.0)


# ---------------------------------------------------------------- printer (golden strings)


def test_printer_golden_strings():
    A = te.placeholder((8, 8), "float32", "A")
    B = te.placeholder((8, 8), "float32", "B")
    i, j = te.var("i"), te.var("j")
    cases = [
        ((i + j) * 2 - i // 3 % 4, "(i + j) * 2 - i // 3 % 4"),
        (i - (j - 1), "i - (j - 1)"),
        (te.max(i, j), "max(i, j)"),
        (te.if_then_else(i < 3, A[i, j], 0.0), "select(i < 3, A[i, j], 0.0f)"),
        (te.exp(A[i, j]) / 2.0, "exp(A[i, j]) / 2.0f"),
        (te.cast("float16", A[i, j]), "float16(A[i, j])"),
        (te.const(1.5, "float64"), "float64(1.5)"),
        (~(i < j) & (j > 1), "!(i < j) && j > 1"),
        ((i < 1) | (j >= 2) & te.not_equal(i, j), "i < 1 || j >= 2 && i != j"),
        (te.equal(i % 2, 0), "i % 2 == 0"),
        (A[i + 1, j * 2] * B[j, i], "A[i + 1, j * 2] * B[j, i]"),
    ]
    for expr, golden in cases:
        assert te.expr_to_str(expr) == golden
        assert str(expr) == golden


def test_compute_to_str_goldens():
    wl = te.create_workload("matmul", M=4, N=4, K=4)
    assert te.compute_to_str(wl.outputs[0]) == "C[i, j] = sum(A[i, k] * B[k, j], axis=[k])"
    assert te.compute_to_str(wl.inputs[0]) == "A = placeholder((4, 4), float32)"
    conv = te.create_workload("conv2d", N=1, C=2, H=5, W=5, K=2, R=3, S=3, padding=1, stride=2)
    out = conv.outputs[0]
    assert te.compute_to_str(out) == (
        "conv2d[n, k, y, x] = sum(pad[n, rc, y * 2 + ry, x * 2 + rx] * kernel[k, rc, ry, rx], axis=[rc, ry, rx])"
    )
    assert te.compute_to_str(out.op.input_tensors[0]) == (
        "pad[i0, i1, i2, i3] = select(i2 >= 1 && i2 < 6 && i3 >= 1 && i3 < 6, data[i0, i1, i2 - 1, i3 - 1], 0.0f)"
    )
    sm = te.create_workload("softmax", shape=[3, 5]).outputs[0]
    assert te.compute_to_str(sm) == "softmax[i0, i1] = softmax_exp[i0, i1] / softmax_sum[i0]"
    k = te.reduce_axis((0, 4), "k")
    A = te.placeholder((4,), "float32", "A")
    masked = te.compute((2,), lambda i: te.max(A[k], axis=k, where=k > i), name="m")
    assert te.compute_to_str(masked) == "m[i] = max(A[k], axis=[k], where=k > i)"


# ---------------------------------------------------------------- DAG helpers


def test_dag_helpers_on_softmax():
    wl = te.create_workload("softmax", shape=[2, 3])
    (X,), (Y,) = wl.inputs, wl.outputs
    order = te.topological_order(Y)
    names = [op.name for op in order]
    assert names == ["X", "softmax_max", "softmax_exp", "softmax_sum", "softmax"]
    ops = dict(zip(names, order))
    assert te.producers(Y.op) == [ops["softmax_exp"], ops["softmax_sum"]]
    assert te.producers(ops["softmax_exp"]) == [X.op, ops["softmax_max"]]
    assert te.producers(X.op) == []
    cons = te.consumers(Y)
    assert cons[X.op] == [ops["softmax_max"], ops["softmax_exp"]]
    assert cons[ops["softmax_exp"]] == [ops["softmax_sum"], ops["softmax"]]
    assert cons[Y.op] == []
    assert te.input_placeholders(Y) == [X]


def test_dag_helpers_on_conv2d_with_pad():
    wl = te.create_workload("conv2d", N=1, C=2, H=5, W=5, K=3, R=3, S=3, padding=1)
    data, kernel = wl.inputs
    (out,) = wl.outputs
    order = te.topological_order(wl.outputs)
    assert [op.name for op in order] == ["data", "pad", "kernel", "conv2d"]
    pad = order[1]
    assert te.producers(out.op) == [pad, kernel.op]
    assert te.producers(pad) == [data.op]
    cons = te.consumers(wl.outputs)
    assert cons[data.op] == [pad] and cons[pad] == [out.op] and cons[kernel.op] == [out.op]
    assert te.input_placeholders(wl.outputs) == [data, kernel]


def test_topological_order_of_shared_producer_lists_it_once():
    A = te.placeholder((3,), name="A")
    B = te.compute((3,), lambda i: A[i] + 1.0, name="B")
    C = te.compute((3,), lambda i: B[i] * 2.0, name="C")
    D = te.compute((3,), lambda i: B[i] - 1.0, name="D")
    assert [op.name for op in te.topological_order([C, D])] == ["A", "B", "C", "D"]
    assert te.consumers([C, D])[B.op] == [C.op, D.op]
