"""The ``autotune`` command line: one command per library op, ``autotune tune`` for a workload
defined in a Python file, and ``autotune log`` for the database.

    autotune matmul -M 1024 -N 1024 -K 1024 --trials 1000
    autotune tune --workload-file my_ops.py:my_gemv -p N=4096 -p K=4096
    autotune log top --workload matmul -k 5
    autotune model net.onnx --trials 2000

Modules, one noun each: ``tune_cmd`` (the op commands, generated from the workload
signatures, and ``tune --workload-file``), ``log_cmd`` (database inspection), ``options``
(shared options and types: one ``--workload``, ``--target``, ``--db`` and ``--json`` for
every command that has them), ``report`` (progress bar and summary), ``replay_cmd``
(``sample`` and ``replay``: search strategies compared on recorded measurements),
``model_cmd`` (``model``: a network from an ONNX file). Every command is a thin layer over the library
(``autotune.tune``, ``tuning_db.Database``); the library's own errors (``TaskError``,
``DatabaseError``, ``ValueError``) become a one-line ``Error: ...`` and exit status 1,
bad options a usage error with status 2. ``AUTOTUNE_DEBUG=1`` shows their tracebacks.
Output into a pipe whose reader has gone (``autotune log export - | head -1``) ends the
command quietly with status 141, as a program killed by SIGPIPE would.
"""
from __future__ import annotations

import os
import select
import sys

import click

from ..console import EXIT_INTERRUPTED, INTERRUPTED
from .interrupts import signals_interrupt
from .log_cmd import log_group
from .model_cmd import model_cmd
from .replay_cmd import replay_cmd, sample_cmd
from .tune_cmd import op_commands, tune_file_cmd

#: Exit status when standard output is a pipe nobody reads any more (128 + SIGPIPE, as a shell reports it).
EXIT_BROKEN_PIPE = 141


def is_user_error(exc: BaseException) -> bool:
    """Whether the library raised ``exc`` for something the user asked for (shown as one line):
    a ``tuning_db.DatabaseError``, or a ``ValueError`` (``TaskError``, te's errors, bad configs).

    tuning_db is looked up, not imported: usage errors and --help stay fast without it, and
    if it was never imported it raised nothing.
    """
    tuning_db = sys.modules.get("tuning_db")
    return isinstance(exc, ValueError) or (tuning_db is not None and isinstance(exc, tuning_db.DatabaseError))


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    lines = text.splitlines()
    return lines[0] + (" ..." if len(lines) > 1 else "")


def _caused_by_broken_pipe(exc: BaseException | None) -> bool:
    """Whether ``exc`` is a BrokenPipeError or was raised while handling one."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, BrokenPipeError):
            return True
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return False


def stdout_closed() -> bool:
    """Whether standard output is a pipe whose reading end is closed.

    A broken pipe of the tuner's own (to its measuring process) is a real error; only a
    closed standard output is a reader that had enough. poll() reports POLLERR on the
    writing end of a pipe without readers.
    """
    try:
        poller = select.poll()
        poller.register(sys.__stdout__.fileno(), select.POLLOUT)
        return any(events & select.POLLERR for _, events in poller.poll(0))
    except (AttributeError, OSError, ValueError):   # no poll(), no stdout, or not a file
        return False


def _exit_for_closed_stdout() -> None:
    """Exit with EXIT_BROKEN_PIPE, pointing stdout at /dev/null first: whatever is still
    buffered would otherwise fail again when the interpreter flushes it on exit."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.__stdout__.fileno())
    os.close(devnull)
    sys.exit(EXIT_BROKEN_PIPE)


class AutotuneGroup(click.Group):
    """A group that turns library errors into click errors (no traceback), ends an
    interrupted command with one line and status 130 (``interrupts.py``), and ends quietly
    when the reader of its output has gone."""

    def invoke(self, ctx: click.Context):
        try:
            with signals_interrupt():
                return super().invoke(ctx)
        except KeyboardInterrupt:
            click.echo(INTERRUPTED, err=True)
            raise SystemExit(EXIT_INTERRUPTED) from None
        except Exception as exc:
            if _caused_by_broken_pipe(exc) and stdout_closed():
                _exit_for_closed_stdout()
            if not is_user_error(exc) or os.environ.get("AUTOTUNE_DEBUG"):
                raise
            raise click.ClickException(_one_line(exc)) from None


@click.group(cls=AutotuneGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="autotune-te", prog_name="autotune")
def cli():
    """Tune tensor-expression operators and inspect the tuning database.

    \b
    Examples:
        autotune matmul --trials 1000
        autotune conv2d --N 1 --C 64 --H 56 --W 56 --K 64 --R 3 --S 3 --padding 1
        autotune log workloads
    """


for _command in op_commands():
    cli.add_command(_command)
cli.add_command(tune_file_cmd)
cli.add_command(model_cmd)
cli.add_command(log_group)
cli.add_command(sample_cmd)
cli.add_command(replay_cmd)


def main(argv: list[str] | None = None) -> None:
    """Entry point of the ``autotune`` console script.

    A closed standard output is also caught here, where it escapes the commands (click's
    own help and usage output): status EXIT_BROKEN_PIPE, no traceback.
    """
    try:
        cli.main(args=argv, prog_name="autotune")
    except BrokenPipeError:
        _exit_for_closed_stdout()
    except SystemExit as done:
        if done.code not in (0, None, EXIT_BROKEN_PIPE) and stdout_closed():
            _exit_for_closed_stdout()
        raise
