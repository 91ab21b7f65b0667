"""The ``autotune`` console script's entry point: the command line, imported with Ctrl-C
ending it as it ends a running command.

Importing ``autotune.cli`` takes over half a second (click, SQLAlchemy, the schedule
spaces), and a Ctrl-C in that time would print a traceback of the imports. This module
imports nothing of the tool's until ``main`` runs, so the interrupt is caught here: the one
line ``interrupted`` and status 130, as ``autotune.cli.interrupts`` ends commands.
"""
from __future__ import annotations

import sys

#: The exit status of an interrupted command (128 + SIGINT, as a shell reports Ctrl-C); here
#: rather than in ``autotune.cli.interrupts``, whose import is what ``main`` guards.
EXIT_INTERRUPTED = 130
#: What a command interrupted where it has nothing more to say prints.
INTERRUPTED = "interrupted"


def main() -> None:
    try:
        from autotune.cli import main as cli_main
    except KeyboardInterrupt:
        sys.stderr.write(INTERRUPTED + "\n")
        raise SystemExit(EXIT_INTERRUPTED) from None
    cli_main()
