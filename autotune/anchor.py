"""Anchors: the speed a well-known library reaches on the same workload, in the same run.

    gflops = anchor.numpy_gflops(task)      # None when the op has no fair NumPy equivalent
    anchor.describe_blas()                  # "openblas 0.3.27 kernel=Haswell threads=16"

A tuned kernel's GFLOP/s means little alone; next to NumPy's (OpenBLAS or MKL behind
``np.matmul``) it says how far from a vendor library the search got. Only ops with an
equivalent a NumPy user would really write are anchored:

    matmul, batch_matmul   np.matmul (transposes as strided views, which BLAS takes as-is)
    dense                  np.matmul(X, W.T) then the bias add and relu in place
    conv2d                 PyTorch's convolution (oneDNN) where PyTorch is installed; else im2col
                           (strided views, one copy) + one np.matmul, named as the weak baseline it is
    mlp                    np.matmul, bias, gelu (scipy.special.erf), np.matmul, bias, in place
    qkv                    three np.matmul(X, W.T), each with its bias added in place
    attention              batched np.matmul, scale (and mask), max-subtracted softmax in place,
                           batched np.matmul: the same steps as the workload's stages

    depthwise_conv2d,      PyTorch's grouped convolution and pooling (oneDNN) where PyTorch is
    pool2d                 installed; no NumPy anchor (NumPy has no fair one)

Others (element-wise, conv2d_bn_relu) return None: NumPy runs them
single-threaded through temporaries, so a ratio against them would flatter us, and the
te reference evaluator is a checker, not a competitor. Only float32/float64 are
anchored: NumPy has no BLAS path for other dtypes.

``OPENBLAS_CORETYPE`` / ``OPENBLAS_L2_SIZE`` pin OpenBLAS to a slower kernel on some
machines, so a process that measures an anchor calls ``reexec_without_blas_overrides()``
first (before doing any work), which restarts it once without them; ``describe_blas()``
puts the kernel that actually ran on record. On a CUDA target the anchor is cuBLAS
through CuPy (``cupy_equivalent``). ``NumpyAnchor`` and ``CublasAnchor`` are the two
behind one interface (``measure(task, timing)``: an ``AnchorFigure`` timed with the
candidates' protocol, ``timing_protocol``, or why there is none); each target kind names
its own in ``autotune.targets``. The command line measures the anchor before and after
tuning and warns when the two ``disagree`` by more than the noise allowance.
"""
from __future__ import annotations

import math
import os
import statistics
import sys
import time
from dataclasses import dataclass
from typing import Callable

import numpy as np

from te import dtypes

from .timing_protocol import Rounds, anchor_with_flush, fastest_round, quiet_threads_env

BLAS_OVERRIDES = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
#: Set in the environment of the restarted process so that a failed clean-up cannot loop.
_REEXEC_MARK = "AUTOTUNE_ANCHOR_REEXEC"
ANCHORED_DTYPES = ("float32", "float64")
#: How long one anchor measurement runs (seconds of timed repeats, after warm-up).
DEFAULT_MIN_TIME = 0.3


# ---------------------------------------------------------------- a clean BLAS


def blas_overrides_set() -> list[str]:
    return [name for name in BLAS_OVERRIDES if name in os.environ]


def reexec_without_blas_overrides(quiet_threads: bool = False) -> None:
    """Restart this process with the same command line, minus the OpenBLAS overrides (once).

    ``quiet_threads``: also restart where the environment lacks ``QUIET_THREADS_ENV``, and
    set it: for a process that times NumPy and kernels in turn itself. OpenBLAS reads it
    when NumPy loads, which is before a script's first line runs when it imports this
    module; setting it afterwards changes nothing, and OpenBLAS's threads then spin for
    about 0.1 s after each call, beside the kernel timed next.

    ``sys.orig_argv`` keeps the interpreter's own options (``-m autotune.cli``), so a
    console script and ``python -m`` restart alike. Call before any side effect.
    """
    env = {k: v for k, v in os.environ.items() if k not in BLAS_OVERRIDES}
    if quiet_threads:
        env = quiet_threads_env(env)
    if env == dict(os.environ) or os.environ.get(_REEXEC_MARK):
        return
    env[_REEXEC_MARK] = "1"
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(sys.executable, [sys.executable, *sys.orig_argv[1:]], env)


def describe_blas() -> str:
    """Which BLAS library, kernel (core type) and thread count NumPy uses (threadpoolctl).

    Other packages (SciPy, via the cost model's scikit-learn) may load a BLAS of their
    own; NumPy's is the one whose file lies in NumPy's package directory.
    """
    from threadpoolctl import threadpool_info

    blas = [info for info in threadpool_info() if info.get("user_api") == "blas"]
    if not blas:
        return "no BLAS found by threadpoolctl"
    ours = [info for info in blas if _in_numpy_package(info.get("filepath", ""))]
    info = (ours or blas)[0]
    return (f"{info.get('internal_api')} {info.get('version')} "
            f"kernel={info.get('architecture')} threads={info.get('num_threads')}")


def _in_numpy_package(path: str) -> bool:
    """``.../site-packages/numpy.libs/libopenblas...so`` (Linux wheels) or a file inside numpy/ (macOS wheels)."""
    folder = os.path.basename(os.path.dirname(path))
    return folder == "numpy.libs" or path.startswith(os.path.dirname(np.__file__) + os.sep)


# ---------------------------------------------------------------- timing


def median_seconds(fn: Callable[[], object], min_time: float = DEFAULT_MIN_TIME, min_repeats: int = 5,
                   warmup: int = 2) -> float:
    """Median wall time of ``fn()`` over repeats lasting at least ``min_time`` in total."""
    for _ in range(warmup):
        fn()
    times: list[float] = []
    start = time.perf_counter()
    while len(times) < min_repeats or time.perf_counter() - start < min_time:
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


# ---------------------------------------------------------------- NumPy equivalents


def _matmul(p: dict, a: np.ndarray, b: np.ndarray) -> Callable[[], object]:
    a = np.swapaxes(a, -1, -2) if p.get("transpose_a") else a
    b = np.swapaxes(b, -1, -2) if p.get("transpose_b") else b
    out = np.empty(a.shape[:-1] + b.shape[-1:], dtype=a.dtype)
    return lambda: np.matmul(a, b, out=out)


def _dense(p: dict, x: np.ndarray, w: np.ndarray, bias: np.ndarray | None = None) -> Callable[[], object]:
    out = np.empty((x.shape[0], w.shape[0]), dtype=x.dtype)
    wt = w.T

    def run():
        np.matmul(x, wt, out=out)
        if bias is not None:
            np.add(out, bias, out=out)
        if p.get("relu"):
            np.maximum(out, 0, out=out)
        return out

    return run


def _qkv(p: dict, x: np.ndarray, wq: np.ndarray, wk: np.ndarray, wv: np.ndarray, bq: np.ndarray,
         bk: np.ndarray, bv: np.ndarray) -> Callable[[], object]:
    """The three projections as a NumPy user writes them: ``x @ w.T + b`` three times."""
    layers = [_dense({}, x, w, b) for w, b in ((wq, bq), (wk, bk), (wv, bv))]

    def run():
        return [layer() for layer in layers]

    return run


def _pair(value) -> tuple[int, int]:
    return (value, value) if isinstance(value, int) else (int(value[0]), int(value[1]))


def _sides(padding) -> tuple[int, int, int, int]:
    """Padding as (top, left, bottom, right) from an int, [h, w] or the four sides (as te.ops reads it)."""
    from te.ops._checks import padding as checked_padding

    return checked_padding("conv2d", padding)


def im2col_conv2d(data: np.ndarray, kernel: np.ndarray, stride=1, padding=0, dilation=1,
                  layout: str = "NCHW") -> np.ndarray:
    """2-d convolution (cross-correlation) as im2col + matmul, with the te.ops layouts;
    ``padding`` an int, [h, w] or [top, left, bottom, right]."""
    (sh, sw), (dh, dw) = _pair(stride), _pair(dilation)
    top, left, bottom, right = _sides(padding)
    if layout == "NCHW":
        data = np.transpose(data, (0, 2, 3, 1))        # work in NHWC: columns are contiguous
        K, C, R, S = kernel.shape
        weights = np.transpose(kernel, (2, 3, 1, 0)).reshape(R * S * C, K)
    else:
        R, S, C, K = kernel.shape
        weights = kernel.reshape(R * S * C, K)
    N, H, W, _ = data.shape
    padded = np.pad(data, ((0, 0), (top, bottom), (left, right), (0, 0))) if any((top, left, bottom, right)) else data
    OH = (H + top + bottom - dh * (R - 1) - 1) // sh + 1
    OW = (W + left + right - dw * (S - 1) - 1) // sw + 1
    windows = [padded[:, r * dh: r * dh + sh * (OH - 1) + 1: sh, s * dw: s * dw + sw * (OW - 1) + 1: sw, :]
               for r in range(R) for s in range(S)]
    cols = np.stack(windows, axis=3).reshape(N * OH * OW, R * S * C)
    out = (cols @ weights).reshape(N, OH, OW, K)
    return np.ascontiguousarray(np.transpose(out, (0, 3, 1, 2))) if layout == "NCHW" else out


#: Set to "numpy" to anchor conv2d on NumPy's im2col + matmul even where PyTorch is installed.
CONV_ANCHOR_ENV = "AUTOTUNE_CONV2D_ANCHOR"


def torch_for_anchors():
    """The ``torch`` module where conv2d, depthwise_conv2d and pool2d are anchored on
    PyTorch's ops (oneDNN on the CPU): PyTorch installed and ``AUTOTUNE_CONV2D_ANCHOR`` not
    "numpy"; else None. For conv2d NumPy's im2col + matmul is the fallback, and a weak one:
    it copies every window and runs one generic GEMM, far from the direct convolutions of
    oneDNN or a tuned kernel; the other two have no anchor without PyTorch."""
    if os.environ.get(CONV_ANCHOR_ENV, "").lower() == "numpy":
        return None
    try:
        import torch
    except ImportError:
        return None
    return torch


def conv2d_anchor_name() -> str:
    """What the conv2d anchor runs, as reports name it."""
    torch = torch_for_anchors()
    if torch is None:
        return ("NumPy (im2col + matmul: a weak baseline for conv2d; install PyTorch to compare "
                "with oneDNN)")
    backend = "oneDNN" if torch.backends.mkldnn.is_available() else "its own kernels"
    return f"PyTorch {torch.__version__.split('+')[0]} ({backend})"


def _conv2d(p: dict, data: np.ndarray, kernel: np.ndarray) -> Callable[[], object]:
    torch = torch_for_anchors()
    if torch is None:
        return lambda: im2col_conv2d(data, kernel, p["stride"], p["padding"], p["dilation"], p["layout"])
    return _torch_conv2d(torch, p, data, kernel)


def _torch_input(torch, data: np.ndarray, layout: str):
    """``data`` as the NCHW tensor PyTorch's ops take, without a copy (NHWC as PyTorch's
    channels-last view), PyTorch set to as many threads as this process may use."""
    from schedule.targets.cpu import usable_cores

    torch.set_num_threads(usable_cores())
    x = torch.from_numpy(data)
    return x.permute(0, 3, 1, 2) if layout == "NHWC" else x


def _torch_conv2d(torch, p: dict, data: np.ndarray, kernel: np.ndarray, groups: int = 1) -> Callable[[], np.ndarray]:
    """PyTorch's convolution on views of the arrays (NHWC as PyTorch's channels-last
    layout, its kernel laid out as (K, C, R, S) once, as a framework holds its weights),
    on as many threads as this process may use."""
    x = _torch_input(torch, data, p["layout"])
    w = torch.from_numpy(kernel)
    if p["layout"] == "NHWC":
        w = w.permute(3, 2, 0, 1).contiguous()
    stride, dilation = _pair(p["stride"]), _pair(p["dilation"])
    top, left, bottom, right = _sides(p["padding"])
    symmetric = (top, left) == (bottom, right)

    def run() -> np.ndarray:
        with torch.inference_mode():
            if symmetric:
                out = torch.nn.functional.conv2d(x, w, None, stride, (top, left), dilation, groups)
            else:  # PyTorch pads both sides alike: a padded copy first, as a PyTorch user writes it
                padded = torch.nn.functional.pad(x, (left, right, top, bottom))
                out = torch.nn.functional.conv2d(padded, w, None, stride, 0, dilation, groups)
        return (out.permute(0, 2, 3, 1) if p["layout"] == "NHWC" else out).numpy()

    return run


def _mlp(p: dict, x: np.ndarray, w1: np.ndarray, b1: np.ndarray, w2: np.ndarray,
         b2: np.ndarray) -> Callable[[], object]:
    """``gelu(x @ w1.T + b1) @ w2.T + b2`` with the exact gelu, in two preallocated
    hidden buffers (``mlp_workspace_elements``); scipy (a dependency of scikit-learn)
    has the vectorised erf NumPy lacks."""
    from scipy.special import erf

    hidden = np.empty((x.shape[0], w1.shape[0]), dtype=x.dtype)
    gelu = np.empty_like(hidden)
    out = np.empty((x.shape[0], w2.shape[0]), dtype=x.dtype)
    w1t, w2t = w1.T, w2.T
    inv_sqrt2 = x.dtype.type(1 / math.sqrt(2))

    def run():
        np.matmul(x, w1t, out=hidden)
        np.add(hidden, b1, out=hidden)
        np.multiply(hidden, inv_sqrt2, out=gelu)
        erf(gelu, out=gelu)
        np.add(gelu, 1, out=gelu)
        np.multiply(gelu, hidden, out=gelu)
        np.multiply(gelu, 0.5, out=gelu)
        np.matmul(gelu, w2t, out=out)
        np.add(out, b2, out=out)
        return out

    return run


def _attention(p: dict, q: np.ndarray, k: np.ndarray, v: np.ndarray) -> Callable[[], object]:
    """``softmax(q @ k^T / sqrt(dim)) @ v`` per head, the softmax max-subtracted and in place
    in one (heads, seq, seq) buffer; causal masks with -inf above the diagonal."""
    heads, seq, dim = q.shape
    scores = np.empty((heads, seq, seq), dtype=q.dtype)
    row = np.empty((heads, seq, 1), dtype=q.dtype)
    out = np.empty_like(q)
    kt = np.swapaxes(k, 1, 2)
    scale = q.dtype.type(1 / math.sqrt(dim))
    above = np.triu(np.ones((seq, seq), dtype=bool), 1) if p.get("causal") else None

    def run():
        np.matmul(q, kt, out=scores)
        np.multiply(scores, scale, out=scores)
        if above is not None:
            np.copyto(scores, -np.inf, where=above)
        np.max(scores, axis=-1, keepdims=True, out=row)
        np.subtract(scores, row, out=scores)
        np.exp(scores, out=scores)
        np.sum(scores, axis=-1, keepdims=True, out=row)
        np.divide(scores, row, out=scores)
        np.matmul(scores, v, out=out)
        return out

    return run


def _softmax(p: dict, x: np.ndarray) -> Callable[[], object]:
    """``exp(x - max) / sum`` along the axis, composed of NumPy's steps as the workload's
    stages are (max, subtract and exp, sum, divide), in preallocated buffers."""
    axis = p.get("axis", -1) % x.ndim
    stat = np.empty(x.shape[:axis] + (1,) + x.shape[axis + 1:], dtype=x.dtype)
    exps = np.empty_like(x)
    out = np.empty_like(x)

    def run():
        np.max(x, axis=axis, keepdims=True, out=stat)
        np.subtract(x, stat, out=exps)
        np.exp(exps, out=exps)
        np.sum(exps, axis=axis, keepdims=True, out=stat)
        np.divide(exps, stat, out=out)
        return out

    return run


def _layernorm(p: dict, x: np.ndarray, gamma: np.ndarray, beta: np.ndarray) -> Callable[[], object]:
    """Layer norm over the last axis, two-pass as the workload is (mean, mean of squared
    deviations, ``(x - mean) / sqrt(var + eps) * gamma + beta``), in preallocated buffers."""
    eps = x.dtype.type(p.get("eps", 1e-5))
    stat = np.empty(x.shape[:-1] + (1,), dtype=x.dtype)
    centered = np.empty_like(x)
    out = np.empty_like(x)

    def run():
        np.mean(x, axis=-1, keepdims=True, out=stat)
        np.subtract(x, stat, out=centered)
        np.multiply(centered, centered, out=out)
        np.mean(out, axis=-1, keepdims=True, out=stat)
        np.add(stat, eps, out=stat)
        np.sqrt(stat, out=stat)
        np.divide(centered, stat, out=centered)
        np.multiply(centered, gamma, out=centered)
        np.add(centered, beta, out=out)
        return out

    return run


def _depthwise_conv2d(p: dict, data: np.ndarray, kernel: np.ndarray) -> Callable[[], np.ndarray]:
    """PyTorch's grouped convolution, one group per input channel (only where PyTorch is
    installed: ``_TORCH_ONLY``)."""
    C, mult, R, S = kernel.shape
    grouped = np.ascontiguousarray(kernel.reshape(C * mult, 1, R, S))  # (C * mult, 1, R, S): the weights' layout
    return _torch_conv2d(torch_for_anchors(), dict(p, layout="NCHW"), data, grouped, groups=C)


def _pool2d(p: dict, data: np.ndarray) -> Callable[[], np.ndarray]:
    """PyTorch's pooling (only where PyTorch is installed: ``_TORCH_ONLY``); an average counts
    the padding in its divisor, as the te op does."""
    torch = torch_for_anchors()
    kernel = _pair(p["kernel"])
    stride = _pair(p["kernel"] if p.get("stride") is None else p["stride"])
    padding = _pair(p["padding"])
    nhwc = p.get("layout", "NCHW") == "NHWC"
    x = _torch_input(torch, data, p.get("layout", "NCHW"))
    F = torch.nn.functional

    def run() -> np.ndarray:
        with torch.inference_mode():
            if p.get("pool_type", "max") == "max":
                out = F.max_pool2d(x, kernel, stride, padding)
            else:
                out = F.avg_pool2d(x, kernel, stride, padding, count_include_pad=True)
        return (out.permute(0, 2, 3, 1) if nhwc else out).numpy()

    return run


def _why_not_pool2d(params: dict) -> str:
    """Why PyTorch cannot pool like ``params`` ("" when it can): it pads at most half a window."""
    kernel, padding = _pair(params["kernel"]), _pair(params["padding"])
    if any(2 * pad > k for pad, k in zip(padding, kernel)):
        return (f"no anchor: PyTorch pools pad at most half the window (padding {params['padding']}, "
                f"kernel {params['kernel']})")
    return ""


def _winograd_conv2d(p: dict, data: np.ndarray, kernel: np.ndarray) -> Callable[[], object]:
    """The same convolution, computed directly (oneDNN's or NumPy's, as for conv2d)."""
    return _conv2d({**p, "stride": 1, "dilation": 1, "layout": "NCHW"}, data, kernel)


_NUMPY_EQUIVALENTS = {"matmul": _matmul, "batch_matmul": _matmul, "dense": _dense, "conv2d": _conv2d,
                      "conv2d_winograd": _winograd_conv2d,
                      "mlp": _mlp, "qkv": _qkv, "attention": _attention, "softmax": _softmax, "layernorm": _layernorm,
                      "depthwise_conv2d": _depthwise_conv2d, "pool2d": _pool2d}
#: Ops whose only fair equivalent is PyTorch's: no anchor without it.
_TORCH_ONLY = ("depthwise_conv2d", "pool2d")
#: Ops anchored on conv2d's anchor (PyTorch where installed), named as such in reports.
_CONV_ANCHORED = ("conv2d", "conv2d_winograd", *_TORCH_ONLY)


def numpy_equivalent(task) -> tuple[Callable[[], object] | None, str]:
    """(a no-argument callable running NumPy's version of ``task`` on fresh inputs, why not).

    The callable is None, with the reason, when the op or its dtype has no fair equivalent.
    """
    fn, _, why = _numpy_equivalent_and_inputs(task)
    return fn, why


def _numpy_equivalent_and_inputs(task) -> tuple[Callable[[], object] | None, list[np.ndarray], str]:
    """``numpy_equivalent``'s callable, the fresh inputs it reads (the anchor's flush evicts
    them) and why there is none."""
    why = _why_no_numpy_anchor(task.workload_name, task.params)
    if why:
        return None, [], why
    inputs = task.workload.random_inputs(seed=0)
    return numpy_equivalent_on(task.workload, inputs), inputs, ""


def numpy_equivalent_on(workload, inputs: list[np.ndarray]) -> Callable[[], object] | None:
    """NumPy's version of ``workload`` (a ``te.Workload``) on the given input arrays, which
    it only reads (None without a fair equivalent): what the measuring process times next
    to the candidates, on the candidates' own inputs."""
    if not workload_has_numpy_anchor(workload):
        return None
    return _NUMPY_EQUIVALENTS[workload.name](workload.params, *inputs)


def workload_has_numpy_anchor(workload) -> bool:
    """Whether ``numpy_equivalent_on`` gives an anchor for ``workload`` (decided without arrays)."""
    return not _why_no_numpy_anchor(workload.name, workload.params)


def _why_no_numpy_anchor(name: str, params: dict) -> str:
    """Why ``name`` with ``params`` has no NumPy anchor ("" when it has one)."""
    if name in _TORCH_ONLY and torch_for_anchors() is None:
        return f"no anchor: NumPy has no fair equivalent of {name} (with PyTorch installed, oneDNN's is the anchor)"
    if name == "pool2d" and (why := _why_not_pool2d(params)):
        return why
    if name not in _NUMPY_EQUIVALENTS:
        return f"no anchor: NumPy has no fair equivalent of {name}"
    if params.get("dtype") not in ANCHORED_DTYPES or params.get("out_dtype") not in (None, params.get("dtype")):
        return f"no anchor: NumPy has no BLAS path for {params.get('dtype')} (only {', '.join(ANCHORED_DTYPES)})"
    return ""


def has_numpy_anchor(task) -> bool:
    """Whether ``numpy_gflops`` would measure something (decided without building inputs)."""
    return not _why_no_numpy_anchor(task.workload_name, task.params)


def numpy_workspace_bytes(task) -> int:
    """About how many bytes ``numpy_equivalent(task)`` and its runs hold (0 without an anchor):
    the inputs and the output, for mlp and attention their buffers (two (M, H) hidden
    arrays; the (heads, seq, seq) scores, a row statistic and the causal mask), for softmax
    and layernorm one more array like the input and a row statistic, and for
    conv2d the im2col columns, the padded input and the copies of the output the layout
    change makes."""
    if not has_numpy_anchor(task):
        return 0
    from te.evaluate import tensor_nbytes

    wl = task.workload
    inputs = sum(tensor_nbytes(t) for t in wl.inputs)
    outputs = sum(tensor_nbytes(t) for t in wl.outputs)
    itemsize = dtypes.nbytes(wl.inputs[0].dtype)
    if task.workload_name == "mlp":
        M, H = wl.inputs[0].shape[0], wl.inputs[1].shape[0]
        return inputs + outputs + 2 * M * H * itemsize
    if task.workload_name == "attention":
        heads, seq, _ = wl.inputs[0].shape
        return inputs + outputs + (heads * seq * seq + heads * seq) * itemsize + seq * seq
    if task.workload_name in ("softmax", "layernorm"):  # one more array like the input, a row statistic
        rows = math.prod(wl.inputs[0].shape) // wl.inputs[0].shape[-1]
        return inputs + outputs + tensor_nbytes(wl.inputs[0]) + rows * itemsize
    if task.workload_name not in ("conv2d", "conv2d_winograd"):
        return inputs + outputs
    data, kernel = wl.inputs[0], wl.inputs[1]
    (out,) = wl.outputs
    channels_out = kernel.shape[0] if task.params.get("layout", "NCHW") == "NCHW" else kernel.shape[-1]
    # im2col: one row per output pixel, one column per (r, s, c) tap
    columns = (math.prod(out.shape) // channels_out) * (math.prod(kernel.shape) // channels_out)
    return inputs + 3 * outputs + tensor_nbytes(data) + columns * dtypes.nbytes(data.dtype)


def numpy_gflops(task, min_time: float = DEFAULT_MIN_TIME, quiet: bool = False) -> float | None:
    """NumPy's GFLOP/s on ``task``'s workload, measured here; None (and "no anchor" printed
    unless ``quiet``) for ops without a fair NumPy equivalent. FLOPs are the task's own."""
    fn, why = numpy_equivalent(task)
    if fn is None:
        if not quiet:
            print(why)
        return None
    return task.flops / median_seconds(fn, min_time=min_time) / 1e9


# ---------------------------------------------------------------- cuBLAS (CUDA targets)


def cupy_equivalent(task) -> tuple[Callable[[], object] | None, Callable[[], float] | None, str]:
    """(a no-argument callable queueing cuBLAS's version of ``task`` on the current stream,
    a clock that waits for the stream before it reads the time, why not): ``cupy.matmul``
    on a matmul-family task; None, None when CuPy, a GPU or an equivalent is missing.
    The clock makes a repeat of several calls one span of device time, as CUDA events
    would, without a wait between the calls."""
    why = _why_no_cublas_anchor(task.workload)
    if why:
        return None, None, why
    try:
        import cupy
    except ImportError:
        return None, None, "no anchor: CuPy is not installed"
    fn = cupy_equivalent_on(task.workload, [cupy.asarray(a) for a in task.workload.random_inputs(seed=0)])
    stream = cupy.cuda.get_current_stream()

    def clock() -> float:
        stream.synchronize()
        return time.perf_counter()

    return fn, clock, ""


def _why_no_cublas_anchor(workload) -> str:
    """Why ``workload`` has no cuBLAS anchor ("" when it has one): a matmul-family op in
    float32, float64 or float16 (accumulating in float16 or float32, the result in either;
    cuBLAS sums float16 products in float32 either way). With float16 inputs
    cuBLAS writes float16 (a float32 output would make CuPy cast the inputs up and lose the
    tensor cores): the anchor then writes half the bytes ours does, a bias in its favour."""
    p = workload.params
    dtype, out = p.get("dtype"), p.get("out_dtype")
    if workload.name not in ("matmul", "batch_matmul", "dense"):
        return f"no anchor: no cuBLAS equivalent of {workload.name} here"
    accumulators = (None, dtype, "float32") if dtype == "float16" else (None, dtype)
    if dtype not in ("float16", "float32", "float64") or out not in accumulators \
            or p.get("acc_dtype") not in accumulators:
        return f"no anchor: no cuBLAS path for {dtype} with a {out} result here"
    return ""


def cupy_equivalent_on(workload, inputs) -> Callable[[], object] | None:
    """cuBLAS's version of ``workload`` through CuPy on the given device arrays (None
    without one): a no-argument callable that queues it on the current stream (what the
    GPU's measuring process times next to the candidates, on their own inputs)."""
    if _why_no_cublas_anchor(workload):
        return None
    import cupy

    p = workload.params
    a, b = inputs[0], inputs[1]
    if workload.name == "dense":
        b, bias = b.T, (inputs[2] if p.get("bias") else None)
    else:
        a = cupy.swapaxes(a, -1, -2) if p.get("transpose_a") else a
        b = cupy.swapaxes(b, -1, -2) if p.get("transpose_b") else b
        bias = None

    def fn():
        out = cupy.matmul(a, b)
        if bias is not None:
            out += bias
        if p.get("relu"):
            cupy.maximum(out, 0, out=out)

    return fn


# ---------------------------------------------------------------- anchors per target kind


@dataclass(frozen=True)
class AnchorFigure:
    """An anchor's speed on a task, measured with the candidates' protocol: the GFLOP/s of
    each round's median and the fastest of them; ``blas`` names NumPy's BLAS kernel."""

    name: str
    round_gflops: tuple[float, ...]
    blas: str | None = None

    @property
    def gflops(self) -> float:
        return max(self.round_gflops)


def figure_from_rounds(name: str, task, rounds: Rounds, blas: str | None = None) -> AnchorFigure:
    return AnchorFigure(name, tuple(task.flops / s / 1e9 for s in rounds.medians), blas)


#: How far apart the anchor's figures before and after tuning may lie before the report
#: warns: about twice the median difference between two measurements of one candidate
#: under the three-round protocol (bench/RESULTS.md, "Measuring rounds"). The anchor is
#: timed in as many rounds as the candidates (one by default), so on a noisy machine its
#: two figures lie further apart and the warning comes sooner.
NOISE_ALLOWANCE = 0.15


def disagreement(before: AnchorFigure, after: AnchorFigure, allowance: float = NOISE_ALLOWANCE) -> str | None:
    """Why the two figures of one anchor cannot both be right (None when they agree within
    ``allowance``, relative to the faster): the machine was busier during one of them."""
    fast, slow = max(before.gflops, after.gflops), min(before.gflops, after.gflops)
    gap = 1.0 - slow / fast
    if gap <= allowance:
        return None
    return (f"{before.name} ran at {before.gflops:.4g} GFLOP/s before tuning and {after.gflops:.4g} after, "
            f"{gap:.0%} apart (more than the {allowance:.0%} noise allowance): something else was using "
            f"the machine, so the ratio may be off; re-time on a quiet machine")


class NumpyAnchor:
    """The anchor of CPU kinds: NumPy (OpenBLAS/MKL), measured in this process; conv2d's is
    PyTorch (oneDNN) where it is installed (``torch_for_anchors``)."""

    name = "NumPy"

    def label(self, task) -> str:
        """What this anchor runs for ``task``, as reports name it."""
        return conv2d_anchor_name() if task.workload_name in _CONV_ANCHORED else self.name

    def wants_clean_blas(self, task) -> bool:
        """Whether measuring ``task`` needs the restart without the OpenBLAS overrides."""
        return has_numpy_anchor(task)

    def workspace_bytes(self, task) -> int:
        """Host memory measuring ``task`` takes (for the size check before tuning)."""
        return numpy_workspace_bytes(task)

    def measure(self, task, timing=None) -> AnchorFigure | str:
        """The figure, measured like a candidate (``timing``: a ``runner.TimingOptions``,
        default the runner's), or why there is none (the op has no fair NumPy equivalent)."""
        fn, inputs, why = _numpy_equivalent_and_inputs(task)
        if fn is None:
            return why
        call, flush = anchor_with_flush(fn, inputs)
        rounds = fastest_round(call, _timing(timing), flush=flush)
        return figure_from_rounds(self.label(task), task, rounds, describe_blas())


class CublasAnchor:
    """The anchor of the cuda kind: cuBLAS through CuPy, timed in device time."""

    name = "cuBLAS"

    def label(self, task) -> str:
        return self.name

    def wants_clean_blas(self, task) -> bool:
        return False

    def workspace_bytes(self, task) -> int:
        """Host memory: the inputs, made on the host before they are copied to the device."""
        from te.evaluate import tensor_nbytes

        return sum(tensor_nbytes(t) for t in task.workload.inputs) if not _why_no_cublas_anchor(task.workload) else 0

    def measure(self, task, timing=None) -> AnchorFigure | str:
        fn, clock, why = cupy_equivalent(task)
        if fn is None:
            return why
        rounds = fastest_round(fn, _timing(timing), flush=lambda: None, clock=clock)
        return figure_from_rounds(self.name, task, rounds)


def _timing(timing):
    from .runner import TimingOptions

    return TimingOptions() if timing is None else timing


class NoAnchor:
    """The anchor of a kind with nothing fair to compare with (a simulated device): every
    measurement answers why."""

    name = "none"

    def __init__(self, why: str):
        self.why = why

    def label(self, task) -> str:
        return self.name

    def wants_clean_blas(self, task) -> bool:
        return False

    def workspace_bytes(self, task) -> int:
        return 0

    def measure(self, task, timing=None) -> str:
        return f"no anchor: {self.why}"
