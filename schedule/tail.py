"""Tail guards turned into loop bounds: the pass lives in ``schedule.passes.tail_bounds``."""
from .passes.tail_bounds import guards_to_bounds, tail_bounds_pass

__all__ = ["guards_to_bounds", "tail_bounds_pass"]
