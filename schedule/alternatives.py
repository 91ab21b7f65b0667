"""Algorithms a space chooses among: other DAGs that compute what a workload's DAG computes.

A space is derived from one DAG. An algorithm that computes the same result another way,
Winograd's convolution for a 3x3 stride-1 one (and whatever reads it, a fused epilogue),
or a long reduction with few results split in parts that run in parallel and are combined
afterwards (TVM's ``rfactor``), is another DAG with the same inputs and the same outputs.
``alternatives(outputs)`` finds such DAGs by rule, and ``AlternativesSpace`` holds the
DAG's own space with one space per alternative behind a knob ``algorithm`` ("direct":
the DAG as written). A config of an alternative carries that space's knobs
under the alternative's prefix (``winograd4/winograd_gemm.tile.k``); each knob a config's
algorithm does not use is ignored, so two configs that differ only there build the same
code (``schedule_key``). Configs stored before the knob existed mean "direct" and build
what they built.

The tuners search all of it as one space, and the cost model ranks candidates of every
algorithm by their loop-IR features, so the choice is measured and learned, not decided
by a rule (TVM's op strategies choose among a convolution's implementations by priority
and tune each separately). Every candidate is checked against the workload's own
reference, whichever DAG built it.
"""
from __future__ import annotations

import dataclasses
import functools
import itertools
import math
import random
from dataclasses import dataclass, field

from te import dtypes
from te import tensor as te_tensor
from te.dag import topological_order
from te.expr import Binary, Const, Reduce, TensorRead, all_of, post_order, structural_equal, substitute, transform
from te.ops.blocks import attention, flash_attention
from te.ops.winograd import TILES, conv2d_winograd_nchw
from te.tensor import ComputeOp, PlaceholderOp, Tensor

from .config import Config, ConfigError, Knob, KnobSet
from .decisions import REDUCE_INNER
from .sketch import same_dag
from .space import ConfigSpace

ALGORITHM = "algorithm"
DIRECT = "direct"
#: Between an alternative's name and its space's knob name.
SEPARATOR = "/"
#: Winograd pays for its transforms over the channels: below this many input or output
#: channels a transform costs as much as the products it saves.
WINOGRAD_MIN_CHANNELS = 16

#: rfactor: a reduction with at most this many results (too few for a parallel loop and a
#: vector loop over them)...
RFACTOR_MAX_RESULTS = 16
#: ... over an axis at least this long (each part still a long vector loop) ...
RFACTOR_MIN_EXTENT = 4096
#: ... is split in this many parts along that axis: a stage of partial results, parallel
#: over the parts, then the reduction of the parts. Enough parts for every core several
#: times over; few enough that combining them costs nothing.
RFACTOR_PARTS = 64
RFACTOR = "rfactor"
#: The name of a split reduction's stage of partial results: ``<reduction>_rf``.
RFACTOR_SUFFIX = "_rf"

#: FlashAttention: attention (``te.ops.attention``) computed over blocks of this many keys
#: (``te.ops.flash_attention``), each size that leaves at least two blocks. A block's scores
#: stay in L1/L2 beside the row block's output; longer blocks rescale less often.
FLASH_BLOCKS = (64, 128)
FLASH = "flash"

LABELS = {DIRECT: "the DAG as written", **{f"winograd{m}": f"Winograd F({m}x{m}, 3x3)" for m in TILES},
          RFACTOR: f"each long reduction with few results in {RFACTOR_PARTS} parallel parts, then combined",
          **{f"{FLASH}{b}": f"FlashAttention over blocks of {b} keys, combined by an online softmax"
             for b in FLASH_BLOCKS}}


def alternatives(outputs: list[Tensor]) -> dict[str, list[Tensor]]:
    """name -> the outputs of another DAG computing ``outputs`` from the same inputs:

    - ``winograd2``, ``winograd4``: where the DAG holds one float32/float64 NCHW conv2d
      (``te.ops.conv2d_nchw``) with a 3x3 kernel, stride 1, no dilation and at least
      ``WINOGRAD_MIN_CHANNELS`` channels in and out, the DAG with that convolution computed
      by Winograd's F(2, 3) and by F(4, 3) (what reads it, a fused epilogue, reads the new
      result);
    - ``rfactor``: where the DAG holds reductions with few results over a long axis
      (``_rfactor_axis``), the DAG with each of them split in parts (``_rfactored``);
    - ``flash64``, ``flash128``: where the DAG holds one ``te.ops.attention``
      (``_attention_candidate``), the DAG with it computed by ``te.ops.flash_attention``
      over blocks of that many keys (each size that leaves at least two blocks).

    Empty for every other DAG."""
    others: dict[str, list[Tensor]] = {}
    convs = [(op, found) for op in topological_order(outputs) if (found := _winograd_candidate(op)) is not None]
    if len(convs) == 1:
        ((conv, (data, kernel, padding)),) = convs
        others.update({f"winograd{m}": _replaced(outputs, conv,
                                                conv2d_winograd_nchw(data, kernel, padding, m, name=conv.name))
                      for m in TILES})
    split = _rfactor_all(outputs)
    if split is not None:
        others[RFACTOR] = split
    found = [(op, qkv) for op in topological_order(outputs) if (qkv := _attention_candidate(op)) is not None]
    if len(found) == 1:
        ((op, (Q, K, V, causal)),) = found
        seq = Q.shape[1]
        others.update({f"{FLASH}{b}": _replaced(outputs, op, flash_attention(Q, K, V, causal, b))
                       for b in FLASH_BLOCKS if seq % b == 0 and seq // b >= 2})
    return others


def _attention_candidate(op) -> tuple[Tensor, Tensor, Tensor, bool] | None:
    """(Q, K, V, causal) when ``op`` is ``te.ops.attention``'s output, the whole DAG behind it
    as that function builds it (checked by building it again from Q, K and V and comparing
    stage by stage); else None."""
    if not (isinstance(op, ComputeOp) and op.tag == "batch_matmul" and len(op.axis) == 3):
        return None
    body = op.body
    if not (isinstance(body, Reduce) and body.combiner == "sum" and isinstance(body.source, Binary)
            and isinstance(body.source.b, TensorRead) and isinstance(body.source.a, TensorRead)):
        return None
    V = body.source.b.tensor
    scores = [p for p in topological_order([op.output(0)])
              if isinstance(p, ComputeOp) and p is not op and p.tag == "batch_matmul"]
    if len(scores) != 1 or not isinstance(scores[0].body, Reduce):
        return None
    reads = [n for n in post_order(scores[0].body.source) if isinstance(n, TensorRead)]
    if len(reads) != 2:
        return None
    Q, K = (r.tensor for r in reads)
    if not (Q.shape == K.shape == V.shape and len(Q.shape) == 3 and dtypes.is_float(Q.dtype)
            and Q.dtype == K.dtype == V.dtype):
        return None
    for causal in (False, True):
        if same_dag(attention(Q, K, V, causal), op.output(0)):
            return Q, K, V, causal
    return None


def _rfactor_axis(op):
    """The reduce axis to split ``op`` along, or None: ``op`` must reduce (sum, max or min,
    from the combiner's own identity) into at most ``RFACTOR_MAX_RESULTS`` results over an
    axis of at least ``RFACTOR_MIN_EXTENT`` (the longest of its reduce axes)."""
    if not isinstance(op, ComputeOp) or not isinstance(op.body, Reduce):
        return None
    body = op.body
    if body.combiner not in ("sum", "max", "min"):
        return None
    standard = {"sum": 0, "max": dtypes.min_value(body.dtype), "min": dtypes.max_value(body.dtype)}[body.combiner]
    if standard != body.identity.value:
        return None  # a reduction from another start value: the parts could not start from it
    if math.prod(iv.extent for iv in op.axis) > RFACTOR_MAX_RESULTS:
        return None
    axis = max(body.axes, key=lambda iv: iv.extent)
    return axis if axis.extent >= RFACTOR_MIN_EXTENT else None


def _rfactored(op, axis) -> Tensor:
    """``op``'s result computed in two stages: ``<name>_rf[..., p]``, the reduction over
    part ``p`` of ``axis`` (``ceil(extent / RFACTOR_PARTS)`` consecutive values, the last
    part guarded), and ``<name>[...]``, the same reduction over the parts. The second keeps
    ``op``'s name, axes' extents, tag and attributes, so what reads ``op`` reads it alike."""
    body = op.body
    width = -(-axis.extent // RFACTOR_PARTS)
    parts = -(-axis.extent // width)
    reducer = {"sum": te_tensor.sum, "max": te_tensor.max, "min": te_tensor.min}[body.combiner]

    def partial(*index):
        *spatial, part = index
        inner = te_tensor.reduce_axis((0, width), f"{axis.name}_in")
        others = {iv.var: te_tensor.reduce_axis((iv.start, iv.start + iv.extent), iv.name)
                  for iv in body.axes if iv is not axis}
        position = part * width + inner
        mapping = {iv.var: e for iv, e in zip(op.axis, spatial)}
        mapping.update({axis.var: position + axis.start if axis.start else position})
        mapping.update({v: new.var for v, new in others.items()})
        conditions = [substitute(body.condition, mapping)] if body.condition is not None else []
        if parts * width != axis.extent:
            conditions.append(position < axis.extent)
        return reducer(substitute(body.source, mapping), axis=[inner, *others.values()],
                       where=all_of(*conditions) if conditions else None)

    shape = [iv.extent for iv in op.axis]
    partials = te_tensor.compute([*shape, parts], partial, name=f"{op.name}{RFACTOR_SUFFIX}")
    over = te_tensor.reduce_axis((0, parts), f"{axis.name}_part")
    return te_tensor.compute(shape, lambda *i: reducer(partials[(*i, over)], axis=over),
                             name=op.name, tag=op.tag, attrs=dict(op.attrs))


def _rfactor_all(outputs: list[Tensor]) -> list[Tensor] | None:
    """``outputs`` with every reduction ``_rfactor_axis`` accepts split (``_rfactored``),
    one after the other (each split rebuilds what reads it); None when none qualifies."""
    done: set[str] = set()
    while True:
        todo = [(op, axis) for op in topological_order(outputs)
                if op.name not in done and (axis := _rfactor_axis(op)) is not None]
        if not todo:
            return outputs if done else None
        op, axis = todo[0]
        done.add(op.name)
        outputs = _replaced(outputs, op, _rfactored(op, axis))


def _replaced(outputs: list[Tensor], old, new: Tensor) -> list[Tensor]:
    """``outputs`` with every read of ``old``'s result reading ``new`` instead: the stages
    downstream of ``old`` rebuilt (same names, axes and attributes), the rest shared."""
    memo = {old: new}

    def rebuilt(op) -> Tensor:
        if op not in memo:
            inputs = {t.op: rebuilt(t.op) for t in op.input_tensors}
            changed = {o: t for o, t in inputs.items() if t is not o.output(0)}
            if not changed:
                memo[op] = op.output(0)
            else:
                body = transform(op.body, lambda e: TensorRead(changed[e.tensor.op], e.indices, e.dtype)
                                 if isinstance(e, TensorRead) and e.tensor.op in changed else None)
                memo[op] = ComputeOp(op.name, op.axis, body, op.tag, op.attrs).output(0)
        return memo[op]

    return [rebuilt(t.op) for t in outputs]


def _winograd_candidate(op) -> tuple[Tensor, Tensor, tuple[int, int, int, int]] | None:
    """(data, kernel, padding) when ``op`` is conv2d_nchw's compute as ``te.ops`` writes it for
    a 3x3 window, stride 1 and dilation 1 over a (padded) placeholder; else None."""
    if not isinstance(op, ComputeOp) or op.tag != "conv2d_nchw" or op.output(0).dtype not in ("float32", "float64"):
        return None
    body = op.body
    if not (isinstance(body, Reduce) and body.combiner == "sum" and len(body.axes) == 3):
        return None
    rc, ry, rx = (iv.var for iv in body.axes)
    if [iv.extent for iv in body.axes[1:]] != [3, 3]:
        return None
    src = body.source
    if not (isinstance(src, Binary) and src.op == "mul" and isinstance(src.a, TensorRead) and isinstance(src.b, TensorRead)):
        return None
    n, k, y, x = (iv.var for iv in op.axis)
    window, weights = src.a, src.b
    if not isinstance(weights.tensor.op, PlaceholderOp) or list(weights.indices) != [k, rc, ry, rx]:
        return None
    expected = [n, rc, y + ry, x + rx]
    if not all(structural_equal(a, b) for a, b in zip(window.indices, expected)):
        return None
    padded = window.tensor
    data, before = _unpadded(padded)
    if data is None or data.dtype != op.output(0).dtype or weights.tensor.dtype != data.dtype:
        return None  # a widening convolution (float16 summed in float32) stays direct
    top, left = before
    bottom, right = padded.shape[2] - data.shape[2] - top, padded.shape[3] - data.shape[3] - left
    channels_in, channels_out = data.shape[1], weights.tensor.shape[0]
    if min(channels_in, channels_out) < WINOGRAD_MIN_CHANNELS:
        return None
    return data, weights.tensor, (top, left, bottom, right)


def _unpadded(t: Tensor) -> tuple[Tensor | None, tuple[int, int]]:
    """(the placeholder ``t`` pads, (top, left)) for te.ops' pad of the two spatial dims (or
    ``t`` itself with no padding); (None, ...) for anything else."""
    if isinstance(t.op, PlaceholderOp):
        return t, (0, 0)
    if not (isinstance(t.op, ComputeOp) and t.op.tag == "pad" and len(t.op.input_tensors) == 1):
        return None, (0, 0)
    (source,) = t.op.input_tensors
    reads = [r for r in _reads(t.op.body) if r.tensor.op is source.op]
    if not isinstance(source.op, PlaceholderOp) or not reads:
        return None, (0, 0)
    axes = [iv.var for iv in t.op.axis]
    before = []
    for d, index in enumerate(reads[0].indices):
        if index is axes[d]:
            before.append(0)
        elif (isinstance(index, Binary) and index.op == "sub" and index.a is axes[d]
              and isinstance(index.b, Const)):
            before.append(int(index.b.value))
        else:
            return None, (0, 0)
    if before[:2] != [0, 0] or list(t.shape[:2]) != list(source.shape[:2]):
        return None, (0, 0)
    return source, (before[2], before[3])


def _reads(expr) -> list[TensorRead]:
    return [n for n in post_order(expr) if isinstance(n, TensorRead)]


@dataclass
class AlternativesSpace(ConfigSpace):
    """The DAG's own space (this object's ConfigSpace fields and methods) plus a space per
    alternative DAG, chosen by the knob ``algorithm``."""

    alternatives: dict = field(default_factory=dict)  # name -> ConfigSpace of the same inputs
    primary: ConfigSpace | None = None  # the DAG's own space, which this one extends

    @classmethod
    def around(cls, primary: ConfigSpace, spaces: dict[str, ConfigSpace]) -> "AlternativesSpace":
        """``primary`` with ``spaces`` as alternatives: its knobs, the algorithm knob, then each
        alternative's knobs under its prefix (with a default, so configs of other
        algorithms, and configs stored before, need not list them)."""
        knobs = list(primary.knobs.knobs)
        knobs.append(Knob(ALGORITHM, (DIRECT, *spaces), "how the result is computed: " + "; ".join(
            f"{name}: {LABELS.get(name, name)}" for name in (DIRECT, *spaces)), default=DIRECT))
        for name, space in spaces.items():
            knobs.extend(Knob(f"{name}{SEPARATOR}{k.name}", k.candidates, k.doc,
                              default=k.candidates[0] if k.default is None else k.default)
                         for k in space.knobs.knobs)
        fields = {f.name: getattr(primary, f.name) for f in dataclasses.fields(primary)}
        fields["knobs"] = KnobSet(primary.knobs.sketch, tuple(knobs))
        space = cls(**fields, alternatives=dict(spaces), primary=primary)
        space.target = getattr(primary, "target", None)
        return space

    # ------------------------------------------------------------ the chosen algorithm

    def algorithm(self, config: Config) -> str:
        """The algorithm ``config`` builds (``direct`` for a config stored before the knob)."""
        return config.values.get(ALGORITHM, DIRECT)

    def _own(self, config: Config) -> Config:
        """``config`` with the knobs of the DAG's own space only."""
        mine = self._own_names
        return Config(config.sketch, {k: v for k, v in config.values.items() if k in mine})

    @functools.cached_property
    def _own_names(self) -> frozenset:
        """The knob names of the DAG's own space."""
        return frozenset(k.name for k in self.primary.knobs.knobs)

    def sub_config(self, config: Config) -> tuple[ConfigSpace, Config]:
        """(the space of ``config``'s algorithm, the config in that space's own knobs)."""
        name = self.algorithm(config)
        if name == DIRECT:
            return self.primary, self._own(config)
        space = self.alternatives[name]
        return space, Config(space.knobs.sketch, {inner: knob.value_in(config)
                                                  for knob, inner in self._prefixed[name]})

    @functools.cached_property
    def _prefixed(self) -> dict[str, list[tuple[Knob, str]]]:
        """Per alternative, its knobs in this space with their names in the alternative's own
        space (read with their defaults, so a config stored before the alternative existed,
        then switched to it, has every decision that space needs)."""
        out = {}
        for name in self.alternatives:
            prefix = f"{name}{SEPARATOR}"
            out[name] = [(k, k.name[len(prefix):]) for k in self.knobs.knobs if k.name.startswith(prefix)]
        return out

    def _as_config(self, name: str, sub: Config, filler: Config) -> Config:
        """A config of this space choosing ``name`` with ``sub``'s decisions; the knobs it does
        not use from ``filler`` (a valid config of this space)."""
        values = dict(filler.values, **{ALGORITHM: name})
        prefix = "" if name == DIRECT else f"{name}{SEPARATOR}"
        values.update({prefix + k: v for k, v in sub.values.items()})
        return Config(self.knobs.sketch, values)

    # ------------------------------------------------------------ the space's operations

    def problem(self, config: Config) -> str | None:
        space, sub = self.sub_config(config)
        return space.problem(sub)

    def schedule_key(self, config: Config) -> str:
        space, sub = self.sub_config(config)
        key = space.schedule_key(sub)
        return key if space is self.primary else f"{self.algorithm(config)}:{key}"

    def apply(self, config: Config, candidates: bool = True):
        """The chosen algorithm's schedule; that space checks its own part of ``config`` (so
        only the knobs of the others are checked here, once, on every build)."""
        if candidates:
            try:
                self.knobs.check(config)
            except ConfigError as exc:
                raise ConfigError(f"invalid config: {exc}") from None
        space, sub = self.sub_config(config)
        return space.apply(sub, candidates)

    def decisions(self, config: Config):
        space, sub = self.sub_config(config)
        return space.decisions(sub)

    def mutate(self, config: Config, rng: random.Random, local: float = 0.0) -> Config:
        """Another algorithm now and then (1 in 8); otherwise one knob of the config's own
        algorithm, so mutations do not go to knobs it ignores."""
        if rng.random() < 1 / 8:
            other = rng.choice([n for n in (DIRECT, *self.alternatives) if n != self.algorithm(config)])
            return Config(config.sketch, dict(config.values, **{ALGORITHM: other}))
        space, sub = self.sub_config(config)
        return self._as_config(self.algorithm(config), space.mutate(sub, rng, local), config)

    def starting_points(self, rng: random.Random) -> list[Config]:
        """Each algorithm's starting points, taken in turn (the first of each, then the
        second of each, ...), so a first batch shorter than all of them measures every
        algorithm at its best-shaped points."""
        lists = [space.starting_points(rng) for space in (self.primary, *self.alternatives.values())]
        for n, name in enumerate(self.alternatives, start=1):
            if name == RFACTOR:
                bases = lists[n] or [self.alternatives[name].sample(rng)]  # a DAG of reductions alone has none
                lists[n] = _partials_in_parallel(self.alternatives[name], bases) + lists[n]
        filler = self._filler(lists[0][0] if lists[0] else self.primary.sample(rng))
        lists = [[self._as_config(name, c, filler) for c in points]
                 for name, points in zip((DIRECT, *self.alternatives), lists)]
        taken = [c for turn in itertools.zip_longest(*lists) for c in turn if c is not None]
        return [c for c in taken if self.check(c) is None]

    def _filler(self, direct: Config) -> Config:
        """A config of this space with ``direct``'s decisions and every alternative's knobs at
        their defaults: what starting points leave unused is the same on every call, so
        one schedule's starting point is one config (one record, one replayed trial)."""
        values = dict(direct.values, **{ALGORITHM: DIRECT})
        values.update({k.name: k.default for knobs in self._prefixed.values() for k, _ in knobs})
        return Config(self.knobs.sketch, values)

    def describe(self) -> str:
        lines = [f"sketch {self.sketch_version}:"] + ["  " + self._describe_plan(p) for p in self.sketch.plans]
        lines.append(f"knobs ({self.size} combinations over every algorithm):")
        lines += [f"  {k.name}: {len(k.candidates)} candidates - {k.doc}" for k in self.knobs.knobs
                  if k.name in self._own_names or k.name == ALGORITHM]
        for name, space in self.alternatives.items():
            lines.append(f"algorithm {name} ({LABELS.get(name, name)}), its knobs prefixed {name}{SEPARATOR}:")
            lines += ["  " + line for line in space.describe().splitlines()]
        return "\n".join(lines)

    def describe_config(self, config: Config) -> str:
        space, sub = self.sub_config(config)
        text = space.describe_config(sub)
        if space is self.primary:
            return text
        name = self.algorithm(config)
        return f"algorithm: {LABELS.get(name, name)}\n{text}"


def _partials_in_parallel(space: ConfigSpace, points: list[Config]) -> list[Config]:
    """Starting points of the ``rfactor`` algorithm that do what it is for: each of
    ``points`` with every stage computed on its own (none attached), the stages of partial
    results over parts run by the parallel loop (a part per iteration, its reduction
    innermost: a vector fold). The generic starting points attach stages inside their
    reader's row loop, which leaves the few rows as the only parallel work, the very case
    the split is for. Valid ones only, one per schedule."""
    knobs = {k.name: k for k in space.knobs.knobs}
    changes = {name: 0 for name, knob in knobs.items() if name.endswith(".attach") and 0 in knob.candidates}
    for plan in space.sketch.plans:
        if not plan.op.name.endswith(RFACTOR_SUFFIX):
            continue
        name = space.names[plan.op]
        changes.update({k: 1 for k in knobs if k.startswith(f"{name}.tile.")})
        for knob, value in ((f"{name}.parallel", max(knobs[f"{name}.parallel"].candidates)),
                            (f"{name}.order", REDUCE_INNER)):
            if knob in knobs and value in knobs[knob].candidates:
                changes[knob] = value
    out: dict[str, Config] = {}
    for point in points:
        config = Config(point.sketch, dict(point.values, **changes))
        if space.check(config) is None:
            out.setdefault(space.schedule_key(config), config)
    return list(out.values())
