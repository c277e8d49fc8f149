"""trainer/README.md's admin walkthrough (split, train, score, promote, delete) is what
``scripts/admin-walkthrough.sh`` prints (issue #33): the test runs the script on a fresh
folder and checks the README's command lines and output lines against its transcript, so
neither can change without the other."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support import require_service

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "admin-walkthrough.sh"
README = ROOT / "trainer" / "README.md"
SECTION = "## Walkthrough: split, train, score, promote, delete"
# How the README shows the script's work folder, which differs on every run.
WORK = "$WORK"
TRIMMED_LINES = "[... trimmed"  # a marker line: lines left out here
CUT_LINE = " [...]"  # a line ending so was cut: the rest is not shown


@dataclass(frozen=True)
class Walkthrough:
    """The walkthrough as the README shows it: the commands, in order, and every line
    shown (commands and output, trim markers left out)."""

    commands: list[str]
    lines: list[str]


def squeezed(line: str) -> str:
    """``line`` with runs of whitespace as one space: the CLI separates columns with tabs,
    the README with spaces."""
    return " ".join(line.split())


def walkthrough_in(readme: str) -> Walkthrough:
    start = readme.index(SECTION)
    end = readme.find("\n## ", start + len(SECTION))
    section = readme[start : end if end != -1 else len(readme)]
    blocks = re.findall(r"^```\n(.*?)^```$", section, flags=re.MULTILINE | re.DOTALL)
    lines = [
        squeezed(line)
        for block in blocks
        for line in block.splitlines()
        if line.strip() and not line.startswith(TRIMMED_LINES)
    ]
    return Walkthrough([line for line in lines if line.startswith("$ ")], lines)


def missing_from(transcript: list[str], shown: list[str]) -> list[str]:
    """The lines of ``shown`` that ``transcript`` does not print in that order (a line
    ending in the cut marker matches any line it begins); empty when all are there."""
    position = 0
    for index, line in enumerate(shown):
        prefix = line.removesuffix(CUT_LINE) if line.endswith(CUT_LINE) else None
        while position < len(transcript):
            printed = transcript[position]
            position += 1
            if printed == line or (prefix is not None and printed.startswith(prefix)):
                break
        else:
            return shown[index:]
    return []


def test_the_readme_shows_a_walkthrough_with_every_step() -> None:
    shown = walkthrough_in(README.read_text())
    verbs = [" ".join(c.split()[2:4]) for c in shown.commands if c.startswith("$ ribbit")]
    for step in ("envs split", "train --model", "model evaluate", "model promote", "data delete"):
        assert any(v.startswith(step) for v in verbs), (step, verbs)


def test_a_line_the_transcript_does_not_print_is_reported() -> None:
    transcript = ["$ ribbit envs list", "a train", "b heldout", "run 1: rates 0.14/s"]
    assert missing_from(transcript, ["$ ribbit envs list", "b heldout"]) == []
    assert missing_from(transcript, ["run 1: [...]"]) == []
    # Out of order, changed, or cut where the transcript differs: each is reported.
    assert missing_from(transcript, ["b heldout", "a train"]) == ["a train"]
    assert missing_from(transcript, ["a test"]) == ["a test"]
    assert missing_from(transcript, ["run 2: [...]"]) == ["run 2: [...]"]


@pytest.mark.integration
@pytest.mark.slow
@pytest.mark.timeout(900)  # 3 to 4.5 minutes on two shared cores
def test_the_script_prints_what_the_readme_shows(tmp_path: Path) -> None:
    require_service(shutil.which("bwrap") is not None, "bubblewrap")
    work = tmp_path / "walkthrough"
    env = {**os.environ, "PYTHON": sys.executable, "RIBBIT_SANDBOX__BACKEND": "bubblewrap"}
    env.pop("MODEL", None)  # the tiny model the README's output comes from
    run = subprocess.run(
        ["bash", str(SCRIPT), str(work)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=840,
    )
    assert run.returncode == 0, run.stdout[-4000:]
    transcript = [squeezed(line.replace(str(work), WORK)) for line in run.stdout.splitlines()]
    shown = walkthrough_in(README.read_text())
    # Every command the script runs is in the README, and no other.
    assert [line for line in transcript if line.startswith("$ ")] == shown.commands
    assert missing_from(transcript, shown.lines) == [], "\n".join(transcript)
