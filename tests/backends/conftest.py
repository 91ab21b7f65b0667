"""Makes the schedule tests' helpers importable here (``from sched_helpers import check``).

Only ``tests/schedule`` goes on ``sys.path``, never ``tests/`` itself: ``tests/te`` would
shadow the ``te`` package there.
"""
from __future__ import annotations

import sys
from pathlib import Path

_SCHEDULE_TESTS = str(Path(__file__).resolve().parents[1] / "schedule")
if _SCHEDULE_TESTS not in sys.path:
    sys.path.insert(0, _SCHEDULE_TESTS)
