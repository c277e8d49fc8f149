"""Skips: under ``CI=true`` a skipped test fails the run unless :data:`CI_SKIPS` lists it
with the reason it may not run there, and root-only tests say why they did not run.

A skip in CI is a test that never runs while the run looks green: a missing install step,
a module that no longer imports, a condition that stopped holding. So CI treats every
skip as a failure, except the ones below (the one place they are listed). On a
developer's machine skips stay skips (a laptop may lack Podman or root); the services'
own fixtures already fail under CI (tests/support.py ``require_service``).

Root-only tests (:func:`root_only`, :func:`skip_unless_root`) skip on a non-root machine
with a reason starting ``root-only:``, and the run's summary lists them and why, so they
do not vanish without a word; CI runs as root and runs them.
"""

from __future__ import annotations

import os
from collections.abc import Generator
from typing import Any

import pytest

from tests.support import in_ci

# Tests (node ids without their parameters) that may skip under CI=true, and why.
CI_SKIPS: dict[str, str] = {
    "tests/unit/worker/gates/test_adversarial.py::test_adversarial_case_local": (
        "a laptop's stand-in for the real sandbox backends: under CI every case runs on "
        "bubblewrap (and the run-sensitive ones on docker) in "
        "tests/integration/test_gates_adversarial.py, so the host-copy twin is skipped"
    ),
}

ROOT_ONLY = "root-only: "
HOW_TO_FIX = (
    "A skip under CI=true hides a test that never runs. Make it run in CI (install what it "
    "needs in .ci/run or scripts/system-deps.sh), or list it with the reason in "
    "tests/plugins/skips.py CI_SKIPS."
)


def root_only(why: str) -> pytest.MarkDecorator:
    """Mark a test that needs root (``why`` says for what)."""
    return pytest.mark.skipif(os.geteuid() != 0, reason=ROOT_ONLY + why)


def skip_unless_root(why: str) -> None:
    """Skip the running test on a non-root machine (``why`` says what needs root)."""
    if os.geteuid() != 0:
        pytest.skip(ROOT_ONLY + why)


def skip_reason(report: pytest.TestReport | pytest.CollectReport) -> str:
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2]).removeprefix("Skipped: ")
    return str(longrepr)


def listed(nodeid: str) -> bool:
    return nodeid.split("[", 1)[0] in CI_SKIPS


def _fail_unlisted_skip(report: pytest.TestReport | pytest.CollectReport) -> None:
    if not (report.skipped and in_ci()) or hasattr(report, "wasxfail") or listed(report.nodeid):
        return
    reason = skip_reason(report)
    report.outcome = "failed"
    report.longrepr = f"skipped under CI=true ({reason}).\n{HOW_TO_FIX}"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, Any, None]:
    outcome = yield
    _fail_unlisted_skip(outcome.get_result())


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector: pytest.Collector) -> Generator[None, Any, None]:
    outcome = yield
    _fail_unlisted_skip(outcome.get_result())


class RootOnlyReport:
    """Collects the root-only tests that skipped, for the run's summary."""

    def __init__(self) -> None:
        self.skipped: list[tuple[str, str]] = []

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        reason = skip_reason(report) if report.skipped else ""
        if reason.startswith(ROOT_ONLY):
            self.skipped.append((report.nodeid, reason.removeprefix(ROOT_ONLY)))

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        if not self.skipped:
            return
        terminalreporter.section("root-only tests that did not run")
        terminalreporter.write_line(
            f"{len(self.skipped)} test(s) need root and this run is uid {os.geteuid()}; "
            "run as root (CI does) to run them:"
        )
        for nodeid, why in self.skipped:
            terminalreporter.write_line(f"  {nodeid}: {why}")


def pytest_configure(config: pytest.Config) -> None:
    config.pluginmanager.register(RootOnlyReport(), "ribbit-root-only")
