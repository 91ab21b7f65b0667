"""Micro-kernel-shaped starting points of a CPU space: where a search should begin.

A random config of a GEMM-like space almost never has the shape the fastest BLAS kernels
share (GotoBLAS, BLIS, OpenBLAS): a register tile that fills the register file with
accumulators (``rows x width``, the width a multiple of the vector length), the
streamed input packed into panels of that width, a reduction block whose panel slice
stays in L1, and cache blocks of several register tiles. A short output (fewer than
``FEW_ROWS`` rows) also tries the streamed input in panels packed per cache block, and copied
per cache block, instead of panels of all of it, and first takes all its rows in one cache
block where they are few (``ONE_BLOCK_ROWS``), so that each block of it is packed once;
a one-row output (GEMV) streams wide blocks unpacked. An input the op declares
layout-free (constant weights of ``dense``) is packed into the panels once, at build time. This module writes down a few
such configs per space from the target's register file and the space's own candidates,
so the model-guided and evolutionary tuners measure them in their first batch and climb
from there, instead of waiting for the model to discover the shape.

    points = starting_points(space, rng)    # valid configs of ``space``, at most LIMIT
"""
from __future__ import annotations

import dataclasses
import itertools
import math
import random

from te import dtypes
from te.expr import TensorRead, free_vars, post_order

from .config import Config, ConfigError
from .decisions import (AT_BLOCK, AT_REGISTER, PACK_BLOCK_PANELS, PACK_NONE, PACK_PANELS, PACK_PREPACKED,
                        PRODUCERS_STORED, VECTOR_LAST)
from .sketch import MULTI_LEVEL, combines_online
from .space import even_block, panel_inputs, reduction_level

#: Most starting points one space offers.
LIMIT = 16
#: Elements of the reduction one register tile accumulates per block (the panel slice of
#: ``REDUCE_BLOCK x width`` floats stays in L1).
REDUCE_BLOCKS = (256, 128)
#: Rows of register tiles in one cache block of the second-last axis (A's block in L2).
ROW_BLOCKS = (16, 8)
#: A short output (at most this many rows on the row axis, fewer than ``FEW_ROWS`` in all)
#: first tries all its rows in one cache block (GotoBLAS's ``mc`` covering M): each block of
#: the streamed input, packed or copied where it is read, then serves every row once. In
#: blocks of 16 or 8 tiles, 128 rows are two or three blocks, and each block of the streamed
#: input is packed two or three times (``bench/RESULTS.md``). The input's block of rows
#: (256 rows of a 256-long reduction block: 256 KiB of fp32) stays within a core's L2.
ONE_BLOCK_ROWS = 256
#: The row block of all the rows (``ONE_BLOCK_ROWS``).
ALL_ROWS = 0
#: Register tiles per cache block along the last axis (B's panels reused across rows).
COLUMN_BLOCKS = (2, 4)
#: A register tile of one row (GEMV, M = 1) reuses nothing from the streamed input: it
#: streams long stretches of its rows instead, a short reduction block at a time, with
#: wide cache blocks (64 tiles of 32 lanes: 8 KiB of accumulators, in L1).
ONE_ROW_REDUCE_BLOCKS = (8, 16)
ONE_ROW_COLUMN_BLOCKS = (64, 32)
#: Panels are written once per call and pay off over every row of the output; below this
#: many rows the points also try copying the streamed input one cache block at a time
#: (GotoBLAS's packing inside the loops), which reads it while it is still in cache.
FEW_ROWS = 512


def starting_points(space, rng: random.Random) -> list[Config]:
    """Up to ``LIMIT`` distinct valid configs of ``space`` (a CPU ``ConfigSpace``) whose
    multi-level stages have micro-kernel shape; other knobs as a random valid config has
    them. Empty when the space has no multi-level stage or none of the shapes is valid."""
    plans = [(p, layout) for p, layout in space._layouts if p.role == MULTI_LEVEL and layout is not None]
    if not plans:
        return _fused_row_points(space, rng)
    shapes = [list(_shapes(space, p, layout)) for p, layout in plans]
    out: dict[str, Config] = {}
    for combo in itertools.islice(zip(*shapes), LIMIT * 4):
        try:
            base = space.sample(rng)
        except ConfigError:
            return list(out.values())
        decisions = space.decisions(base)
        for stage, shape in zip((layout.stage for _, layout in plans), combo):
            rest = {k: v for k, v in shape.items() if k not in ("tiles", "reduce_tiles")}
            d = decisions[stage].with_tiles(**shape["tiles"]).with_reduce_tiles(**shape["reduce_tiles"])
            decisions = decisions.replace(dataclasses.replace(d, **rest))
        for variant in (v for a in _attach_variants(space, decisions) for v in _sibling_variants(space, a)):
            config = variant.to_config()
            if space.check(config) is None:
                out.setdefault(config.hash, config)
        if len(out) >= LIMIT:
            break
    return list(out.values())[:LIMIT]


def _attach_variants(space, decisions) -> list:
    """``decisions`` as they are when no stage has a host; else two variants: every stage
    with a host computed inside the host's loop over its rows (the second-last axis, or
    the only one), and every such stage on its own. A stage that combines blocks online
    stays on its own in both: it tiles many rows, and the stages it hosts compute each key
    block for all of them."""
    if not space._hosted_layouts:
        return [decisions]
    variants = []
    for fused in (True, False):
        d = decisions
        for plan, layout in space._hosted_layouts:
            attach = _row_level(plan) if fused and not combines_online(plan.op) else 0
            d = d.replace(dataclasses.replace(d[layout.stage], attach=attach))
        variants.append(d)
    return variants


def _sibling_variants(space, decisions) -> list:
    """``decisions`` as they are when no stage has siblings; else every leader's siblings
    sharing its parallel loop (one parallel region, each thread computing all the siblings'
    tiles of its share), sharing all its outer loops (each block of the shared input read
    for all of them while in cache), and each in loops of its own."""
    leaders = [layout for p, layout in space._layouts if p.siblings and layout is not None]
    if not leaders:
        return [decisions]
    variants = []
    for share in ("parallel", "outer", None):
        d = decisions
        for layout in leaders:
            mine = d[layout.stage]
            level = {"parallel": mine.parallel, "outer": len(mine.tiles), None: 0}[share]
            d = d.replace(dataclasses.replace(mine, siblings=level))
        variants.append(d)
    return variants


def _row_level(plan) -> int:
    """The attach level of the host's loop over its rows: its second-last axis, or its only
    one; for a host that combines blocks online, its loop over the blocks."""
    if combines_online(plan.host):
        return reduction_level(plan.host)
    return max(1, len(plan.host.axis) - 1)


#: Rows of the host one iteration of its parallel loop produces, when its statistics are
#: computed per row (a row of 4096 floats is 16 KiB: a few rows stay in L1/L2).
FUSED_ROWS = (1, 2, 4, 8)


def _fused_row_points(space, rng: random.Random) -> list[Config]:
    """Configs that compute every stage with a host inside the host's loop over its rows
    (all axes but the last): one pass per block of rows, statistics and output together,
    the rows in parallel and the last axis vectorized. Empty without such stages."""
    hosts = {p.host for p, _ in space._hosted_layouts}
    if not hosts:
        return []
    out: dict[str, Config] = {}
    for rows in FUSED_ROWS:
        try:
            decisions = space.decisions(space.sample(rng))
        except ConfigError:
            break
        for plan, layout in space._layouts:
            if plan.op in hosts and layout is not None:
                decisions = decisions.replace(_rows_in_parallel(space, plan, layout, decisions[layout.stage], rows))
            elif plan.host is not None and layout is not None:
                decisions = decisions.replace(dataclasses.replace(decisions[layout.stage], attach=_row_level(plan)))
        config = decisions.to_config()
        if space.check(config) is None:
            out.setdefault(config.hash, config)
    return list(out.values())


def _rows_in_parallel(space, plan, layout, d, rows: int):
    """A host's decisions: ``rows`` rows per tile of its second-last axis, all its outer
    row loops fused in parallel, the last axis split at the widest vector it offers."""
    cands = _candidates(space, layout)["tiles"]
    axes = [iv.name for iv in plan.op.axis]
    lanes = max(1, space.registers.vector_bytes // dtypes.nbytes(plan.op.output(0).dtype))
    sizes = {a: (1,) for a in axes}
    sizes[axes[-1]] = (_largest(sorted(cands[axes[-1]]), 4 * lanes) or 1,)
    if len(axes) > 1:
        sizes[axes[-2]] = (_largest(sorted(cands[axes[-2]]), rows) or 1,)
    return dataclasses.replace(d.with_tiles(**sizes), parallel=max(1, len(axes) - 1))


def _candidates(space, layout) -> dict:
    """attr -> candidates of one stage's decisions: a tuple for a single knob, {axis:
    candidates} for a per-axis field (read through the stage's codec, not knob names)."""
    by_name = {k.name: k.candidates for k in space.knobs.knobs}
    out = {}
    for field, names in layout.fields:
        if len(names) == 1 and names[0][1] is None:
            out[field.attr] = by_name.get(names[0][0], ())
        else:
            out[field.attr] = {axis: by_name[name] for name, axis in names}
    return out


def _shapes(space, plan, layout):
    """Micro-kernel-shaped decisions of one multi-level stage (as keyword arguments for
    its decisions: tiles and reduce_tiles by axis, the rest by field), most promising first;
    with a ``vector`` knob, the shapes of each axis it offers, taken in turn."""
    cands = _candidates(space, layout)
    vectors = cands.get("vector") or (VECTOR_LAST,)
    per_axis = [_shapes_along(space, plan.op, cands, vector) for vector in vectors]
    for group in itertools.zip_longest(*per_axis):
        yield from (shape for shape in group if shape is not None)


def _shapes_along(space, op, cands: dict, vector: str):
    """The micro-kernel shapes whose register tile vectorizes ``vector`` (an axis name, or
    VECTOR_LAST): the streamed input in panels along that axis, the rows on the axis
    ``_row_axis`` names."""
    nbytes = dtypes.nbytes(op.output(0).dtype)
    lanes = max(1, space.registers.vector_bytes // nbytes)
    axes = [iv.name for iv in op.axis]
    v = len(axes) - 1 if vector == VECTOR_LAST else axes.index(vector)
    tile_cands = cands["tiles"]
    along = panel_inputs(op, v)
    panel = next((c for c in cands["pack"] if str(c).startswith(PACK_PANELS) and c[len(PACK_PANELS):] in along),
                 PACK_NONE)
    prepacked = next((c for c in cands["pack"] if str(c).startswith(PACK_PREPACKED)
                      and c[len(PACK_PREPACKED):] in along), None)
    if v != len(axes) - 1 and prepacked is None and panel == PACK_NONE:
        return  # another axis streams its input from panels only
    row = _row_axis(op, v)
    one_row = row is None or op.axis[row].extent == 1
    blocks = ((ONE_ROW_REDUCE_BLOCKS, (1,), ONE_ROW_COLUMN_BLOCKS) if one_row
              else (REDUCE_BLOCKS, ROW_BLOCKS, COLUMN_BLOCKS))
    few_rows = _few_rows(op, v)
    if prepacked is not None and not one_row:
        packs = [prepacked]  # the same panels, packed once at build time: no call pays for the copy
    elif one_row or panel == PACK_NONE:
        packs = [PACK_NONE]  # one row never reuses a panel
    elif few_rows:
        # and the same panels packed per cache block where they are read, and the input
        # copied per block: panels of all of the input are written once per call and pay off
        # only over many rows
        packs = [panel, PACK_BLOCK_PANELS + panel[len(PACK_PANELS):], panel[len(PACK_PANELS):]]
    else:
        packs = [panel]
    if few_rows and not one_row and op.axis[row].extent <= ONE_BLOCK_ROWS:
        blocks = (blocks[0], (ALL_ROWS, *blocks[1]), blocks[2])
    row_strides = _row_strides(op, row, v) if row is not None else []
    for width_vectors, reduce_block, row_block, column_block, pack in itertools.product((2, 1), *blocks, packs):
        width = _largest(_s3_values(tile_cands[axes[v]]), lanes * width_vectors)
        if width is None:
            continue
        rows = 1
        if row is not None:
            fits = [r for r in _s3_values(tile_cands[axes[row]])
                    if space.registers.vectors_needed([r, width], nbytes) <= space.registers.count]
            rows = _most_rows(_within_l1_ways(space, row_strides, fits), op.axis[row].extent)
        inner = {axes[v]: (width, column_block)}
        if row is not None:
            # about row_block tiles a block, made equal across the blocks: 22 tiles in blocks
            # of 16 become two blocks of 11 (``space.even_row_blocks`` offers them)
            tiles = -(-op.axis[row].extent // rows)
            inner[axes[row]] = (rows, tiles if row_block == ALL_ROWS else even_block(tiles, -(-tiles // row_block)))
        if combines_online(op):  # the axes after the rows whole in one tile: hosted stages run once per row block
            inner.update({a: (1, iv.extent) for a, iv in zip(axes[row + 1:], op.axis[row + 1:])})
            inner[axes[v]] = (width, -(-op.axis[v].extent // width))
        tiles = {a: _nearest_tile(tile_cands[a], *inner.get(a, (1, 1))) for a in axes}
        if any(t is None for t in tiles.values()):
            continue
        # The outer loops of the first two axes run in parallel, so a short first axis
        # (M = 128 is one cache block) still splits over the cores; with four axes or more
        # (conv2d's n, k, y), all but the last.
        shape = dict(tiles=tiles, reduce_tiles=_reduce_tiles(op, cands["reduce_tiles"], reduce_block), at=AT_BLOCK,
                     parallel=min(len(axes), max(2, len(axes) - 1)), unroll=_unroll(cands["unroll"]),
                     pack=pack if width > 1 else PACK_NONE)
        if combines_online(op):  # what it combines is computed block by block in its loop: no copy of it
            shape.update(pack=PACK_NONE, parallel=row + 1)
        if cands.get("producers"):
            shape["producers"] = PRODUCERS_STORED  # no padding condition inside the micro-kernel
        if cands.get("vector"):
            shape["vector"] = vector
        yield shape
        if _per_register_tile_too(shape, reduce_block, cands, few_rows):
            yield dict(shape, at=AT_REGISTER)


def _per_register_tile_too(shape: dict, reduce_block: int, cands: dict, few_rows: bool) -> bool:
    """Whether the same micro-kernel is also worth trying computed per register tile
    (``AT_REGISTER``: the whole reduction inside each tile, no local block tile to copy
    out), once per shape rather than per reduction block, which it does not have: where it
    reads the input unpacked or from panels packed at build time, or from panels packed on
    every call where there are enough rows to pay for them (a short output's points try
    the copies per cache block instead, which a tile computed this way cannot make)."""
    pack = str(shape["pack"])
    return (AT_REGISTER in cands["at"] and reduce_block == REDUCE_BLOCKS[0]
            and (pack == PACK_NONE or pack.startswith(PACK_PREPACKED)
                 or (pack.startswith(PACK_PANELS) and not few_rows)))


def _within_l1_ways(space, row_strides: list[int], fits: list[int]) -> list[int]:
    """The row counts of ``fits`` whose rows of each input the register tile broadcasts
    from (``row_strides`` bytes apart, ``_row_strides``) take fewer lines of one L1 set than
    the set has ways (one left for the streamed panel): with K = 1024 floats, matmul's
    rows of A lie 4 KiB apart, all in one set of a 48 KiB 12-way L1, and a 14-row tile then
    evicts its own rows (8-13 % slower per flop than on K = 1008 or 1040,
    ``bench/RESULTS.md``). All of ``fits`` when none is left, or the target does not say
    its L1's ways."""
    facts = getattr(getattr(space, "target", None), "facts", None)
    ways = getattr(facts, "l1d_ways", 0)
    if not ways:
        return fits
    kept = [r for r in fits if all(_rows_per_l1_set(s, r, facts.l1d_set_span) < ways for s in row_strides)]
    return kept or fits


def _row_strides(op, row: int, vector: int) -> list[int]:
    """Bytes between consecutive rows of each input ``op`` reads at its ``row`` axis as a
    plain index and not along its ``vector`` axis (the inputs a register tile broadcasts
    one value per row from: matmul's A)."""
    row_var, vector_var = op.axis[row].var, op.axis[vector].var
    strides = []
    for read in post_order(op.body):
        if not isinstance(read, TensorRead) or any(vector_var in free_vars(i) for i in read.indices):
            continue
        for dim, index in enumerate(read.indices):
            if index is row_var:
                strides.append(math.prod(read.tensor.shape[dim + 1:]) * dtypes.nbytes(read.tensor.dtype))
    return strides


#: Bytes of a cache line.
LINE_BYTES = 64


def _rows_per_l1_set(stride: int, rows: int, set_span: int) -> int:
    """The most of ``rows`` rows ``stride`` bytes apart whose first lines share one L1 set
    (sets repeat every ``set_span`` bytes). Rows not a whole number of lines apart start at
    drifting offsets and spread over the sets: 1."""
    if stride % LINE_BYTES:
        return 1
    sets = max(1, set_span // LINE_BYTES)
    distinct = sets // math.gcd(stride // LINE_BYTES, sets)
    return -(-rows // distinct)


def _few_rows(op, vector: int) -> bool:
    """Whether ``op``'s output has fewer than ``FEW_ROWS`` rows when vectorized along axis
    ``vector`` (the product of the other axes' extents)."""
    return math.prod(iv.extent for n, iv in enumerate(op.axis) if n != vector) < FEW_ROWS


def _most_rows(fits: list[int], extent: int) -> int:
    """The row count among ``fits`` that computes the most useful rows per register tile:
    ``r`` rows of which the last tile wastes ``ceil(extent / r) * r - extent``; on a tie the
    one that wastes fewer (14 rows of a 56-row axis, not 16, which compute 64), then the larger."""
    if not fits:
        return 1

    def waste(r: int) -> int:
        return -(-extent // r) * r - extent

    return max(fits, key=lambda r: (round(r * extent / (extent + waste(r)), 9), -waste(r), r))


def _row_axis(op, vector: int = -1) -> int | None:
    """The spatial axis the register tile's rows go on when it vectorizes axis ``vector``:
    the innermost other one that no input read along ``vector`` depends on, so one vector
    of that input serves every row (matmul's ``i``: ``B[k, j]`` ignores it; conv2d NCHW
    vectorized over ``x``: the output channel ``k``, which the data ignores; vectorized
    over ``k``: ``x``, which the kernel ignores). None for an op of one axis; the innermost
    other axis when every such input reads all of them. For a stage that combines blocks
    online, the longest other axis (attention's query rows)."""
    if len(op.axis) < 2:
        return None
    vector = vector % len(op.axis)
    if combines_online(op):  # its rows: the longest other axis (attention's queries)
        return max((n for n in range(len(op.axis)) if n != vector), key=lambda n: op.axis[n].extent)
    along = op.axis[vector].var
    reads = [read for read in post_order(op.body) if isinstance(read, TensorRead)]
    used = set().union(*(free_vars(idx) for read in reads if any(along in free_vars(i) for i in read.indices)
                         for idx in read.indices))
    others = [n for n in range(len(op.axis) - 1, -1, -1) if n != vector]
    return next((n for n in others if op.axis[n].var not in used), others[0])


def _s3_values(cands) -> list[int]:
    return sorted({t[2] for t in cands})


def _largest(values: list[int], limit: int) -> int | None:
    fitting = [v for v in values if v <= limit]
    return max(fitting) if fitting else None


def _nearest_tile(cands, s3: int, s2: int):
    """The candidate (b, S2, S3) with S3 == ``s3`` and b == 1 whose S2 is closest to ``s2``."""
    same = [t for t in cands if t[2] == s3 and t[0] == 1]
    if not same:
        return None
    return min(same, key=lambda t: (abs(t[1] - s2), -t[1]))


def _reduce_tiles(op, cands: dict, block: int) -> dict:
    """Inner reduction tiles by axis, filled innermost axis first, product at most ``block``;
    for a stage that combines blocks online, one block per step of its outer loop (the
    stages it hosts then compute one block at a time)."""
    if combines_online(op):
        return {iv.name: (1,) for iv in op.reduce_axis}
    tiles = {}
    left = block
    for iv in reversed(op.reduce_axis):
        fitting = [c for c in cands[iv.name] if c <= left]
        tiles[iv.name] = (max(fitting) if fitting else 1,)
        left = max(1, left // tiles[iv.name][0])
    return tiles


def _unroll(cands) -> int:
    """An unroll budget that unrolls the register tile's rows but not the reduction."""
    return 64 if 64 in cands else max(cands)
