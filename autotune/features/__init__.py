"""Features of a lowered loop nest, for the cost model: one fixed-length vector per schedule.

    func = task.lower(config)          # the loop IR (schedule.ir)
    x = extract(func)                  # float32[FEATURE_DIM], named by FEATURE_NAMES
    cache = FeatureCache()
    x = cache.get(task, config)        # lowers + extracts once per (task, config)

Features come from the loop IR, never from the config's knobs, so one model reads
every operator (Ansor's per-store features, adapted to our IR). The walk visits the IR
once, keeping the stack of enclosing loops, and makes one *row* per ``BufferStore``.
Each concern has its module:

    layout      sizes, the name of every slot, the log scale
    arithmetic  float ops per execution by kind, executions, total flops, intensity
    loops       the nest: innermost loop and its kind, vector lanes, unroll, parallel
                extent and work per thread
    access      per access (the store, up to ``MAX_LOADS`` distinct loads): scope,
                element size, stride, bytes touched and reuse at each loop level,
                Ansor's reuse distance
    gpu         block/thread extents per store and for the kernel
    extract     the walk that assembles rows and global features
    cache       ``FeatureCache``: lowered and extracted once, in a process pool when many

Loops of extent 1 are dropped from the stack first: they are no-ops in the code and
would shift every "n-th innermost loop" feature. A tail loop (extent
``min(f, n - i*f)``) counts with its largest extent and in ``tail_loops``. A load
equal to the store (an accumulator's read) is folded into the ``rmw`` flag. Load slots
are ordered by bytes touched over the nest, largest first.

The vector holds the rows of the two stores with the most total flops (ties: the one
with more executions times accesses, then program order; the second row is zero when
there is one store, its ``present`` flag says so), then global features: total flops,
stores, loops, parallel extent, allocated bytes by scope, guards, tail loops,
barriers, GPU blocks/threads, fractions of flops that are vectorized and parallel, and
the share of register tiles the C backends print as vector variables (the IR looks alike
whether a tile ends up in vector registers or as an array gcc may leave in memory; the
check is the backend's own rules, at a fixed width, and skipped under GPU thread loops).
Counts, extents and bytes are scaled with log2(1 + x) (0 for "none"); flags and
fractions stay raw. Extraction is plain Python and costs a fraction of a lowering,
hence ``FeatureCache``.
"""
from __future__ import annotations

from .cache import PARALLEL_MIN, FeatureCache
from .extract import describe, extract
from .layout import FEATURE_DIM, FEATURE_NAMES, LEVELS, MAX_LOADS, MAX_STORES

__all__ = ["FEATURE_DIM", "FEATURE_NAMES", "LEVELS", "MAX_LOADS", "MAX_STORES", "PARALLEL_MIN", "FeatureCache",
           "describe", "extract"]
