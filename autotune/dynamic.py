"""A dimension that changes at run time: kernels tuned for a few sizes (buckets), any size in
range served by them.

    dim = DynamicDim("M", 1, 256, buckets=(1, 8, 64, 256))
    tune_buckets("dense", dict(N=1024, K=1024), dim, trials=200, db=db)   # one task per bucket
    f = build_buckets("dense", dict(N=1024, K=1024), dim, db=db)
    f(x, w, b, y)            # x (m, 1024), y (m, 1024) for any m in 1..256; no retuning
    f(x, f.pack("W", w), b, y)   # the weights packed once for every bucket's kernel
    f.plan(100)              # ((64, 64), (32, 32), (8, 4)): (bucket, rows) per call

Kernels are compiled for static shapes, so a size between buckets is split along the
dimension into calls of bucket kernels on row slices (the slices of a C-contiguous array
along its first axis are contiguous: no copy). What is left when no bucket fits it runs
as a *tail*: the bucket's tuned schedule compiled for exactly those rows (on the first
call that needs it; the compile cache keeps it for later processes), so 5 rows do 5 rows
of work, not 8. ``warm(*sizes)`` compiles those ahead, and times each size's plan against
all its rows as one tail of a larger bucket's schedule (24 rows: three 8-row calls, or the
64-row schedule at 24 rows), keeping the faster. ``build_buckets(..., tails=False)`` pads that call up to the bucket
instead (its rows copied into a scratch array and back): no compile at run time, the
padded rows' work wasted. Which buckets: the cheapest plan by the buckets' measured times
(a dynamic programme over the row count), so 100 rows may run as 64 + 32 + a tail of 4
rows of the 8-row schedule, rather than 64 + 36 calls of one row. This is DietCode's idea (a few tuned sizes serve a range) for dimensions along
which the computation is independent, and only those: ``check_splittable`` refuses a
dimension that a reduction sums over or that an input is read along other than one row at
a time (``matmul``'s M and ``dense``'s M qualify; their K does not).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

import te
from te.expr import TensorRead, Var, free_vars, post_order
from te.tensor import ComputeOp

from .task import Task


class DynamicShapeError(ValueError):
    """A dynamic dimension that cannot be served by splitting (or a size outside its range)."""


#: Default buckets: from the range's low end, each this many times the last, then its high end.
BUCKET_RATIO = 8


@dataclass(frozen=True)
class DynamicDim:
    """Workload parameter ``name`` takes any value in ``low..high``; kernels are tuned for
    ``buckets`` (within the range; sorted, deduplicated). Without buckets: ``low``, then
    each ``BUCKET_RATIO`` times the last, and ``high`` (1..256: 1, 8, 64, 256), so every
    size has a bucket within a factor of 8 above it and the rows a tail leaves are few."""

    name: str
    low: int
    high: int
    buckets: tuple[int, ...] = ()

    def __post_init__(self):
        if not self.buckets and 1 <= self.low <= self.high:
            sizes = [self.low]
            while sizes[-1] * BUCKET_RATIO < self.high:
                sizes.append(sizes[-1] * BUCKET_RATIO)
            object.__setattr__(self, "buckets", (*sizes, self.high))
        buckets = tuple(sorted(set(int(b) for b in self.buckets)))
        if not buckets or not 1 <= self.low <= self.high:
            raise DynamicShapeError(f"dynamic {self.name}: give 1 <= low <= high and at least one bucket")
        outside = [b for b in buckets if not self.low <= b <= self.high]
        if outside:
            raise DynamicShapeError(f"dynamic {self.name}: buckets {outside} lie outside {self.low}..{self.high}")
        object.__setattr__(self, "buckets", buckets)


def bucket_tasks(op: str, params: dict, dim: DynamicDim, target="cpu") -> dict[int, Task]:
    """One task per bucket: ``params`` with the dynamic parameter set to the bucket."""
    if dim.name in params:
        raise DynamicShapeError(f"{op}: {dim.name} is dynamic; leave it out of the parameters")
    tasks = {b: Task(op, {**params, dim.name: b}, target) for b in dim.buckets}
    check_splittable(tasks, dim)
    return tasks


def varying_args(tasks: dict[int, Task]) -> list[int]:
    """Positions of the workload arguments split along the dimension: their first extent is
    the bucket size in every bucket's workload."""
    return _following(tasks, [tasks[b].workload.args for b in sorted(tasks)])


def _following(tasks: dict[int, Task], per_bucket: list[list]) -> list[int]:
    """Positions, in lists of tensors or compute ops that pair up across the buckets (one
    list per bucket, smallest first), of those whose first extent is the bucket size in every
    bucket: they follow the dimension."""
    sizes = sorted(tasks)

    def first(item):
        shape = item.output(0).shape if isinstance(item, ComputeOp) else item.shape
        return shape[0] if shape else None

    return [n for n in range(len(per_bucket[0])) if [first(items[n]) for items in per_bucket] == sizes]


def check_splittable(tasks: dict[int, Task], dim: DynamicDim) -> None:
    """DynamicShapeError unless every output row along the dimension depends on the matching
    row of each varying input alone: every compute that varies with it reads varying
    tensors at its own first index and reads nothing else by it, and no reduction runs
    over it (checked on the largest bucket's DAG)."""
    size = max(tasks)
    task = tasks[size]
    wl = task.workload
    positions = varying_args(tasks)
    if not any(_is_output(wl, wl.args[n]) for n in positions):
        raise DynamicShapeError(f"{task.workload_name}: no output's first extent follows {dim.name}")
    varying = {wl.args[n].op for n in positions}
    follows = _computes_following(tasks)
    for op in te.topological_order(wl.outputs):
        if not isinstance(op, ComputeOp):
            continue
        first = op.axis[0].var if op in follows else None
        if first is not None:
            varying.add(op)
        for read in (n for n in post_order(op.body) if isinstance(n, TensorRead)):
            reads_varying = read.tensor.op in varying
            for d, index in enumerate(read.indices):
                uses_first = first is not None and first in free_vars(index)
                if reads_varying and d == 0 and not (isinstance(index, Var) and index is first):
                    raise DynamicShapeError(f"{task.workload_name}: {op.name} reads {read.tensor.name} at row "
                                            f"{index} along {dim.name}, not row by row; it cannot be split")
                if uses_first and not (reads_varying and d == 0):
                    raise DynamicShapeError(f"{task.workload_name}: {op.name} reads {read.tensor.name} by its row "
                                            f"index along {dim.name}; it cannot be split")
        if first is None and any(t.op in varying for t in op.input_tensors):
            raise DynamicShapeError(f"{task.workload_name}: {op.name} combines every row along {dim.name} "
                                    f"(a reduction over it); it cannot be split")


def _computes_following(tasks: dict[int, Task]) -> set:
    """The compute ops of the largest bucket's DAG that follow the dimension (the DAGs of
    the buckets have the same structure, so their ops pair up in topological order)."""
    ops = [[op for op in te.topological_order(tasks[b].workload.outputs) if isinstance(op, ComputeOp)]
           for b in sorted(tasks)]
    return {ops[-1][n] for n in _following(tasks, ops)}


def _is_output(wl, tensor) -> bool:
    return any(tensor is out for out in wl.outputs)


def tune_buckets(op: str, params: dict, dim: DynamicDim, trials: int, db, target="cpu", **tune_options) -> dict:
    """Tune each bucket's task with ``trials`` trials (``autotune.tune``'s options), into ``db``;
    bucket -> its TuneResult."""
    from .tuning import tune

    return {b: tune(task, trials=trials, db=db, **tune_options)
            for b, task in bucket_tasks(op, params, dim, target).items()}


def plan_calls(rows: int, costs: dict[int, float]) -> tuple[tuple[int, int], ...]:
    """The cheapest way to cover ``rows`` with bucket calls: (bucket, rows it serves) per call,
    largest first. ``costs``: bucket -> seconds per call. A call serving fewer rows than its
    bucket counts at the bucket's whole cost: what padding costs, and an upper bound of a
    tail (``BucketedModule.tail``), which runs the same schedule on fewer rows. Counting a
    tail at less needs its cost, which only timing gives (``BucketedModule.warm``); costs
    interpolated between the buckets' favoured a big bucket's schedule on a fraction of its
    rows, which ran slower than the plans it displaced (``bench/RESULTS.md``). On a tie the
    larger bucket goes first, so padding lands on a small one."""
    best = [0.0] + [float("inf")] * rows
    choice = [None] * (rows + 1)
    for r in range(1, rows + 1):
        for b, cost in sorted(costs.items(), reverse=True):
            total = cost + best[max(0, r - b)]
            if total < best[r]:
                best[r], choice[r] = total, b
    calls, r = [], rows
    while r > 0:
        b = choice[r]
        calls.append((b, min(b, r)))
        r -= min(b, r)
    return tuple(sorted(calls, key=lambda c: (-c[1], -c[0])))


@dataclass(frozen=True)
class PackedForBuckets:
    """Input ``name`` packed once into every bucket kernel's layout (``BucketedModule.pack``):
    pass it in the input's place and no call packs it again."""

    name: str
    per_bucket: dict


class BucketedModule:
    """Kernels of a dynamic dimension's buckets, called with arrays of any size in range:
    ``module(*arrays)`` in the workload's argument order; ``plan(rows)`` says which calls.
    Constant inputs a bucket's schedule packs (dense's weights) are packed once per bucket
    and call; ``pack(name, array)`` packs them once for good. The rows no bucket fits run a
    tail kernel (``tail``) compiled on first use and kept here, or, without ``build_tail``,
    a padded call through scratch arrays kept here; either way one module serves one
    thread at a time."""

    def __init__(self, dim: DynamicDim, kernels: dict, costs: dict[int, float], varying: list[int],
                 outputs: list[int], names: list[str], build_tail=None):
        self.dim, self.kernels, self.costs = dim, kernels, costs
        self.varying, self.outputs, self.names = varying, outputs, names
        self._build_tail = build_tail  # (bucket, rows) -> the bucket's schedule at that size; None: pad
        self._tails: dict[tuple[int, int], object] = {}
        self._plans: dict[int, tuple] = {}
        self._scratches: dict[tuple, np.ndarray] = {}

    def tail(self, bucket: int, rows: int):
        """The kernel of a call serving ``rows`` < ``bucket`` rows: the bucket's schedule
        compiled at that size, on first use (None when the module pads instead)."""
        if self._build_tail is None:
            return None
        if (bucket, rows) not in self._tails:
            self._tails[bucket, rows] = self._build_tail(bucket, rows)
        return self._tails[bucket, rows]

    def warm(self, *sizes: int, choose: bool = True) -> None:
        """Compile now the tails that calls with ``sizes`` rows need, so no such call compiles.
        With ``choose`` (and tails), also time each size's plan against running all its rows
        as one tail of each larger bucket's schedule, on scratch arrays, and keep the faster
        (``plan`` counts a tail at its whole bucket's cost, as it cannot know a tail's)."""
        for size in sizes:
            plan = self.plan(size)
            for bucket, served in plan:
                if served < bucket:
                    self.tail(bucket, served)
            options = [plan] + [((b, size),) for b in sorted(self.kernels) if b > size]
            if choose and self._build_tail is not None and len(options) > 1:
                arrays = self._scratch_arguments(size)
                seconds = [_seconds_per_call(lambda p=p: self._run(p, arrays)) for p in options]
                self._plans[size] = options[seconds.index(min(seconds))]

    def _scratch_arguments(self, rows: int) -> list:
        """Arrays shaped as a call with ``rows`` rows takes (random values: timing only), the
        constant inputs packed for every bucket, as a caller packs them once (``pack``)."""
        from te import dtypes

        rng = np.random.default_rng(0)
        params = self.kernels[max(self.kernels)].func.user_params
        arrays = [rng.standard_normal(((rows,) + p.shape[1:]) if n in self.varying else p.shape)
                  .astype(dtypes.numpy_dtype(p.dtype)) for n, p in enumerate(params)]
        return [self.pack(self.names[n], a) if n not in self.varying and n not in self.outputs else a
                for n, a in enumerate(arrays)]

    def plan(self, rows: int) -> tuple[tuple[int, int], ...]:
        if not self.dim.low <= rows <= self.dim.high:
            raise DynamicShapeError(f"{self.dim.name} = {rows} is outside the tuned range "
                                    f"{self.dim.low}..{self.dim.high}")
        if rows not in self._plans:
            self._plans[rows] = plan_calls(rows, self.costs)
        return self._plans[rows]

    def pack(self, name: str, array: np.ndarray) -> PackedForBuckets:
        """Input ``name`` packed for every bucket's kernel, once."""
        if name not in self.names or self.names.index(name) in self.varying:
            raise DynamicShapeError(f"{name!r} is not an input of fixed shape")
        from .dispatch import packed_input

        return PackedForBuckets(name, {b: packed_input(k, name, array) for b, k in self.kernels.items()})

    def __call__(self, *arrays) -> None:
        rows = {arrays[n].shape[0] for n in self.varying}
        if len(rows) != 1:
            raise DynamicShapeError(f"the arguments split along {self.dim.name} must agree on their first extent, "
                                    f"got {sorted(rows)}")
        self._run(self.plan(rows.pop()), arrays)

    def _run(self, plan, arrays) -> None:
        """Call the kernels of ``plan`` on ``arrays``' row slices (see ``__call__``)."""
        from .dispatch import packed_input

        fixed = {n: a for n, a in enumerate(arrays) if n not in self.varying}
        packed = {}  # (bucket, position) -> the input in that kernel's layout, packed once per call
        start = 0
        for bucket, served in plan:
            kernel = self.tail(bucket, served) if served < bucket else None
            padded = served < bucket and kernel is None
            kernel = kernel or self.kernels[bucket]
            part = list(arrays)
            for n, a in fixed.items():
                if isinstance(a, PackedForBuckets):
                    part[n] = a.per_bucket[bucket]
                elif n not in self.outputs:
                    if (bucket, n) not in packed:
                        packed[bucket, n] = packed_input(self.kernels[bucket], self.names[n], a)
                    part[n] = packed[bucket, n]
            for n in self.varying:
                piece = arrays[n][start:start + served]
                if padded:  # the last call: its rows in a scratch array of the bucket's size
                    scratch = self._scratch(bucket, n, piece)
                    scratch[:served] = piece
                    piece = scratch
                part[n] = np.ascontiguousarray(piece)  # a row slice of a C-contiguous array: no copy
            kernel(*part)  # a tail takes the bucket's packed inputs: the same schedule, the same layout
            for n in self.varying:
                if n in self.outputs and not np.may_share_memory(part[n], arrays[n]):
                    arrays[n][start:start + served] = part[n][:served]
            start += served

    def _scratch(self, bucket: int, position: int, piece: np.ndarray) -> np.ndarray:
        """A reused array of ``bucket`` rows for argument ``position``. The rows past the
        ones served hold whatever an earlier call left: each row's results depend on its own
        row alone (``check_splittable``), and the results of those rows are dropped."""
        key = (bucket, position, piece.shape[1:], piece.dtype.str)
        scratch = self._scratches.get(key)
        if scratch is None:
            scratch = self._scratches[key] = np.zeros((bucket, *piece.shape[1:]), piece.dtype)
        return scratch


def _seconds_per_call(fn) -> float:
    """The median seconds per call of ``fn`` over one round of the measuring protocol
    (``timing_protocol.time_round``: a warm-up call, which also compiles any tail, then at
    least 5 repeats and 0.05 s), caches left warm as between a caller's calls."""
    import statistics

    from .timing_protocol import time_round

    return statistics.median(time_round(fn, (), min_repeats=5, max_repeats=1000, min_time=0.05, flush=lambda: None))


def build_buckets(op: str, params: dict, dim: DynamicDim, db=None, target="cpu", tails: bool = True) -> BucketedModule:
    """Each bucket built with its best stored config (``autotune.build``), planned by the
    buckets' stored times (a bucket with none counts as its size in rows). ``tails``: the
    rows no bucket fits run the bucket's schedule compiled at their size (else: padded)."""
    from .dispatch import build, build_config

    tasks = bucket_tasks(op, params, dim, target)
    kernels = {b: build(t, db) for b, t in tasks.items()}
    costs = {b: (k.record.median_s if k.record is not None and k.record.median_s else float(b))
             for b, k in kernels.items()}
    wl = tasks[max(tasks)].workload
    outputs = [n for n, t in enumerate(wl.args) if _is_output(wl, t)]

    def build_tail(bucket: int, rows: int):
        return build_config(Task(op, {**params, dim.name: rows}, target), kernels[bucket].config, candidates=False)

    return BucketedModule(dim, kernels, costs, varying_args(tasks), outputs, [t.name for t in wl.args],
                          build_tail if tails else None)
