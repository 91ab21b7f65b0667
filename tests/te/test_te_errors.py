"""Every bad input raises a te.TEError subclass with a message that names the problem.

Never IndexError, AttributeError or a bare TypeError/ValueError from deep inside.
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import te


def A2():
    return te.placeholder((4, 5), name="A")


def ph(shape, dtype="float32", name="X"):
    return te.placeholder(shape, dtype, name)


def reduce_axis_outside_reduction():
    A = te.placeholder((4,), name="A")
    k = te.reduce_axis((0, 4), "k")
    return te.compute((4,), lambda i: A[k] + 1.0, name="bad")


def nested_reduction():
    A = te.placeholder((4,), name="A")
    k = te.reduce_axis((0, 4), "k")
    return te.compute((4,), lambda i: te.sum(A[k], axis=k) + 1.0, name="bad")


def sum_over_spatial_axis():
    A = te.placeholder((4,), name="A")
    return te.compute((4,), lambda i: te.sum(A[i], axis=i), name="bad")


# (id, thunk, exception type, regex the message must match)
CASES = [
    # ---- arity and shapes of the core API
    ("index-arity", lambda: A2()[0], te.ShapeError, r"tensor 'A' has 2 dimension\(s\) \(4, 5\), indexed with 1"),
    ("index-arity-3", lambda: A2()[0, 1, 2], te.ShapeError, r"indexed with 3 index"),
    ("const-index-range", lambda: A2()[4, 0], te.ShapeError, r"constant index 4 out of range for dimension 0"),
    ("slice-index", lambda: A2()[0:2, 0], te.ShapeError, r"slices are not supported"),
    ("placeholder-zero", lambda: te.placeholder((3, 0)), te.ShapeError, r"\[1\] must be positive, got 0"),
    ("placeholder-float", lambda: te.placeholder((3, 2.5)), te.ShapeError, r"must be a positive int, got 2.5"),
    ("placeholder-empty", lambda: te.placeholder(()), te.ShapeError, r"at least one dimension"),
    ("placeholder-dtype", lambda: te.placeholder((3,), "float8"), te.DTypeError, r"unsupported dtype 'float8'"),
    ("reduce-axis-negative", lambda: te.reduce_axis((0, -1)), te.ShapeError, r"extent \(stop - start\) must be positive, got -1"),
    ("reduce-axis-float", lambda: te.reduce_axis((0, 2.5), "r"), te.ShapeError, r"reduce_axis 'r': stop must be an int"),
    ("reduce-axis-shape", lambda: te.reduce_axis("abc"), te.ShapeError, r"domain must be \(start, stop\)"),
    ("compute-arity", lambda: te.compute((2, 3), lambda i: i), te.ShapeError, r"2-d shape got a function of 1 argument"),
    ("compute-shape", lambda: te.compute((2, -3), lambda i, j: i), te.ShapeError, r"must be positive, got -3"),
    ("reduce-axis-outside", reduce_axis_outside_reduction, te.ReductionError, r"reduce axis used outside a reduction"),
    ("nested-reduction", nested_reduction, te.ReductionError, r"must be the whole body"),
    ("sum-spatial-axis", sum_over_spatial_axis, te.ReductionError, r"is not a te.reduce_axis"),
    ("sum-no-axis", lambda: te.sum(A2()[0, 0]), te.ReductionError, r"te.sum needs axis="),
    ("tensor-as-scalar", lambda: A2() + 1, te.TEError, r"tensor 'A' used as a scalar"),
    ("mixed-dtypes", lambda: ph((2,))[0] + ph((2,), "float16")[0], te.DTypeError, r"mixes dtypes float32 .* and float16"),
    ("evaluate-shape", lambda: te.evaluate(te.ops.relu(ph((2, 3))), [np.zeros((3, 2), np.float32)]),
     te.ShapeError, r"input 'X': expected shape \(2, 3\), got \(3, 2\)"),
    ("evaluate-dtype", lambda: te.evaluate(te.ops.relu(ph((2,))), [np.zeros(2, np.float64)]),
     te.EvaluationError, r"expected dtype float32, got float64"),
    ("evaluate-count", lambda: te.evaluate(te.ops.relu(ph((2,))), []), te.EvaluationError, r"expected 1 input array"),
    ("evaluate-missing", lambda: te.evaluate(te.ops.relu(ph((2,))), {}), te.EvaluationError, r"no input array given for placeholder\(s\) X"),
    # ---- plain op functions
    ("matmul-inner", lambda: te.ops.matmul(ph((4, 5), name="A"), ph((6, 7), name="B")), te.ShapeError,
     r"^matmul: A is \(4, 5\) but B is \(6, 7\): inner dimensions 5 and 6 differ$"),
    ("matmul-inner-transposed", lambda: te.ops.matmul(ph((4, 5)), ph((4, 7)), transpose_a=False, transpose_b=True),
     te.ShapeError, r"inner dimensions 5 and 7 differ"),
    ("matmul-rank", lambda: te.ops.matmul(ph((4, 5, 6)), ph((5, 6))), te.ShapeError, r"matmul: A must be 2-d, got shape \(4, 5, 6\)"),
    ("matmul-not-tensor", lambda: te.ops.matmul(np.zeros((2, 2)), ph((2, 2))), te.ShapeError, r"matmul: A must be a te.Tensor"),
    ("matmul-dtypes", lambda: te.ops.matmul(ph((2, 2)), ph((2, 2), "float16")), te.DTypeError,
     r"matmul: A is float32 but B is float16"),
    ("matmul-bool", lambda: te.ops.matmul(ph((2, 2), "bool"), ph((2, 2), "bool")), te.DTypeError, r"matmul: the dtype of A"),
    ("matmul-narrow-out", lambda: te.ops.matmul(ph((2, 2), "int32"), ph((2, 2), "int32"), out_dtype="int8"),
     te.DTypeError, r"out_dtype int8 cannot accumulate int32"),
    ("batch-matmul-batch", lambda: te.ops.batch_matmul(ph((2, 3, 4)), ph((3, 4, 5))), te.ShapeError,
     r"batch extents 2 and 3 differ"),
    ("dense-k", lambda: te.ops.dense(ph((3, 4)), ph((5, 6))), te.ShapeError, r"dense: X is \(3, 4\) but W is \(5, 6\)"),
    ("dense-bias-shape", lambda: te.ops.dense(ph((3, 4)), ph((5, 4)), ph((4,))), te.ShapeError, r"bias must have shape \(5,\)"),
    ("dense-bias-dtype", lambda: te.ops.dense(ph((3, 4), "int8"), ph((5, 4), "int8"), ph((5,), "int8")),
     te.DTypeError, r"bias is int8 but the output is int32"),
    ("add-shape", lambda: te.ops.add(ph((2, 3)), ph((3, 2))), te.ShapeError, r"add: X is \(2, 3\) but Y is \(3, 2\)"),
    ("add-dtype", lambda: te.ops.add(ph((2,)), ph((2,), "int32")), te.DTypeError, r"add: X is float32 but Y is int32"),
    ("sigmoid-int", lambda: te.ops.sigmoid(ph((2,), "int32")), te.DTypeError, r"sigmoid: the dtype of X must be one of float16"),
    ("conv-channels", lambda: te.ops.conv2d_nchw(ph((1, 3, 5, 5)), ph((2, 4, 3, 3))), te.ShapeError,
     r"conv2d: .*input channels 3 and 4 differ"),
    ("conv-too-small", lambda: te.ops.conv2d_nchw(ph((1, 1, 3, 3)), ph((1, 1, 5, 5))), te.ShapeError,
     r"conv2d: output height is -1 for H=3, R=5, padding=0"),
    ("conv-stride-list", lambda: te.ops.conv2d_nhwc(ph((1, 5, 5, 1)), ph((1, 1, 1, 1)), stride=[1, 2, 3]),
     te.ShapeError, r"conv2d: stride must be an int or a list \[h, w\]"),
    ("depthwise-channels", lambda: te.ops.depthwise_conv2d_nchw(ph((1, 3, 5, 5)), ph((2, 1, 3, 3))), te.ShapeError,
     r"depthwise_conv2d: .*channels 3 and 2 differ"),
    ("pad-length", lambda: te.ops.pad(ph((2, 3)), [1]), te.ShapeError, r"pad: pad_before must list one int per dimension"),
    ("pad-negative", lambda: te.ops.pad(ph((2, 3)), [1, -1]), te.ShapeError, r"pad_before\[1\] must be a non-negative int"),
    ("pad-value", lambda: te.ops.pad(ph((2, 3), "int8"), [1, 1], value=1000), te.DTypeError,
     r"pad: value 1000 is not a scalar that fits the dtype int8 of X"),
    ("pad-float-into-int", lambda: te.ops.pad(ph((2, 3), "int32"), [1, 1], value=0.5), te.DTypeError, r"pad: value 0.5"),
    ("softmax-axis", lambda: te.ops.softmax(ph((2, 3)), axis=2), te.ShapeError, r"softmax: axis must be an int in \[-2, 2\)"),
    ("softmax-int", lambda: te.ops.softmax(ph((2, 3), "int32")), te.DTypeError, r"softmax: the dtype of X"),
    ("pool-type", lambda: te.ops.pool2d(ph((1, 1, 4, 4)), 2, pool_type="median"), te.WorkloadError,
     r"pool2d: unknown pool_type 'median'; expected one of 'max', 'avg'"),
    ("pool-layout", lambda: te.ops.pool2d(ph((1, 1, 4, 4)), 2, layout="CHWN"), te.WorkloadError, r"unknown layout 'CHWN'"),
    ("pool-pad-kernel", lambda: te.ops.pool2d(ph((1, 1, 4, 4)), 2, padding=2), te.ShapeError,
     r"padding 2 must be smaller than the kernel 2"),
    ("pool-avg-int", lambda: te.ops.pool2d(ph((1, 1, 4, 4), "int32"), 2, pool_type="avg"), te.DTypeError, r"avg pooling"),
    ("pool-too-small", lambda: te.ops.pool2d(ph((1, 1, 2, 8)), 3), te.ShapeError, r"pool2d: output height is 0 for H=2"),
    # ---- workload registry
    ("unknown-workload", lambda: te.create_workload("matmull", M=1), te.WorkloadError,
     r"unknown workload 'matmull'; registered workloads: .*conv2d.*matmul"),
    ("missing-param", lambda: te.create_workload("matmul", M=4, N=4), te.WorkloadError, r"missing parameter\(s\) K"),
    ("unknown-param", lambda: te.create_workload("matmul", M=4, N=4, K=4, Q=1), te.WorkloadError,
     r"unknown parameter\(s\) Q; it takes M, N, K"),
    ("non-json-param", lambda: te.create_workload("matmul", M=4, N=4, K=4, dtype=object()), te.WorkloadError,
     r"is not a number, string, bool or list"),
    ("matmul-M", lambda: te.create_workload("matmul", M=-3, N=4, K=4), te.ShapeError, r"^matmul: M must be a positive int, got -3$"),
    ("matmul-K-float", lambda: te.create_workload("matmul", M=3, N=4, K=4.0), te.ShapeError, r"matmul: K must be a positive int, got 4.0"),
    ("matmul-dtype", lambda: te.create_workload("matmul", M=3, N=4, K=4, dtype="float8"), te.DTypeError, r"matmul: dtype must be one of"),
    ("matmul-flag", lambda: te.create_workload("matmul", M=3, N=4, K=4, transpose_a="yes"), te.WorkloadError,
     r"matmul: transpose_a must be True or False, got 'yes'"),
    ("batch-matmul-B", lambda: te.create_workload("batch_matmul", B=0, M=3, N=4, K=4), te.ShapeError, r"batch_matmul: B must be a positive int"),
    ("dense-bias-flag", lambda: te.create_workload("dense", M=3, N=4, K=4, bias=1), te.WorkloadError, r"dense: bias must be True or False"),
    ("conv-layout", lambda: te.create_workload("conv2d", N=1, C=1, H=4, W=4, K=1, R=3, S=3, layout="XYZ"),
     te.WorkloadError, r"conv2d: unknown layout 'XYZ'; expected one of 'NCHW', 'NHWC'"),
    ("conv-output", lambda: te.create_workload("conv2d", N=1, C=1, H=3, W=9, K=1, R=5, S=3), te.ShapeError,
     r"conv2d: output height is -1 for H=3, R=5, padding=0, stride=1, dilation=1"),
    ("conv-output-width", lambda: te.create_workload("conv2d", N=1, C=1, H=9, W=4, K=1, R=1, S=3, dilation=2),
     te.ShapeError, r"conv2d: output width is 0 for W=4, S=3"),
    ("conv-stride-zero", lambda: te.create_workload("conv2d", N=1, C=1, H=4, W=4, K=1, R=3, S=3, stride=0),
     te.ShapeError, r"conv2d: stride must be >= 1, got 0"),
    ("conv-padding-negative", lambda: te.create_workload("conv2d", N=1, C=1, H=4, W=4, K=1, R=3, S=3, padding=[0, -1]),
     te.ShapeError, r"conv2d: padding must be >= 0"),
    ("conv-padding-three", lambda: te.create_workload("conv2d", N=1, C=1, H=4, W=4, K=1, R=3, S=3, padding=[1, 1, 1]),
     te.ShapeError, r"conv2d: padding must be an int, a list \[h, w\] or a list \[top, left, bottom, right\]"),
    ("conv-padding-asymmetric-too-small", lambda: te.create_workload("conv2d", N=1, C=1, H=2, W=4, K=1, R=5, S=3,
                                                                     padding=[1, 0, 0, 0]),
     te.ShapeError, r"conv2d: output height is -1 for H=2, R=5, padding=\(1, 0\)"),
    ("conv-int8-out", lambda: te.create_workload("conv2d", N=1, C=1, H=4, W=4, K=1, R=3, S=3, dtype="int8", out_dtype="float32"),
     te.DTypeError, r"out_dtype float32 cannot accumulate int8"),
    ("depthwise-multiplier", lambda: te.create_workload("depthwise_conv2d", N=1, C=1, H=4, W=4, R=3, S=3, multiplier=0),
     te.ShapeError, r"depthwise_conv2d: multiplier must be a positive int, got 0"),
    ("softmax-dtype", lambda: te.create_workload("softmax", shape=[2, 3], dtype="int32"), te.DTypeError,
     r"softmax: dtype must be one of float16, float32, float64, got 'int32'"),
    ("softmax-shape", lambda: te.create_workload("softmax", shape=[2, 0]), te.ShapeError, r"softmax: shape\[1\] must be a positive int, got 0"),
    ("softmax-shape-type", lambda: te.create_workload("softmax", shape=5), te.ShapeError, r"softmax: shape must be a non-empty list"),
    ("pool-workload-type", lambda: te.create_workload("pool2d", N=1, C=1, H=4, W=4, kernel=2, pool_type="sum"), te.WorkloadError,
     r"pool2d: unknown pool_type 'sum'"),
    ("pool-workload-layout", lambda: te.create_workload("pool2d", N=1, C=1, H=4, W=4, kernel=2, layout="XYZ"), te.WorkloadError,
     r"pool2d: unknown layout 'XYZ'"),
    ("pool-kernel", lambda: te.create_workload("pool2d", N=1, C=1, H=4, W=4, kernel=[2]), te.ShapeError,
     r"pool2d: kernel must be an int or a list \[h, w\]"),
    ("elementwise-op", lambda: te.create_workload("elementwise", op="div", shape=[2]), te.WorkloadError,
     r"elementwise: unknown op 'div'; expected one of 'add', 'mul', 'sub', 'relu'"),
    ("elementwise-dtype", lambda: te.create_workload("elementwise", op="exp", shape=[2], dtype="int32"), te.DTypeError,
     r"elementwise: dtype must be one of float16"),
    ("chain-shape", lambda: te.create_workload("elementwise_chain", shape=[2, -1]), te.ShapeError,
     r"elementwise_chain: shape\[1\] must be a positive int, got -1"),
]


@pytest.mark.parametrize("thunk,exc,pattern", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_input_raises_te_error_with_message(thunk, exc, pattern):
    with pytest.raises(exc, match=pattern) as info:
        thunk()
    assert isinstance(info.value, te.TEError)
    assert not isinstance(info.value, (IndexError, AttributeError))


def test_unknown_workload_lists_every_known_name():
    with pytest.raises(te.WorkloadError) as info:
        te.create_workload("no_such_op")
    for name in te.list_workloads():
        assert name in str(info.value)


def test_te_errors_are_value_errors():
    for exc in (te.ShapeError, te.DTypeError, te.WorkloadError, te.ReductionError, te.EvaluationError):
        assert issubclass(exc, te.TEError) and issubclass(exc, ValueError)


# Property: valid parameters with at most one of them corrupted either build or raise a TEError
# whose message starts with the op's name.
BAD_VALUES = st.one_of(st.integers(-2, 0), st.sampled_from([2.5, "3", None, True, [1], [1, 2, 3], [1, -1], "x", 7]))
STRIDES = st.one_of(st.integers(1, 3), st.lists(st.integers(1, 3), min_size=2, max_size=2))
PADDINGS = st.one_of(st.integers(0, 2), st.lists(st.integers(0, 2), min_size=2, max_size=2))
CONV_PARAMS = st.fixed_dictionaries(dict(
    N=st.integers(1, 2), C=st.integers(1, 3), H=st.integers(1, 9), W=st.integers(1, 9), K=st.integers(1, 3),
    R=st.integers(1, 4), S=st.integers(1, 4), stride=STRIDES, padding=PADDINGS, dilation=STRIDES,
    layout=st.sampled_from(["NCHW", "NHWC"]), dtype=st.sampled_from(["float32", "int8"])))
POOL_PARAMS = st.fixed_dictionaries(dict(
    N=st.integers(1, 2), C=st.integers(1, 3), H=st.integers(1, 9), W=st.integers(1, 9), kernel=STRIDES,
    stride=st.one_of(st.none(), STRIDES), padding=PADDINGS, pool_type=st.sampled_from(["max", "avg"]),
    layout=st.sampled_from(["NCHW", "NHWC"]), dtype=st.sampled_from(["float32", "int32", "float16"])))


def corrupted(params_strategy):
    @st.composite
    def build(draw):
        params = draw(params_strategy)
        key = draw(st.one_of(st.none(), st.sampled_from(sorted(params))))
        if key is not None:
            params[key] = draw(BAD_VALUES)
        return params
    return build()


@pytest.mark.parametrize("name,strategy", [("conv2d", CONV_PARAMS), ("pool2d", POOL_PARAMS)])
def test_op_parameters_never_crash_with_a_non_te_error(name, strategy):
    @settings(max_examples=150, deadline=None)
    @given(corrupted(strategy))
    def check(params):
        try:
            wl = te.create_workload(name, **params)
        except te.TEError as e:
            assert str(e).startswith(name + ": "), str(e)
        else:
            assert wl.flops > 0 and wl.outputs[0].shape[0] == params["N"]

    check()
