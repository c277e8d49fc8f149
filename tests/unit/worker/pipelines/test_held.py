"""Which judged patches get no pull request, and what the issue hears then
(worker/pipelines/held.py); tests/unit/worker/pipelines/test_solve_run.py runs the whole
job around it."""

from __future__ import annotations

from bot.store.records.gate_report import GateReport, GateResult
from worker.gates.verdict import TestVerdict
from worker.pipelines.held import held_back
from worker.repo_config import parse_repo_config

FINE = TestVerdict(base_broken=False, base_reason="", targets=(), target_failures=())
BROKEN_BASE = TestVerdict(
    base_broken=True, base_reason="no test passes", targets=(), target_failures=()
)


def _report(*, tests: bool, evidence: bool = False, hygiene: bool = True) -> GateReport:
    return GateReport.from_results(
        [
            GateResult("tests", passed=tests, evidence=("t.py::test_x",) if evidence else ()),
            GateResult("hygiene", passed=hygiene),
        ],
        duration_s=0,
    )


def test_a_verified_patch_is_published() -> None:
    assert held_back(_report(tests=True, evidence=True), FINE, parse_repo_config(None)) is None


def test_a_refused_patch_is_held_back_and_says_which_gates() -> None:
    report = _report(tests=False)
    held = held_back(report, FINE, parse_repo_config(None))
    assert held is not None
    assert held.reason == f"gates failed: {report.summary_line()}"
    assert "The patch did not pass the gates" in held.message
    assert "draft_on_failure" not in held.message


def test_a_broken_base_is_blamed_not_the_patch() -> None:
    held = held_back(_report(tests=False), BROKEN_BASE, parse_repo_config(None))
    assert held is not None
    assert "base tree's tests fail too (no test passes)" in held.message


def test_failing_drafts_are_published_only_when_tests_alone_failed() -> None:
    drafts = parse_repo_config("gates: {draft_on_failure: true}\n")
    assert held_back(_report(tests=False), FINE, drafts) is None
    held = held_back(_report(tests=False, hygiene=False), FINE, drafts)
    assert held is not None
    assert "not pushed even with gates.draft_on_failure" in held.message


def test_unverified_patches_are_held_back_only_where_the_repository_refuses_them() -> None:
    unverified = _report(tests=True)
    assert held_back(unverified, FINE, parse_repo_config(None)) is None
    held = held_back(unverified, FINE, parse_repo_config("gates: {unverified: refuse}\n"))
    assert held is not None
    assert "refuses unverified patches" in held.message
    assert held.reason == "gates: not verified (the repository refuses unverified patches)"
