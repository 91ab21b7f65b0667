"""The loop-IR and expression names the feature modules read: the package's one import point.

Every other module of ``autotune.features`` takes what it needs from ``schedule`` and
``te`` through here, so a name that moves in those packages is fixed in one place; and
from ``backends`` the one rule of the C backends the IR does not show (``vectorizable``:
whether a register tile is printed as vector variables).
"""
from __future__ import annotations

from backends.vector_tile import vectorizable
from schedule import ir
from schedule.ir import Allocate, Barrier, BufferLoad, BufferStore, For, IfThenElse, LoweredFunc, Seq
from schedule.simplify import interval, structural_key
from te import dtypes
from te.expr import Binary, Call, Cast, Compare, Const, Logical, Not, Select, Var, free_vars

__all__ = ["Allocate", "Barrier", "Binary", "BufferLoad", "BufferStore", "Call", "Cast", "Compare", "Const", "For",
           "IfThenElse", "Logical", "LoweredFunc", "Not", "Select", "Seq", "Var", "dtypes", "free_vars", "interval",
           "ir", "structural_key", "vectorizable"]
