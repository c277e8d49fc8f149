"""Minutes per suite at the end of every run, so CI shows where its time goes.

A suite is a folder of unit tests (``unit/worker``) or a family of integration modules
named by the word after ``test_`` (``integration/sandbox`` holds test_sandbox_*.py).
Set-up, call and teardown all count: a session fixture's set-up is charged to the suite of
the first test that needed it, which is where it was paid. Under pytest-xdist the
workers' reports reach the controller, which sums them: a suite's minutes are its share
of the machine, not of the wall clock.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import PurePosixPath

import pytest

SECTION = "minutes per suite"


def suite_of(nodeid: str) -> str:
    """``tests/integration/test_sandbox_docker.py::test_x`` -> ``integration/sandbox``."""
    parts = PurePosixPath(nodeid.split("::", 1)[0]).parts
    if parts and parts[0] == "tests":
        parts = parts[1:]
    if not parts:
        return "other"
    if len(parts) == 1:  # a module at the top of tests/
        return PurePosixPath(parts[0]).stem
    tier, rest = parts[0], parts[1:]
    if len(rest) > 1:  # a folder: unit/bot, integration/distributed
        return f"{tier}/{rest[0]}"
    if tier == "unit":
        return tier
    stem = PurePosixPath(rest[0]).stem.removeprefix("test_")
    return f"{tier}/{stem.split('_', 1)[0]}"


class SuiteTimes:
    def __init__(self) -> None:
        self.seconds: defaultdict[str, float] = defaultdict(float)
        self.tests: defaultdict[str, set[str]] = defaultdict(set)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        suite = suite_of(report.nodeid)
        self.seconds[suite] += report.duration
        self.tests[suite].add(report.nodeid)

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        if not self.seconds:
            return
        terminalreporter.write_sep("=", SECTION)
        width = max(len("all suites"), *(len(name) for name in self.seconds))
        for name, secs in sorted(self.seconds.items(), key=lambda kv: (-kv[1], kv[0])):
            terminalreporter.write_line(
                f"{name:<{width}}  {secs / 60:6.1f} min  {len(self.tests[name]):4d} tests"
            )
        total = sum(self.seconds.values())
        terminalreporter.write_line(f"{'all suites':<{width}}  {total / 60:6.1f} min")


def pytest_configure(config: pytest.Config) -> None:
    config.pluginmanager.register(SuiteTimes(), "ribbit-suite-times")
