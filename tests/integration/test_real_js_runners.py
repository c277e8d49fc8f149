"""JavaScript runners judged without touching the tests' ``process.argv`` (issue #35):
a small command-line tool on commander whose jest tests parse ``process.argv``, with
commander's fix #2350 to its vendored commander 13.1.0 (tests/fixtures/commander-cli/
README.md: our own code, commander and the fix as published on npm), judged by ``ribbit
gates`` on bubblewrap with ``.ribbit.yml`` ``test: npx jest`` and the detected set-up
(``npm ci`` through the registry proxy).

The tool's tests, like commander's own, call ``program.parse()`` on ``process.argv``;
when Ribbit appended ``--ci --json --outputFile=...`` to jest that test failed on
``--ci`` ("unknown option '--ci'") before and after any patch. Through Ribbit's launcher
(worker/gates/nodelaunch.js) jest is told those options and the tests see the plain
command's argv. The fail-to-pass test was recorded by running the project's jest outside
Ribbit: the fix's test fails on 13.1.0 (the other 6 pass) and all 7 pass with the fix.
The same fix with no ``.ribbit.yml`` runs its package.json test script, ``jest && tsc
--noEmit``: jest per test, the type check by its exit code.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.fakes import git
from tests.support import gates_on_bubblewrap, require_service

pytestmark = [pytest.mark.integration, pytest.mark.timeout(1800)]

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "commander-cli"
FILES = (
    "src",
    "tests",
    "vendor",
    "package.json",
    "package-lock.json",
    "tsconfig.json",
    ".gitignore",
)
FAIL_TO_PASS = "tests/cli.test.js::when names given then prints the greeting"
NPX_JEST = "test: npx jest\n"
ISSUE = (
    "configureOutput changes the parent's settings (#2350)\nAfter copyInheritedSettings, "
    "calling configureOutput on the copy changes the original command's output settings "
    "too; it should change only the copy."
)


def _repo(root: Path, ribbit_yml: str | None) -> Path:
    """The tool before the fix as a git repository (file modes kept: ``src/cli.js`` is
    executable), with ``ribbit_yml`` as its ``.ribbit.yml`` when given."""
    repo = root / "repo"
    repo.mkdir()
    for name in FILES:
        source = FIXTURE / name
        if source.is_dir():
            shutil.copytree(source, repo / name)
        else:
            shutil.copy2(source, repo / name)
    if ribbit_yml is not None:
        (repo / ".ribbit.yml").write_text(ribbit_yml)
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "greet on commander 13.1.0")
    return repo


Gates = Callable[[str | None], tuple[int, dict[str, Any]]]


@pytest.fixture(scope="module")
def gates(tmp_path_factory: pytest.TempPathFactory) -> Gates:
    """``ribbit gates`` on the fix with a given ``.ribbit.yml`` (None: none), once each;
    one Ribbit data dir, so the second shares the first's cached ``npm ci``."""
    data = tmp_path_factory.mktemp("ribbit-data")
    reports: dict[str | None, tuple[int, dict[str, Any]]] = {}

    def run(ribbit_yml: str | None) -> tuple[int, dict[str, Any]]:
        require_service(shutil.which("bwrap") is not None, "bubblewrap")
        require_service(shutil.which("node") is not None, "node")
        if ribbit_yml not in reports:
            repo = _repo(tmp_path_factory.mktemp("commander"), ribbit_yml)
            reports[ribbit_yml] = gates_on_bubblewrap(repo, FIXTURE / "fix.patch", ISSUE, data)
        return reports[ribbit_yml]

    return run


def _tests_gate(report: dict[str, Any]) -> dict[str, Any]:
    return next(g for g in report["gates"] if g["name"] == "tests")


def _assert_verified(code: int, report: dict[str, Any]) -> dict[str, Any]:
    tests = _tests_gate(report)
    findings = [f | {"gate": g["name"]} for g in report["gates"] for f in g["findings"]]
    assert code == 0, (report.get("verdict"), findings, tests.get("logs", "")[-3000:])
    assert FAIL_TO_PASS in tests["evidence"], tests["evidence"]
    assert [f for f in findings if f["severity"] == "error"] == []
    details: dict[str, Any] = tests["details"]
    # Per-test results on both sides: the tool's 6 tests ran and passed, the one that
    # parses process.argv included, and the fix's test with them after it.
    before, after = details["before"], details["after"]
    failing = (before["failing"], after["failing"])
    assert before["per_test"] and before["counts"]["total"] == 6, (before, failing)
    assert after["counts"]["total"] == 7 and failing == ([], []), failing
    return details


def test_commanders_fix_under_npx_jest_is_verified_by_the_tools_tests(gates: Gates) -> None:
    details = _assert_verified(*gates(NPX_JEST))
    assert details["runner"] == "jest" and details["command_source"] == ".ribbit.yml"


def test_the_gate_log_shows_what_jest_was_told_and_the_argv_the_tests_saw(gates: Gates) -> None:
    logs = _tests_gate(gates(NPX_JEST)[1])["logs"]
    assert "$ npx jest\n# ran: jest --ci --json '--outputFile=<in-memory>'" in logs
    assert "the tests' process.argv is node node_modules/.bin/jest" in logs
    assert "unknown option '--ci'" not in logs


def test_with_no_ribbit_yml_its_compound_test_script_reports_per_test(gates: Gates) -> None:
    # ``jest && tsc --noEmit``: jest per test, the type check by its exit code.
    details = _assert_verified(*gates(None))
    assert details["runner"] == "jest" and details["command_source"] == "package.json"
    logs = _tests_gate(gates(None)[1])["logs"]
    assert "# then, judged by its exit code: tsc --noEmit" in logs
