"""The tests gate's verdict on two runs, step by step, from hand-built runs (no test
command runs here; tests/unit/worker/gates/test_tests_gate.py runs real ones)."""

from __future__ import annotations

from pathlib import Path

from bot.store.records.gate_report import Finding
from tests.fakes import LocalDirSandbox
from worker.gates.base import GateContext
from worker.gates.judge import SuiteRun, judge, shown_fixed
from worker.gates.junit import Outcome, TestCase
from worker.gates.targets import TargetTest
from worker.repo_config import RepoConfig
from worker.settings import GateSettings

A, B, C, D = (f"tests/test_calc.py::test_{n}" for n in "abcd")


def ctx() -> GateContext:
    return GateContext(
        repo_dir=Path("."),
        base_commit="0" * 40,
        patch="",
        repo_config=RepoConfig(test="pytest"),
        gate_settings=GateSettings(test_timeout_s=60),
        sandbox_factory=LocalDirSandbox,
    )


def reported(label: str, exit_code: int = 0, **final: Outcome) -> SuiteRun:
    """A run with a per-test report: ``final`` maps a test's letter to its outcome."""
    ids = {f"tests/test_calc.py::test_{k}": o for k, o in final.items()}
    cases = {i: TestCase(i, i.split("::")[1], "tests.test_calc", o) for i, o in ids.items()}
    return SuiteRun(
        label, exit_code=exit_code, first_exit_code=exit_code, junit=True, final=ids, cases=cases
    )


def rules(findings: list[Finding]) -> list[tuple[str, str]]:
    return [(f.rule, f.severity) for f in findings]


def test_against_a_baseline_every_change_in_the_test_set_is_named() -> None:
    before = reported("before", 1, a="passed", b="failed", c="passed", d="passed")
    after = reported("after", 1, a="failed", b="failed", d="skipped")
    findings, details = judge(ctx(), before, after, [])
    assert rules(findings) == [
        ("test-regression", "error"),
        ("preexisting-failures", "info"),
        ("tests-missing", "error"),
        ("tests-now-skipped", "error"),
    ]
    assert details["regressions"] == [A] and details["new_failures"] == []
    assert C in findings[2].message and D in findings[3].message


def test_without_a_baseline_every_failure_is_new_and_nothing_goes_missing() -> None:
    before = SuiteRun("before", timed_out=True, junit=True, final={A: "passed", B: "failed"})
    after = reported("after", 1, b="failed")
    findings, details = judge(ctx(), before, after, [])
    assert rules(findings) == [("tests-timeout-before", "warning"), ("test-fails", "error")]
    assert details["new_failures"] == [B] and details["regressions"] == []


def test_a_target_must_run_and_pass_and_one_the_patch_names_must_run() -> None:
    before = reported("before", a="passed")
    after = reported("after", 1, a="passed", b="failed")
    targets = [
        TargetTest("test_b", "tests/test_calc.py"),
        TargetTest("test_x", "tests/test_calc.py"),  # the patch names it; it never ran
        TargetTest("test_y", None),  # the loose mention: not required to run
    ]
    findings, details = judge(ctx(), before, after, targets)
    assert rules(findings) == [
        ("test-fails", "error"),
        ("target-test-fails", "error"),
        ("target-test-not-run", "error"),
    ]
    assert details["target_failures"] == sorted([B, "test_x"])
    assert details["targets"] == ["test_b", "test_x", "test_y"]


def test_a_timed_out_patched_run_is_judged_by_its_timeout_alone() -> None:
    before = reported("before", a="passed")
    after = SuiteRun("after", timed_out=True, junit=True, final={A: "failed"})
    findings, details = judge(ctx(), before, after, [TargetTest("test_a", "tests/test_calc.py")])
    assert rules(findings) == [("tests-timeout", "error")]
    assert details["regressions"] == [] and details["target_failures"] == []


def test_an_exit_status_with_no_failed_test_and_an_empty_or_foreign_report() -> None:
    before = reported("before", a="passed")
    after = reported("after", 2)
    after.mismatch = "the report predates the run"
    findings, _ = judge(ctx(), before, after, [])
    assert rules(findings) == [
        ("tests-missing", "error"),
        ("test-command-failed", "error"),
        ("no-tests", "error"),
        ("report-mismatch", "error"),
    ]


def test_with_no_per_test_report_after_the_patch_only_exit_statuses_count() -> None:
    before = reported("before", a="passed")
    after = SuiteRun("after", exit_code=0, first_exit_code=1, flaky=[A])
    findings, details = judge(ctx(), before, after, [], command="make test")
    assert rules(findings) == [
        ("report-missing", "error"),
        ("flaky-suite", "warning"),
        ("flaky-tests", "warning"),
    ]
    assert details["command"] == "make test"
    failed = SuiteRun("after", exit_code=1, first_exit_code=1)
    assert rules(judge(ctx(), SuiteRun("before", exit_code=0), failed, [])[0]) == [
        ("tests-failed", "error")
    ]


def test_each_target_tests_result_before_and_after_is_kept() -> None:
    before = reported("before", 1, a="failed", c="passed", d="skipped")
    after = reported("after", a="passed", b="passed", c="passed", d="passed")
    targets = [
        TargetTest("test_a", None),  # the issue names it: it failed at the base
        TargetTest("test_b", "tests/test_calc.py"),  # the patch adds it
        TargetTest("test_c", "tests/test_calc.py"),
        TargetTest("test_d", "tests/test_calc.py"),
        TargetTest("test_x", None),  # named by the issue, never ran
    ]
    _, details = judge(ctx(), before, after, targets)
    # By test id, which names a test uniquely (issue #31): a name alone merged tests of
    # one name in different classes. A named test that never ran has no id, no entry.
    assert details["target_results"] == {
        A: {"before": "failed", "after": "passed"},
        B: {"before": "absent", "after": "passed"},
        C: {"before": "passed", "after": "passed"},
        D: {"before": "skipped", "after": "passed"},
    }
    no_report = SuiteRun("before", exit_code=1, first_exit_code=1)
    _, details = judge(ctx(), no_report, after, targets[:1])
    assert details["target_results"] == {A: {"before": "unknown", "after": "passed"}}
    _, details = judge(ctx(), before, SuiteRun("after", exit_code=0), targets[:1])
    assert details["target_results"] == {}  # no per-test report after: nothing to say


def test_a_base_run_without_the_report_its_runner_always_writes_is_a_set_up_problem() -> None:
    # commander.js under `npx jest --ci`: its tests fail to parse jest's arguments, so
    # jest writes no report at the base and none with the patch (issue #35).
    before = SuiteRun("before", exit_code=1, first_exit_code=1, report_expected=True)
    after = SuiteRun("after", exit_code=1, first_exit_code=1, report_expected=True)
    findings, details = judge(ctx(), before, after, [], command="npx jest")
    assert rules(findings) == [("base-no-report", "error")]
    assert "not the patch" in findings[0].message and "exits 1" in findings[0].message
    assert details["before"]["report_expected"] is True
    # A runner that may not report at all (``make test``) is still judged on exit codes.
    plain = SuiteRun("before", exit_code=1, first_exit_code=1)
    assert rules(judge(ctx(), plain, after, [])[0]) == [("tests-failed", "error")]
    # A base that timed out or failed its set-up says so already.
    slow = SuiteRun("before", timed_out=True, report_expected=True)
    assert "base-no-report" not in [r for r, _ in rules(judge(ctx(), slow, after, [])[0])]


def _mismatch_rules(before: SuiteRun, after: SuiteRun) -> list[tuple[str, str]]:
    findings, _ = judge(ctx(), before, after, [])
    return [r for r in rules(findings) if r[0] == "report-mismatch"]


def test_processes_left_by_the_base_suite_excuse_only_processes_left_after_the_patch() -> None:
    """Strays are counted apart from every other reason a report is not the run's own:
    a base suite that leaves one (a Rust integration test that spawns the binary and
    never kills it) excuses the patched run's strays, never a forged report, a second
    frame or a cut-short test binary."""
    honest_base = reported("before", a="passed")
    honest_base.strays = 1
    strays_after = reported("after", a="passed")
    strays_after.strays = 2
    assert _mismatch_rules(honest_base, strays_after) == []
    assert _mismatch_rules(reported("before", a="passed"), strays_after) == [
        ("report-mismatch", "error")
    ]
    for why in (
        "the run's output holds more than one report",
        "cargo exits 0, but the test binary of src/lib.rs ended before libtest's summary",
        "the command exits 0 but its report has 1 failing test(s)",
    ):
        forged = reported("after", a="passed")
        forged.mismatch = why
        assert _mismatch_rules(honest_base, forged) == [("report-mismatch", "error")], why
        # Nor does the base's own disagreement excuse the patched run's; it is named as
        # the repository's set-up beside it.
        odd_base = reported("before", a="passed")
        odd_base.mismatch = why
        assert _mismatch_rules(odd_base, forged) == [("report-mismatch", "error")], why
        findings, _ = judge(ctx(), odd_base, forged, [])
        [named] = [f for f in findings if f.rule == "base-report-mismatch"]
        assert why in named.message and "set-up" in named.message
        findings, _ = judge(ctx(), honest_base, forged, [])
        assert "base-report-mismatch" not in [f.rule for f in findings]


def test_an_old_code_run_that_is_not_its_own_shows_no_fix() -> None:
    """The patch's tests ran on the old code there: failures in a report that is not the
    run's own (or one that processes they left could rewrite) are no evidence."""
    base = reported("before", a="passed")
    after = reported("after", a="passed", b="passed")
    old_code = reported("old", 1, a="passed", b="failed")
    assert shown_fixed(old_code, after, base) == [B]
    old_code.mismatch = "the run's output holds more than one report"
    assert shown_fixed(old_code, after, base) == []
    old_code.mismatch = None
    old_code.strays = 1
    assert shown_fixed(old_code, after, base) == []
    base.strays = 1  # the base suite leaves one too: the repository's habit
    assert shown_fixed(old_code, after, base) == [B]
