"""The ``autotune`` console script's entry point: the command line, imported with Ctrl-C
ending it as it ends a running command.

Importing ``autotune.cli`` takes over half a second (click, SQLAlchemy, the schedule
spaces), and a Ctrl-C in that time would print a traceback of the imports. This module
imports nothing of the tool's until ``main`` runs, so the interrupt is caught here: the one
line ``interrupted`` and status 130, as ``autotune.cli.interrupts`` ends commands.
"""
from __future__ import annotations

import sys

#: Kept equal to ``autotune.cli.interrupts`` (not imported from there: that import is what is guarded).
EXIT_INTERRUPTED = 130


def main() -> None:
    try:
        from autotune.cli import main as cli_main
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")
        raise SystemExit(EXIT_INTERRUPTED) from None
    cli_main()
