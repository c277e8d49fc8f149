"""Run a repository's test command in a sandbox once, with per-test results: the one
way the test gate, the environment builder and the reward run tests.

pytest is asked for a JUnit report through ``PYTEST_ADDOPTS``, never by appending
flags to the command, so it reaches pytest however the command starts it
(``pytest``, ``python -m pytest -q``, ``make test``, a script; tox too, which is
told to pass the variable on through ``TOX_OVERRIDE``). The same variable carries
node ids when a caller selects tests: pytest puts its contents before the
command's own arguments. Any other JUnit file the command writes (jest-junit,
go-junit-report...) is read when pytest's own report is absent; when it is there it
alone counts, so a file the code under test drops into the tree cannot add passes.
"""

from __future__ import annotations

import shlex
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass

from worker.gates.junit import Existing, JUnitError, Outcome, TestCase, outcomes, parse_junit
from worker.sandbox.base import WORKSPACE, ExecResult, Sandbox

REPORT_DIR = ".ribbit-tests"
SHORT_TIMEOUT_S = 60
MAX_OTHER_REPORTS = 20
# One environment string may hold at most 128 KiB on Linux (MAX_ARG_STRLEN); the
# JUnit options and the shell's own variables need some of it.
MAX_SELECT_CHARS = 100_000
_EXISTS_BATCH = 2000
_EXISTS_SCRIPT = 'for f in "$@"; do [ -f "$f" ] && printf "%s\\0" "$f"; done; exit 0'


@dataclass(frozen=True)
class TestRun:
    __test__ = False  # not a pytest test class, whatever its name says

    command: str
    result: ExecResult
    cases: tuple[TestCase, ...]
    report: bool  # a JUnit report was read (else only the exit code tells)

    @property
    def timed_out(self) -> bool:
        return self.result.timed_out

    @property
    def exit_code(self) -> int:
        return self.result.exit_code

    @property
    def outcomes(self) -> dict[str, Outcome]:
        return outcomes(self.cases)

    @property
    def by_id(self) -> dict[str, TestCase]:
        """One case per id: where an id was reported more than once, its worst."""
        worst = self.outcomes
        chosen: dict[str, TestCase] = {}
        for case in self.cases:
            if case.outcome == worst[case.id]:
                chosen.setdefault(case.id, case)
        return chosen

    def log(self, limit: int = 4000) -> str:
        text = f"{self.result.stdout}\n{self.result.stderr}".strip()
        return text if len(text) <= limit else "…" + text[-limit:]


def pytest_env(report_path: str, select: Sequence[str] = ()) -> dict[str, str]:
    """The environment that makes pytest write ``report_path`` (xunit1: it keeps the
    ``file`` attribute) and, when given, run only the ``select``ed node ids."""
    # pytest splits PYTEST_ADDOPTS like a shell would, hence the quoting.
    words = [f"--junitxml={report_path}", "-o", "junit_family=xunit1", *select]
    return {
        "PYTEST_ADDOPTS": " ".join(shlex.quote(w) for w in words),
        "TOX_OVERRIDE": "testenv.pass_env+=PYTEST_ADDOPTS",
    }


def select_batches(ids: Iterable[str], limit: int = MAX_SELECT_CHARS) -> list[list[str]]:
    """``ids`` in batches whose quoted form fits one PYTEST_ADDOPTS."""
    batches: list[list[str]] = [[]]
    size = 0
    for test_id in ids:
        cost = len(shlex.quote(test_id)) + 1
        if batches[-1] and size + cost > limit:
            batches.append([])
            size = 0
        batches[-1].append(test_id)
        size += cost
    return [b for b in batches if b]


def sandbox_files(sandbox: Sandbox, cwd: str = WORKSPACE) -> Existing:
    """``existing`` for :func:`parse_junit`: which paths are files in the sandbox."""

    def existing(paths: Collection[str]) -> set[str]:
        found: set[str] = set()
        ordered = sorted(paths)
        for i in range(0, len(ordered), _EXISTS_BATCH):
            batch = ordered[i : i + _EXISTS_BATCH]
            result = sandbox.exec(
                ["bash", "-c", _EXISTS_SCRIPT, "exists", *batch],
                timeout=SHORT_TIMEOUT_S,
                cwd=cwd,
            )
            found.update(p for p in result.stdout.split("\0") if p in batch)
        return found

    return existing


def run_tests(
    sandbox: Sandbox,
    command: str,
    *,
    timeout: float,
    select: Sequence[str] = (),
    tag: str = "run",
) -> TestRun:
    """Run ``command`` once in ``sandbox``'s workspace; ``tag`` keeps the report files of
    several runs in one sandbox apart."""
    where = sandbox.exec(["pwd"], timeout=SHORT_TIMEOUT_S)
    workspace = where.stdout.strip() if where.exit_code == 0 and where.stdout.strip() else WORKSPACE
    marker = f"{REPORT_DIR}/start-{tag}"
    own = f"{REPORT_DIR}/junit-{tag}.xml"
    sandbox.exec(["mkdir", "-p", REPORT_DIR], timeout=SHORT_TIMEOUT_S)
    sandbox.exec(["rm", "-f", own], timeout=SHORT_TIMEOUT_S)
    sandbox.exec(["touch", marker], timeout=SHORT_TIMEOUT_S)
    # The command comes from the repository's config (trusted, like CI config), never
    # from an issue or a model; what Ribbit adds travels in the environment.
    result = sandbox.exec(command, timeout=timeout, env=pytest_env(f"{workspace}/{own}", select))
    existing = sandbox_files(sandbox)
    cases = _read_report(sandbox, own, existing)
    if cases is None:
        found: list[TestCase] = []
        any_report = False
        for rel in _other_reports(sandbox, marker):
            more = _read_report(sandbox, rel, existing)
            if more is not None:
                any_report = True
                found.extend(more)
        return TestRun(command, result, tuple(found), any_report)
    return TestRun(command, result, tuple(cases), True)


def _read_report(sandbox: Sandbox, rel: str, existing: Existing) -> list[TestCase] | None:
    try:
        return parse_junit(sandbox.read_file(rel), existing)
    except (OSError, JUnitError):
        return None


def _other_reports(sandbox: Sandbox, marker: str) -> list[str]:
    """XML files the command wrote (newer than ``marker``), outside .git and vendored trees."""
    listing = sandbox.exec(
        [
            "find",
            ".",
            "(",
            "-path",
            "./.git",
            "-o",
            "-path",
            f"./{REPORT_DIR}",
            "-o",
            "-name",
            "node_modules",
            ")",
            "-prune",
            "-o",
            "-type",
            "f",
            "-name",
            "*.xml",
            "-newer",
            marker,
            "-print",
        ],
        timeout=SHORT_TIMEOUT_S,
    )
    written = [line[2:] for line in listing.stdout.splitlines() if line.startswith("./")]
    return written[:MAX_OTHER_REPORTS]
