"""The test gate's judgement of its runs: the record of one tree's runs
(:class:`SuiteRun`), the patched run against the base's test by test (:func:`judge`),
the target tests' results, the fail-to-pass evidence (:func:`shown_fixed`) and whether a
run's report is its own account (:func:`report_disagreement`). worker/gates/tests.py runs
the tests; this module only reads what they said.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from bot.store.records.gate_report import Finding, Severity
from worker.gates.base import GateContext
from worker.gates.evidence import ABSENT, could_not_load, fail_to_pass
from worker.gates.junit import Outcome, TestCase
from worker.gates.startup import StartupChange, StartupItem
from worker.gates.targets import TargetTest, _matches
from worker.gates.testrun import strays_reason
from worker.gates.watch import TamperEvent
from worker.sandbox.base import ExecResult

NAME = "tests"


@dataclass
class SuiteRun:
    """One tree's test runs (the first, and the rerun when something failed)."""

    label: str
    setup_failed: bool = False
    timed_out: bool = False
    exit_code: int | None = None  # the last run's
    first_exit_code: int | None = None
    junit: bool = False  # per-test results were found
    # The runner writes per-test results whenever it runs its tests (testcmd.Invocation).
    report_expected: bool = False
    final: dict[str, Outcome] = field(default_factory=dict)
    cases: dict[str, TestCase] = field(default_factory=dict)
    flaky: list[str] = field(default_factory=list)
    reran: bool = False
    log: str = ""
    # Why the run's exit status or console disagrees with its report (None: they agree).
    # Processes left running are not in it (``strays``): an honest suite can leave some.
    mismatch: str | None = None
    # Processes that outlived the command of a run whose report is a file, all runs'.
    strays: int = 0
    watched: bool = False  # every run of it went through Ribbit's pytest bootstrap
    tamper: list[TamperEvent] = field(default_factory=list)
    # Every watched run's start-up (worker/gates/startup.py); None: a run was not watched.
    startup: list[StartupItem] | None = None
    # Test files and test configuration a set-up step changed from the tree (startup.py).
    setup_wrote: list[StartupChange] = field(default_factory=list)

    @property
    def suite_ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out

    def counts(self) -> dict[str, int]:
        values = list(self.final.values())
        return {
            "passed": values.count("passed"),
            "failed": values.count("failed"),
            "skipped": values.count("skipped"),
            "total": len(values),
            "flaky": len(self.flaky),
        }

    def summary(self) -> dict[str, Any]:
        return {
            "exit_code": self.exit_code,
            "first_exit_code": self.first_exit_code,
            "timed_out": self.timed_out,
            "setup_failed": self.setup_failed,
            "per_test": self.junit,
            "report_expected": self.report_expected,
            "reran": self.reran,
            "counts": self.counts() if self.junit else {},
            "failing": sorted(t for t, o in self.final.items() if o == "failed"),
            "mismatch": self.mismatch,
            "strays": self.strays,
            "flaky": sorted(self.flaky),
            "watched": self.watched,
            "tamper": [e.describe() for e in self.tamper],
        }


# pytest's last console line: "=== 1 failed, 2 passed, 1 warning in 0.12s ===" (or bare
# with -q). Read from the end of stdout, where the run's own output ends.
_PYTEST_SUMMARY_RE = re.compile(r"^=*\s*((?:\d+ [a-z]+(?:, )?)+) in [\d.]+s\b.*$", re.M)
# gotestsum's: "DONE 6 tests, 1 skipped, 2 failures, 1 error in 1.47s".
_GOTESTSUM_DONE_RE = re.compile(
    r"^DONE (\d+) tests?(?:, \d+ skipped)?(?:, (\d+) failures?)?(?:, (\d+) errors?)? in ",
    re.M,
)


def report_disagreement(result: ExecResult, cases: dict[str, TestCase]) -> str | None:
    """Why the report cannot be the run's own account, or None. Code that runs inside
    the test process can rewrite the report or the exit status after the fact (an
    atexit hook, ``os._exit(0)``); it has to forge both, and the console, consistently."""
    failed = sum(1 for c in cases.values() if c.failed)
    passed = sum(1 for c in cases.values() if c.outcome == "passed")
    if failed and result.exit_code == 0:
        return f"the command exits 0 but its report has {failed} failing test(s)"
    done = _GOTESTSUM_DONE_RE.findall(result.stdout[-4000:])
    if done:
        # gotestsum's last line counts what ``go test -json`` said, as its report should
        # (a package that does not build is an "error" the two count differently).
        total, failures, errors = (int(n or 0) for n in done[-1])
        if not errors and (total != len(cases) or failures != failed):
            return (
                f"gotestsum says {total} tests, {failures} failed, but the report has "
                f"{len(cases)} tests, {failed} failed"
            )
        return None
    summaries = _PYTEST_SUMMARY_RE.findall(result.stdout[-4000:])
    if not summaries:
        return None
    said: dict[str, int] = {}
    for part in summaries[-1].split(", "):
        count, _, kind = part.partition(" ")
        said[kind] = said.get(kind, 0) + int(count)
    console_failed = said.get("failed", 0) + said.get("error", 0) + said.get("errors", 0)
    console_passed = said.get("passed", 0) + said.get("xpassed", 0)
    if (failed == 0 and console_failed > 0) or passed > console_passed:
        return (
            f"the console says {summaries[-1]!r} but the report has {passed} passed "
            f"and {failed} failed"
        )
    return None


def _finding(
    rule: str, message: str, severity: Severity = "error", path: str | None = None
) -> Finding:
    return Finding(gate=NAME, rule=rule, message=message, severity=severity, path=path)


def _names(ids: Iterable[str]) -> str:
    ids = sorted(ids)
    shown = ", ".join(ids[:10])
    return shown + (f" and {len(ids) - 10} more" if len(ids) > 10 else "")


def judge(
    ctx: GateContext,
    before: SuiteRun,
    after: SuiteRun,
    targets: list[TargetTest],
    command: str | None = None,
    *,
    old_code: SuiteRun | None = None,
    answered: frozenset[str] = frozenset(),
) -> tuple[list[Finding], dict[str, Any]]:
    """The gate's findings on the runs before and after the patch, and the details the
    report keeps (the test ids behind the findings). With a per-test report the runs
    are compared test by test; without one only the exit statuses can be. ``old_code``
    is the run of the base code with the patch's tests, which the target tests' "before"
    shows (the base run when not given). ``answered``: base tests the pinned run judged
    in their base versions against the patched code (pinned.py), so their not running
    under the same ids after the patch hides nothing."""
    findings = [
        *_setup_findings(before, after),
        *_timeout_findings(before, after, ctx.gate_settings.test_timeout_s),
    ]
    compared = _Comparison.of(before, after, answered)
    target_failures: list[str] = []
    if after.timed_out:
        pass  # nothing ran to the end: the timeout is the finding
    elif after.junit:
        findings += compared.findings()
        found, target_failures = _target_findings(after, targets)
        findings += found
        findings += _report_findings(before, after)
    elif not _base_unreported(before):
        findings += _exit_status_findings(before, after)
    findings += _base_report_findings(before)
    flaky = sorted(set(before.flaky) | set(after.flaky))
    if flaky:
        findings.append(
            _finding(
                "flaky-tests",
                f"flaky (failed, then passed on a rerun): {_names(flaky)}",
                severity="warning",
            )
        )
    details = {
        "command": command or ctx.repo_config.test,
        "before": before.summary(),
        "after": after.summary(),
        "targets": sorted({t.name for t in targets}),
        "regressions": compared.regressions if compared.judged else [],
        "new_failures": compared.new_failures if compared.judged else [],
        "target_failures": sorted(set(target_failures)),
        "target_results": (
            _target_results(old_code or before, after, targets)
            if after.junit and not after.timed_out
            else {}
        ),
        "flaky": flaky,
    }
    return findings, details


def _target_results(
    before: SuiteRun, after: SuiteRun, targets: list[TargetTest]
) -> dict[str, dict[str, str]]:
    """Each target test's result before and after the patch, by test id (which names
    it uniquely: its file, class and parametrisation; two tests of one name are two
    entries): passed, failed, skipped, absent (it did not run in that tree: a test the
    patch adds, or one it removes), or unknown (that run gave no per-test report)."""
    ids = {
        c.id
        for run in (before, after)
        for c in run.cases.values()
        if any(_matches(c, target) for target in targets)
    }
    return {
        test: {"before": _outcome_of(before, test), "after": _outcome_of(after, test)}
        for test in sorted(ids)
    }


def _outcome_of(run: SuiteRun, test: str) -> str:
    if not run.junit:
        return "unknown"
    outcome = run.final.get(test)
    if outcome is None:
        return "absent"
    return "failed" if outcome == "error" else outcome


def shown_fixed(
    old_code: SuiteRun, after: SuiteRun, before: SuiteRun, runner: str = ""
) -> list[str]:
    """The gate's fail-to-pass evidence (:func:`worker.gates.evidence.fail_to_pass`):
    the test ids that fail on the base code with the patch's tests (or are absent there
    because their module could not load, as ``runner``'s report shows that) and pass
    with the patch. A test flaky in any run shows nothing; without per-test reports the
    whole command is one test, named by its exit status. An old-code run that is not its
    command's own (:func:`not_own`) shows nothing: the patch's tests ran there and could
    have forged its failures."""
    if old_code.timed_out or after.timed_out or old_code.setup_failed or after.setup_failed:
        return []
    if old_code is not before and not_own(old_code, before):
        return []  # its failures may be forged: nothing it says is evidence
    flaky = {*old_code.flaky, *after.flaky, *before.flaky}
    if old_code.junit and after.junit:
        without = _without(old_code, after, before, runner)
        return fail_to_pass(without, after.final, flaky=flaky, runner=runner)
    if (
        not old_code.junit
        and not after.junit
        and old_code.exit_code not in (0, None)
        and after.exit_code == 0
        and after.first_exit_code == 0
    ):
        return [f"(the test command: exit {old_code.exit_code} without the fix, 0 with it)"]
    return []


def _without(old_code: SuiteRun, after: SuiteRun, before: SuiteRun, runner: str) -> dict[str, str]:
    """The old-code run's outcomes, where a test absent from it counts as failing only
    when that run had the patch's tests (its tree was not the base's: a new test's file
    was there), its own module could not load there (:func:`could_not_load`: a module
    that ran without it only did not have that id on the old code) and the test did not
    pass on the base (a build that broke took tests with it that showed nothing)."""
    had_tests = old_code is not before
    absent = {
        test: "failed"
        if had_tests
        and before.final.get(test) != "passed"
        and could_not_load(test, old_code.final, runner)
        else ABSENT
        for test in after.final
        if test not in old_code.final
    }
    return {**absent, **old_code.final}


def _setup_findings(before: SuiteRun, after: SuiteRun) -> list[Finding]:
    found = []
    if after.setup_failed:
        found.append(_finding("setup-failed", "the setup command failed after the patch"))
    if before.setup_failed:
        found.append(
            _finding(
                "setup-failed-before",
                "the setup command already failed at the base commit",
                severity="warning",
            )
        )
    return found


def _timeout_findings(before: SuiteRun, after: SuiteRun, timeout: float) -> list[Finding]:
    found = []
    if before.timed_out:
        found.append(
            _finding(
                "tests-timeout-before",
                f"at the base commit the tests did "
                f"not finish within {timeout} s, so there is no baseline",
                severity="warning",
            )
        )
    if after.timed_out:
        found.append(
            _finding(
                "tests-timeout",
                f"with the patch the test command did not "
                f"finish within {timeout} s (hanging test?)",
            )
        )
    return found


@dataclass(frozen=True)
class _Comparison:
    """The patched run's tests against the base's, test by test (both per-test reports).
    Without a baseline (the base reported nothing, or timed out) every failure is new
    and nothing can have gone missing."""

    judged: bool  # the patched run finished and wrote a per-test report
    baseline: bool
    regressions: list[str]  # passed before, fail after
    new_failures: list[str]  # fail after, did not fail before (or no baseline)
    preexisting: list[str]  # failed before and after
    vanished: list[str]  # passed before, did not run after
    now_skipped: list[str]  # passed before, skipped after
    # Passed before and did not run after, but the pinned run judged them (their file
    # edited: a renamed test, a parametrize row whose id moved, a removed one).
    replaced: list[str]

    @classmethod
    def of(
        cls, before: SuiteRun, after: SuiteRun, answered: frozenset[str] = frozenset()
    ) -> _Comparison:
        baseline = before.junit and not before.timed_out
        regressions, new_failures = [], []
        for cid, outcome in sorted(after.final.items()):
            if outcome != "failed":
                continue
            was = before.final.get(cid) if baseline else None
            if was == "passed":
                regressions.append(cid)
            elif was != "failed" or not baseline:
                new_failures.append(cid)
        failed_before = {c for c, o in before.final.items() if o == "failed"}
        passed_before = [c for c, o in before.final.items() if o == "passed"]
        gone = [c for c in passed_before if after.final.get(c) is None]
        return cls(
            judged=after.junit and not after.timed_out,
            baseline=baseline,
            regressions=regressions,
            new_failures=new_failures,
            preexisting=[c for c, o in after.final.items() if o == "failed" and c in failed_before],
            vanished=[c for c in gone if c not in answered],
            now_skipped=[c for c in passed_before if after.final.get(c) == "skipped"],
            replaced=[c for c in gone if c in answered],
        )

    def findings(self) -> list[Finding]:
        found = []
        if self.regressions:
            found.append(
                _finding(
                    "test-regression",
                    f"{len(self.regressions)} test(s) passed "
                    f"before the patch and fail after: {_names(self.regressions)}",
                )
            )
        if self.new_failures:
            found.append(
                _finding(
                    "test-fails",
                    f"{len(self.new_failures)} test(s) fail with "
                    f"the patch that did not fail before: "
                    f"{_names(self.new_failures)}",
                )
            )
        if not self.baseline:
            return found
        if self.preexisting:
            found.append(
                _finding(
                    "preexisting-failures",
                    f"{len(self.preexisting)} test(s) "
                    f"already failed before the patch: {_names(self.preexisting)}",
                    severity="info",
                )
            )
        # The base decides the test set: a test that passed there and does not pass
        # here blocks, whether it fails, is skipped now, or vanished from the run.
        if self.vanished:
            found.append(
                _finding(
                    "tests-missing",
                    f"{len(self.vanished)} test(s) that passed "
                    f"before did not run after the patch: {_names(self.vanished)}",
                )
            )
        if self.replaced:
            found.append(
                _finding(
                    "tests-replaced",
                    f"{len(self.replaced)} test(s) that passed before do not run under the "
                    f"same ids after the patch, which edits their files; their base "
                    f"versions ran against the patch's code: {_names(self.replaced)}",
                    severity="warning",
                )
            )
        if self.now_skipped:
            found.append(
                _finding(
                    "tests-now-skipped",
                    f"{len(self.now_skipped)} test(s) that passed "
                    f"before are skipped after the patch: {_names(self.now_skipped)}",
                )
            )
        return found


def _target_findings(after: SuiteRun, targets: list[TargetTest]) -> tuple[list[Finding], list[str]]:
    """The tests the issue or the patch is about: each must have run and passed. The
    findings, and the ids (or names, for one that did not run) that did not pass."""
    found: list[Finding] = []
    failures: list[str] = []
    for target in targets:
        hits = [c for c in after.cases.values() if _matches(c, target)]
        if not hits:
            if target.path is not None:  # issue texts name tests loosely; patches don't
                failures.append(target.name)
                found.append(
                    _finding(
                        "target-test-not-run",
                        f"the patch changes `{target.name}` but the test command did not run it",
                        path=target.path,
                    )
                )
            continue
        bad = [c.id for c in hits if after.final.get(c.id) != "passed"]
        if bad:
            failures += bad
            found.append(
                _finding(
                    "target-test-fails",
                    f"a test the issue is about does not pass: {_names(bad)}",
                    path=target.path,
                )
            )
    return found, failures


def _report_findings(before: SuiteRun, after: SuiteRun) -> list[Finding]:
    """What the patched run's report says beside its test cases: an exit status no
    failure explains, no tests at all, a report that is not the run's own."""
    found = []
    if (
        not after.suite_ok
        and not any(o == "failed" for o in after.final.values())
        and before.suite_ok
    ):
        found.append(
            _finding(
                "test-command-failed",
                f"the test command exits "
                f"{after.exit_code} after the patch (0 before), though "
                "no test case failed",
            )
        )
    if not after.final:
        found.append(_finding("no-tests", "the test command ran no tests"))
    why = not_own(after, before)
    if why:
        found.append(_finding("report-mismatch", f"the test report is not the run's own: {why}"))
    return found


def not_own(run: SuiteRun, before: SuiteRun) -> str | None:
    """Why ``run``'s report may not be its command's own, or None. A disagreement, a
    second frame or a cut-short libtest binary always counts; processes left running
    only where the base run left none (an honest suite can: an integration test that
    spawns the binary and never kills it), which excuses strays and nothing else."""
    if run.mismatch:
        return run.mismatch
    if run.strays and not before.strays:
        return strays_reason(run.strays)
    return None


def _base_unreported(before: SuiteRun) -> bool:
    """The base run ended without the report its runner writes whenever it runs the
    tests: the runner never ran them there (a missing dependency, a config the runner
    refuses), which no patch caused."""
    return (
        before.report_expected
        and not before.junit
        and not before.timed_out
        and not before.setup_failed
    )


def _base_report_findings(before: SuiteRun) -> list[Finding]:
    """A base run without its report, or with one that is not its own: the repository's
    set-up, never the patch. The first blocks (nothing can be compared) and takes the
    place of the exit status's verdict on the patch; the second says why the patched
    run's ``report-mismatch``, which it does not excuse, is no sign of the patch."""
    if before.mismatch:
        return [
            _finding(
                "base-report-mismatch",
                "at the base commit the test report is not the run's own either "
                f"({before.mismatch}): the repository's test set-up makes every run look "
                "forged, so no patch can be judged until it changes (see the gate log; "
                "check `test` in .ribbit.yml)",
            )
        ]
    if not _base_unreported(before):
        return []
    return [
        _finding(
            "base-no-report",
            f"at the base commit the test command exits {before.exit_code} without the "
            "per-test report its runner writes whenever it runs the tests, so the tests "
            "never ran there: the repository's test set-up is broken, not the patch "
            "(see the gate log; check `setup` and `test` in .ribbit.yml)",
        )
    ]


def _exit_status_findings(before: SuiteRun, after: SuiteRun) -> list[Finding]:
    """Without a per-test report after the patch: the exit status is all there is."""
    found = []
    if before.junit and not before.timed_out:
        found.append(
            _finding(
                "report-missing",
                "the test run wrote its per-test report before the patch and none "
                "after it (the patch stops the runner from reporting)",
            )
        )
    if not after.suite_ok:
        found.append(
            _finding(
                "tests-failed",
                f"the test command exits "
                f"{after.exit_code} with the patch (no per-test report "
                "to tell which tests fail)",
            )
        )
    elif after.first_exit_code != 0:
        found.append(
            _finding(
                "flaky-suite",
                "the test command failed, then passed on a rerun",
                severity="warning",
            )
        )
    return found
