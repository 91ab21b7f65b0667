"""The README documents every command, and its examples use only commands and options that exist."""
from __future__ import annotations

import re
import shlex
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

import te
from autotune.cli import cli
from autotune.cli.options import TUNERS
from autotune.cli.tune_cmd import EXAMPLES

README = Path(__file__).resolve().parents[2] / "README.md"


def _section(text: str, title: str) -> str:
    start = text.index(f"## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start:end if end != -1 else None]


def _commands() -> list[tuple[str, ...]]:
    """Every leaf command as its word path: ("matmul",), ("log", "top"), ..."""
    paths = []
    for name, cmd in cli.commands.items():
        if isinstance(cmd, click.Group):
            paths += [(name, sub) for sub in cmd.commands]
        else:
            paths.append((name,))
    return paths


def _examples(text: str) -> list[str]:
    """``autotune ...`` lines of code blocks and inline code spans."""
    blocks = re.findall(r"```bash\n(.*?)```", text, re.S)
    lines = [line.strip() for block in blocks for line in block.splitlines()]
    lines += re.findall(r"`(autotune [^`]*)`", text)
    return sorted({line for line in lines if line.startswith("autotune ")})


def test_every_command_is_documented_in_the_command_line_section():
    section = _section(README.read_text(), "Command line")
    missing = [" ".join(p) for p in _commands() if not re.search(rf"`autotune {' '.join(p)}\b", section)
               and f"autotune {' '.join(p)} " not in section]
    assert not missing, f"README's Command line section does not document: {', '.join(missing)}"


def test_one_command_per_library_workload():
    commands = {p[0] for p in _commands() if p[0] not in ("log", "replay", "sample", "tune", "model")}
    assert set(te.library_workloads()) <= commands <= set(te.list_workloads())


def test_quick_start_runs_the_main_command():
    assert "autotune matmul --trials 1000" in _section(README.read_text(), "Quick start")


def test_database_location_rule_is_documented():
    section = _section(README.read_text(), "Command line")
    for piece in ("$AUTOTUNE_DB", "$XDG_CACHE_HOME/autotune/tuning.db", "~/.cache/autotune/tuning.db"):
        assert piece in section


def test_help_examples_are_the_readme_examples():
    text = README.read_text()
    for op, example in EXAMPLES.items():
        assert example in text, f"the --help example of {op} is not in the README"


@pytest.mark.parametrize("op", sorted(EXAMPLES))
def test_help_shows_the_example_whole(op):
    """The example may be broken over lines with shell continuations to fit 80 columns;
    read as a shell reads it, it is the README's."""
    text = CliRunner().invoke(cli, [op, "--help"], terminal_width=80).output
    block = text.split("Example:\n", 1)[1].split("\n\n", 1)[0].splitlines()
    assert all(line.endswith(" \\") for line in block[:-1]), block
    assert " ".join(line.strip().removesuffix("\\").strip() for line in block) == EXAMPLES[op]


def test_readme_names_the_workload_of_log_top_with_the_option():
    """`log top KEY` still works, but the documented form is --workload, as in the other commands."""
    text = README.read_text()
    assert "autotune log top --workload matmul" in text
    assert not re.search(r"autotune log top (?!-)", text), "README shows log top with a positional KEY"


def test_cli_tuner_names_are_the_library_tuners():
    from autotune.tuners import TUNERS as LIBRARY_TUNERS

    assert set(TUNERS) == set(LIBRARY_TUNERS)


@pytest.mark.parametrize("example", _examples(README.read_text()))
def test_readme_example_uses_real_commands_and_options(example):
    words = shlex.split(example.split(" | ")[0], comments=True)[1:]   # autotune's words only
    command: click.Command = cli
    while isinstance(command, click.Group) and words:
        assert words[0] in command.commands, f"{example}: no command {words[0]!r}"
        command, words = command.commands[words[0]], words[1:]
    known = {o for p in command.params for o in (*p.opts, *p.secondary_opts)} | {"--help", "-h"}
    unknown = [w for w in words if w.startswith("-") and w != "-" and w not in known and not re.fullmatch(r"-\d+", w)]
    assert not unknown, f"{example}: unknown option(s) {unknown}"
