"""Describing the machine a measurement was taken on (stored with every record).

A thin wrapper kept for its callers: the description is the target kind's
(``autotune.targets.describe``).
"""
from __future__ import annotations


def describe(target):
    """The ``tuning_db.TargetInfo`` of ``target`` (a spec or a Target) on this machine."""
    from .targets import describe as describe_target

    return describe_target(target)
