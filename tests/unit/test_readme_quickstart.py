"""The README's quickstart names only what exists (issue #36): at most ten steps, every
`ribbit` command line with its flags accepted by the CLI, every RIBBIT_ variable a real
setting, every make target a target of the Makefile; and the README's links lead to files
and headings that are there, so moving a section away cannot strand a link to it.

Running the quickstart end to end (the local forge, weights from a folder, a replayed
model) is tests/integration/test_quickstart_e2e.py."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest
from click.testing import CliRunner

from bot.cli import main
from bot.settings_variables import settings_table
from worker.settings import WorkerSettings

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
QUICKSTART = "## Quickstart: from a fresh machine to a draft PR"


@dataclass(frozen=True)
class Invocation:
    """One `ribbit ...` command line the quickstart shows: its subcommand path and flags."""

    words: tuple[str, ...]
    flags: tuple[str, ...]


def section(text: str, heading: str) -> str:
    body = text.split(heading + "\n", 1)[1]
    return re.split(r"^## ", body, maxsplit=1, flags=re.M)[0]


def steps(text: str) -> list[int]:
    """The numbers of the top-level numbered steps."""
    return [int(n) for n in re.findall(r"^(\d+)\. ", text, flags=re.M)]


def invocations(text: str) -> list[Invocation]:
    # Always spelled `.venv/bin/ribbit` in the quickstart, which tells a command line from
    # the label, the extra (`ribbit[worker]`) and the example host named ribbit too.
    found = []
    for match in re.finditer(r"\.venv/bin/ribbit((?: [a-z][a-z-]*)*)((?: --?[^`\n]*)?)", text):
        words = tuple(match.group(1).split())
        flags = tuple(re.findall(r"(?<!\S)(--[a-z][a-z-]*)", match.group(2)))
        found.append(Invocation(words, flags))
    return found


def settings_named(text: str) -> set[str]:
    return set(re.findall(r"\bRIBBIT_[A-Z0-9_]*[A-Z0-9]", text))


def make_targets(text: str) -> set[str]:
    # `make X` as a command: a line or a code span starts with it (not the package `make`
    # in an apt-get line).
    return set(re.findall(r"(?:^|`)[ \t]*make ([a-z][a-z-]*)", text, flags=re.M))


def unknown_flags(invocation: Invocation, data_dir: Path) -> list[str] | None:
    """The flags `ribbit WORDS --help` does not list; None when the command does not exist."""
    done = CliRunner().invoke(
        main, [*invocation.words, "--help"], env={"RIBBIT_DATA_DIR": str(data_dir)}
    )
    if done.exit_code != 0:
        return None
    return [f for f in invocation.flags if not re.search(rf"(?<![\w-]){f}\b", done.output)]


def slug(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation but - and _ dropped."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def broken_links(text: str, base: Path) -> list[str]:
    anchors = {slug(h) for h in re.findall(r"^#+ (.+)$", text, flags=re.M)}
    broken = []
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if target.startswith(("http://", "https://")):
            continue
        path, _, anchor = target.partition("#")
        # Anchors are checked within this file only; a link into another file, by its path.
        found = (base / path).exists() if path else anchor in anchors
        if not found:
            broken.append(target)
    return broken


@pytest.fixture(scope="module")
def quickstart() -> str:
    return section(README.read_text(), QUICKSTART)


def test_the_quickstart_has_at_most_ten_steps_in_order(quickstart: str) -> None:
    numbers = steps(quickstart)
    assert numbers == list(range(1, len(numbers) + 1)) and 5 <= len(numbers) <= 10, numbers


def test_every_ribbit_command_line_and_flag_exists(quickstart: str, tmp_path: Path) -> None:
    found = invocations(quickstart)
    assert {i.words for i in found} >= {("model", "pull"), ("doctor",), ("jobs",)}, found
    wrong = {i: unknown_flags(i, tmp_path) for i in found}
    assert {i: w for i, w in wrong.items() if w != []} == {}


def test_every_ribbit_variable_is_a_setting(quickstart: str) -> None:
    table = settings_table(WorkerSettings)
    named = settings_named(quickstart)
    assert len(named) >= 10, named
    assert sorted(n for n in named if f"| `{n}` |" not in table) == []


def test_every_make_target_exists(quickstart: str) -> None:
    makefile = (ROOT / "Makefile").read_text()
    targets = make_targets(quickstart)
    assert targets >= {"install", "serve"}, targets
    assert sorted(t for t in targets if not re.search(rf"^{t}:", makefile, flags=re.M)) == []


def test_the_first_screen_shows_the_two_commands() -> None:
    first_screen = README.read_text().splitlines()[:25]
    assert any(line.strip().startswith("make serve") for line in first_screen)
    assert any(line.strip().startswith("make test") for line in first_screen)
    assert "make test" in (ROOT / ".ci" / "run").read_text()  # what CI runs, as it says


@pytest.mark.parametrize(
    "doc", ["README.md", "docs/architecture.md", "docs/benchmarks/README.md"], ids=str
)
def test_links_lead_somewhere(doc: str) -> None:
    path = ROOT / doc
    assert broken_links(path.read_text(), path.parent) == []


def test_the_checks_catch_what_does_not_exist(tmp_path: Path) -> None:
    planted = (
        "1. `.venv/bin/ribbit model pull --frm DIR` then `.venv/bin/ribbit modle list`,\n"
        "   `RIBBIT_GITHUB__WEBHOOK_SECRETS`, `make deploy`, [gone](#no-such-heading),\n"
        "   apt-get install make python3-venv\n"
        "   [moved](docs/nowhere.md).\n"
    )
    pull, typo = invocations(planted)
    assert unknown_flags(pull, tmp_path) == ["--frm"]
    assert unknown_flags(typo, tmp_path) is None
    assert "| `RIBBIT_GITHUB__WEBHOOK_SECRETS` |" not in settings_table(WorkerSettings)
    assert settings_named(planted) == {"RIBBIT_GITHUB__WEBHOOK_SECRETS"}
    assert make_targets(planted) == {"deploy"}
    assert broken_links(planted, ROOT) == ["#no-such-heading", "docs/nowhere.md"]
