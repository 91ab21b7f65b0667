"""Register promotion of accumulators: the pass lives in ``schedule.passes.promote_accumulators``."""
from .passes.promote_accumulators import MAX_TILE, promote_accumulators, promote_accumulators_pass

__all__ = ["MAX_TILE", "promote_accumulators", "promote_accumulators_pass"]
