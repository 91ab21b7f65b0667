"""The layout of a feature vector: its sizes, the name of every slot, and the value scale.

    [row of store 0 | row of store 1 | globals]
    row  = compute and loop figures, then 1 + MAX_LOADS access slots

Every module that fills a part of the vector appends its values in the order the
names here list them; ``FEATURE_NAMES`` is the contract with the trained models.
"""
from __future__ import annotations

import math

from ._deps import ir

#: Distinct loads kept per store (the store itself is access slot 0).
MAX_LOADS = 3
#: Stores whose rows enter the vector (those with the most total flops).
MAX_STORES = 2
#: Footprint levels reported per access: the 1, 2, 3, 4 innermost loops.
LEVELS = 4

KINDS = (ir.SERIAL, ir.PARALLEL, ir.VECTORIZED, ir.UNROLLED, ir.THREAD_BINDING)
SCOPES = ir.SCOPES  # global, local, shared

OP_FIELDS = ("f_addsub", "f_mul", "f_div", "f_math", "f_cmp", "select", "int_arith", "int_divmod", "bool_ops")
LEVEL_NAMES = tuple(f"l{n}" for n in range(LEVELS)) + ("par", "all")

ACCESS_NAMES = (
    ["present", *(f"scope_{s}" for s in SCOPES), "elem_bytes", "stride", "stride_zero", "stride_one", "stride_big"]
    + [f"bytes_{lv}" for lv in LEVEL_NAMES]
    + [f"reuse_{lv}" for lv in LEVEL_NAMES[:LEVELS]]
    + ["reuse_dis_iter", "reuse_dis_bytes", "reuse_ct", "no_reuse"]
)
ROW_NAMES = (
    ["present", "rmw", *OP_FIELDS, "flops", "total_flops", "executions", "n_loops", "depth", "inner_extent"]
    + [f"inner_{k}" for k in KINDS]
    + ["vec_lanes", "vec_inner", "unroll_prod", "unroll_num", "par_prod", "par_num", "work_per_thread",
       "loops_below_par", "block_prod", "thread_prod", "guards", "tail_loops", "n_loads"]
    + [f"total_bytes_{lv}" for lv in LEVEL_NAMES]
    + ["ai_all", "ai_par", f"ai_l{LEVELS - 1}"]
)
GLOBAL_NAMES = [
    "total_flops", "n_stores", "n_loops", "n_eff_loops", "max_par", "local_bytes", "shared_bytes", "temp_bytes",
    "guards", "tail_loops", "barriers", "total_executions", "vec_flop_frac", "par_flop_frac",
    "gpu_blocks", "gpu_threads", "vector_tile_frac",
]

FEATURE_NAMES: list[str] = (
    [f"s{r}.{name}" for r in range(MAX_STORES) for name in
     ROW_NAMES + [f"a{a}.{n}" for a in range(1 + MAX_LOADS) for n in ACCESS_NAMES]]
    + [f"g.{name}" for name in GLOBAL_NAMES]
)
FEATURE_DIM = len(FEATURE_NAMES)
ROW_DIM = len(ROW_NAMES) + (1 + MAX_LOADS) * len(ACCESS_NAMES)


def log_scale(x: float) -> float:
    """Counts, extents and bytes enter the vector as log2(1 + x); 0 for "none"."""
    return math.log2(1.0 + x) if x > 0 else 0.0


def prod0(xs) -> int:
    """The product of ``xs``, or 0 when there are none (so "no such loop" logs to 0)."""
    xs = list(xs)
    return math.prod(xs) if xs else 0
