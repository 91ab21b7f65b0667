"""Schedules: how a tensor expression's loops are shaped, and lowering to a loop IR.

    s = schedule.create_schedule(C)
    io, jo, ii, ji = s[C].tile(C.op.axis[0], C.op.axis[1], 32, 32)
    print(schedule.lower(s, [A, B, C]))
    print(schedule.describe_lowered(schedule.lower(s, [A, B, C])))  # what the code does, in words
"""
from . import ir
from .explain import describe_lowered
from .ir import Buffer, LoweredFunc
from .lower import lower
from .stage import THREAD_TAGS, Fuse, Schedule, ScheduleError, Split, Stage, create_schedule
from .passes import IRVerifyError, verify
