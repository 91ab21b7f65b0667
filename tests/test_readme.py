"""Every code block of README.md runs as written, so the README cannot rot.

What a new user would do, block by block:

- ``python`` blocks run in a fresh interpreter (this one), each in a temporary directory of
  its own, with ``AUTOTUNE_DB``, ``AUTOTUNE_CACHE_DIR`` and ``XDG_CACHE_HOME`` pointing
  into it: no block reads or writes the user's own tuning database or kernel cache.
- ``bash`` blocks run with ``bash -e`` in the same kind of directory (a failing command fails
  the block; a pipeline's status is that of its last command, as at a prompt), with an
  ``autotune`` on ``PATH`` that runs this interpreter's ``autotune.cli``.
- ``text`` blocks (diagrams, output samples) are not run. Every block names one of these
  three languages.

The one rule for trial counts: blocks run exactly as written, except that ``--trials N`` in a
bash block becomes ``--trials 2`` (the README shows the counts a user would pick; two
trials exercise the same code). So every op command of a bash block must say ``--trials``,
else it would run its default thousand trials; a test checks that.

A block is left out only by a visible marker on the line before it,
``<!-- readme-test: skip (reason) -->`` (blocks that install packages or create virtual
environments), and ``<!-- readme-test: slow (reason) -->`` moves a block into the slow suite
(``pytest -m slow``): the op commands on full-size shapes take minutes together, the rest
of the README runs in the default suite.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
LANGUAGES = ("python", "bash", "text")
SMALL_TRIALS = "--trials 2"
MARKER = re.compile(r"<!--\s*readme-test:\s*(\w+)\s*(?:\((.*)\))?\s*-->")
FENCE = re.compile(r"^```(.*)$")
#: autotune subcommands that tune nothing (no --trials needed)
NOT_TUNING = ("log", "replay", "--help", "-h", "--version")


@dataclass(frozen=True)
class Block:
    line: int              # of the opening fence, 1-based
    language: str
    code: str
    marker: str | None     # "skip" or "slow"
    reason: str | None

    @property
    def id(self) -> str:
        return f"{self.language}-line{self.line}"


def readme_blocks(text: str) -> list[Block]:
    """The fenced blocks of ``text``, with the marker on the line before each (if any)."""
    blocks, lines, n = [], text.splitlines(), 0
    while n < len(lines):
        opening = FENCE.match(lines[n])
        if not opening:
            n += 1
            continue
        end = next((m for m in range(n + 1, len(lines)) if lines[m].startswith("```")), None)
        assert end is not None, f"README.md:{n + 1}: code block never closed"
        previous = next((lines[m] for m in range(n - 1, -1, -1) if lines[m].strip()), "")
        marker = MARKER.fullmatch(previous.strip())
        blocks.append(Block(n + 1, opening.group(1).strip(), "\n".join(lines[n + 1:end]) + "\n",
                            marker.group(1) if marker else None, marker.group(2) if marker else None))
        n = end + 1
    return blocks


BLOCKS = readme_blocks(README.read_text())


def runnable(block: Block):
    marks = []
    if block.marker == "skip":
        marks.append(pytest.mark.skip(reason=f"README.md:{block.line}: {block.reason}"))
    elif block.marker == "slow":
        marks.append(pytest.mark.slow)
    return pytest.param(block, id=block.id, marks=marks)


RUNNABLE = [runnable(b) for b in BLOCKS if b.language in ("python", "bash")]


def test_every_block_names_a_known_language_and_markers_give_reasons():
    assert BLOCKS, "README.md has code blocks"
    for block in BLOCKS:
        assert block.language in LANGUAGES, f"README.md:{block.line}: block language {block.language!r}"
        if block.marker is not None:
            assert block.marker in ("skip", "slow") and block.reason, \
                f"README.md:{block.line}: a marker is 'skip (reason)' or 'slow (reason)'"
            assert block.language != "text", f"README.md:{block.line}: text blocks never run; no marker needed"


def test_every_op_command_in_a_bash_block_says_how_many_trials():
    for block in BLOCKS:
        if block.language != "bash" or block.marker == "skip":
            continue
        for command in commands(block.code):
            words = command.split()
            if words[:1] == ["autotune"] and len(words) > 1 and words[1] not in NOT_TUNING \
                    and "--print-passes" not in words and "--help" not in words:
                assert "--trials" in words, f"README.md:{block.line}: {command!r} would tune 1000 trials"


def test_the_readme_names_no_file_outside_the_repository():
    text = README.read_text()
    assert "DESIGN.md" not in text and "shared notes" not in text
    for path in re.findall(r"`((?:bench|tests|autotune|schedule|backends|te|tuning_db)/[\w./-]+\.(?:py|md|jsonl))`",
                           text):
        assert (REPO / path).is_file(), f"README.md names {path}, which is not in the repository"


def commands(code: str) -> list[str]:
    """Each command of a shell block (split at ``&&``, ``|`` and line ends)."""
    return [c.strip() for c in re.split(r"&&|\||\n", code) if c.strip() and not c.strip().startswith("#")]


def shell_code(code: str) -> str:
    return re.sub(r"--trials \d+", SMALL_TRIALS, code)


def block_env(root: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("AUTOTUNE_DB", "AUTOTUNE_DEBUG")}
    shim = root / "bin"
    shim.mkdir()
    autotune = shim / "autotune"
    autotune.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m autotune.cli "$@"\n')
    autotune.chmod(0o755)
    env.update(
        AUTOTUNE_DB=str(root / "tuning.db"),
        AUTOTUNE_CACHE_DIR=str(root / "kernel-cache"),
        XDG_CACHE_HOME=str(root / "xdg-cache"),
        PYTHONPATH=os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p),
        PATH=os.pathsep.join([str(shim), str(Path(sys.executable).parent), env.get("PATH", "")]),
        COLUMNS="100",
    )
    return env


@pytest.mark.parametrize("block", RUNNABLE)
def test_readme_block_runs(block: Block, tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    if block.language == "python":
        script = work / "block.py"
        script.write_text(block.code)
        command = [sys.executable, str(script)]
    else:
        script = work / "block.sh"
        script.write_text(shell_code(block.code))
        command = ["bash", "-e", str(script)]
    proc = subprocess.run(command, cwd=work, env=block_env(tmp_path), capture_output=True, text=True,
                          timeout=600 if block.marker == "slow" else 180)
    assert proc.returncode == 0, (
        f"README.md:{block.line} ({block.language}) exited {proc.returncode}\n"
        f"--- code\n{script.read_text()}--- stdout\n{proc.stdout}--- stderr\n{proc.stderr}")
    assert "Traceback" not in proc.stderr, f"README.md:{block.line}:\n{proc.stderr}"
