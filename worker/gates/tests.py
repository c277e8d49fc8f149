"""The test gate: run the repository's tests in fresh sandboxes before and after the
patch, and compare them test by test.

It passes when the tests the issue is about pass (tests the patch adds or changes,
and tests the issue text names) and no test that passed before fails after.
Per-test results come from JUnit XML: pytest is asked for it through
``PYTEST_ADDOPTS`` (which reaches pytest however the test command starts it), and
any other JUnit file the run writes is picked up; without one, the exit code
decides for the whole suite.

A run with failures is rerun once in the same sandbox, right away: a test that
fails and then passes is flaky (named in the report, not blocking), one that fails
twice is broken. The rerun shares the sandbox's state (its /tmp and home) with
the first run, which is exactly what order- or state-dependent tests need to
show themselves; each of the before and after runs starts from a fresh sandbox.
"""

from __future__ import annotations

import re
import shlex
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from worker.gates.base import Finding, GateContext, GateResult, Severity
from worker.gates.hygiene import is_test_path
from worker.gates.junit import JUnitError, Outcome, TestCase, parse_junit
from worker.gates.runner import apply_failure, run_tree_gate
from worker.gates.trees import PatchTrees, regular_file_inside
from worker.sandbox.base import WORKSPACE, ExecResult, Sandbox

NAME = "tests"
REPORT_DIR = ".ribbit-gates"
_MAX_JUNIT_FILES = 20
_LOG_TAIL = 3000
_SHORT_TIMEOUT_S = 60
_ISSUE_TEST_RE = re.compile(r"\b(test_\w+|Test\w+)")
_PY_DEF_RE = re.compile(r"^(\s*)(?:async\s+)?def\s+(\w+)\s*\(")


@dataclass
class SuiteRun:
    """One tree's test runs (the first, and the rerun when something failed)."""

    label: str
    setup_failed: bool = False
    timed_out: bool = False
    exit_code: int | None = None  # the last run's
    first_exit_code: int | None = None
    junit: bool = False  # per-test results were found
    final: dict[str, Outcome] = field(default_factory=dict)
    cases: dict[str, TestCase] = field(default_factory=dict)
    flaky: list[str] = field(default_factory=list)
    reran: bool = False
    log: str = ""

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
            "reran": self.reran,
            "counts": self.counts() if self.junit else {},
            "failing": sorted(t for t, o in self.final.items() if o == "failed"),
            "flaky": sorted(self.flaky),
        }


@dataclass(frozen=True)
class TargetTest:
    name: str  # function name
    path: str | None  # the file, when the patch says


def _tail(text: str) -> str:
    return text if len(text) <= _LOG_TAIL else "…" + text[-_LOG_TAIL:]


class TestGate:
    __test__ = False  # not a pytest test class, whatever its name says
    name = NAME

    def run(self, ctx: GateContext) -> GateResult:
        return run_tree_gate(self, ctx)

    def run_unapplied(self, ctx: GateContext, reason: str) -> GateResult:
        return apply_failure(NAME, reason)

    def run_on_trees(self, ctx: GateContext, trees: PatchTrees) -> GateResult:
        start = time.monotonic()
        before = self._run_tree(ctx, trees.before, "before")
        after = self._run_tree(ctx, trees.after, "after")
        targets = target_tests(ctx, trees)
        findings, details = judge(ctx, before, after, targets)
        blocking = [f for f in findings if f.severity == "error"]
        logs = f"--- before ---\n{before.log}\n--- after ---\n{after.log}"
        return GateResult(
            name=NAME,
            passed=not blocking,
            findings=tuple(findings),
            logs=logs,
            duration_s=time.monotonic() - start,
            details=details,
        )

    def _run_tree(self, ctx: GateContext, tree: Path, label: str) -> SuiteRun:
        run = SuiteRun(label=label)
        timeout = float(ctx.gate_settings.test_timeout_s)
        logs: list[str] = []
        with ctx.sandbox_factory(tree) as sandbox:
            where = sandbox.exec(["pwd"], timeout=_SHORT_TIMEOUT_S)
            workspace = where.stdout.strip() if where.exit_code == 0 else WORKSPACE
            if ctx.setup_step is not None:
                done = ctx.setup_step(sandbox)
                if done.command or not done.ok:
                    logs.append(f"$ {done.command or '(environment)'}\n{done.output}")
                run.setup_failed = not done.ok
            elif ctx.repo_config.setup:
                setup = sandbox.exec(ctx.repo_config.setup, timeout=timeout)
                logs.append(f"$ {ctx.repo_config.setup}\n{_output(setup)}")
                if setup.exit_code != 0:
                    run.setup_failed = True
            first, first_cases, first_junit = self._once(ctx, sandbox, workspace, 1, timeout)
            logs.append(f"$ {ctx.repo_config.test}\n{_output(first)}")
            run.first_exit_code = run.exit_code = first.exit_code
            run.timed_out = first.timed_out
            run.junit = first_junit
            run.cases = first_cases
            run.final = {cid: c.outcome for cid, c in first_cases.items()}
            failed = any(c.outcome == "failed" for c in first_cases.values())
            if not first.timed_out and first.exit_code != 0 and (failed or not first_junit):
                run.reran = True
                second, second_cases, _ = self._once(ctx, sandbox, workspace, 2, timeout)
                logs.append(f"$ {ctx.repo_config.test}  # rerun\n{_output(second)}")
                run.exit_code = second.exit_code
                run.timed_out = second.timed_out
                for cid, outcome in run.final.items():
                    if outcome != "failed":
                        continue
                    again = second_cases.get(cid)
                    if again is not None and again.outcome == "passed":
                        run.final[cid] = "passed"
                        run.flaky.append(cid)
        run.log = _tail("\n".join(logs))
        return run

    @staticmethod
    def _once(
        ctx: GateContext, sandbox: Sandbox, workspace: str, n: int, timeout: float
    ) -> tuple[ExecResult, dict[str, TestCase], bool]:
        marker = f"{REPORT_DIR}/start-{n}"
        own_report = f"{REPORT_DIR}/junit-{n}.xml"
        sandbox.exec(["mkdir", "-p", REPORT_DIR], timeout=_SHORT_TIMEOUT_S)
        sandbox.exec(["touch", marker], timeout=_SHORT_TIMEOUT_S)
        # pytest splits PYTEST_ADDOPTS like a shell would, hence the quoting.
        junit_path = shlex.quote(f"{workspace}/{own_report}")
        env = {"PYTEST_ADDOPTS": f"--junitxml={junit_path} -o junit_family=xunit1"}
        result = sandbox.exec(ctx.repo_config.test, timeout=timeout, env=env)
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
            timeout=_SHORT_TIMEOUT_S,
        )
        written = [line[2:] for line in listing.stdout.splitlines() if line.startswith("./")]
        candidates = [own_report, *written[:_MAX_JUNIT_FILES]]
        cases: dict[str, TestCase] = {}
        found = False
        for rel in candidates:
            try:
                parsed = parse_junit(sandbox.read_file(rel))
            except (OSError, JUnitError):
                continue
            found = True
            for case in parsed:
                cases[case.id] = case
        return result, cases, found


def _output(result: ExecResult) -> str:
    status = "timed out" if result.timed_out else f"exit {result.exit_code}"
    return _tail(f"{result.stdout}\n{result.stderr}".strip()) + f"\n[{status}]"


def target_tests(ctx: GateContext, trees: PatchTrees) -> list[TargetTest]:
    """Tests the patch adds or changes (Python: the test function around each added
    line), and tests the issue names."""
    targets: dict[tuple[str, str | None], TargetTest] = {}
    for change in trees.parsed.files:
        if change.new is None or change.new.escapes or not is_test_path(change.new.path):
            continue
        path = change.new.path
        if not path.endswith(".py"):
            continue
        file = regular_file_inside(trees.after, path)
        if file is None:
            continue
        try:
            lines = file.read_text(errors="replace").splitlines()
        except OSError:
            continue
        for line_no, _ in change.added:
            name = _enclosing_test(lines, line_no)
            if name:
                targets[(name, path)] = TargetTest(name=name, path=path)
    for name in _ISSUE_TEST_RE.findall(ctx.issue_text or ""):
        targets.setdefault((name, None), TargetTest(name=name, path=None))
    return list(targets.values())


def _enclosing_test(lines: list[str], line_no: int) -> str | None:
    """The ``test_*`` function whose body (or def line) holds line ``line_no`` (1-based)."""
    if not 1 <= line_no <= len(lines):
        return None
    own = lines[line_no - 1]
    if not own.strip() or own.lstrip().startswith("#"):
        return None  # blank lines and comments change no test
    indent = len(own) - len(own.lstrip())
    for i in range(line_no - 1, -1, -1):
        m = _PY_DEF_RE.match(lines[i])
        if not m:
            continue
        def_indent = len(m[1])
        if i == line_no - 1 or def_indent < indent:
            return m[2] if m[2].startswith("test") else None
    return None


def _matches(case: TestCase, target: TargetTest) -> bool:
    if case.base_name != target.name and case.classname.rsplit(".", 1)[-1] != target.name:
        return False
    if target.path is None:
        return True
    stem = Path(target.path).stem
    return not case.classname or stem in case.classname.split(".")


def _finding(
    rule: str, message: str, severity: Severity = "error", path: str | None = None
) -> Finding:
    return Finding(gate=NAME, rule=rule, message=message, severity=severity, path=path)


def _names(ids: Iterable[str]) -> str:
    ids = sorted(ids)
    shown = ", ".join(ids[:10])
    return shown + (f" and {len(ids) - 10} more" if len(ids) > 10 else "")


def judge(
    ctx: GateContext, before: SuiteRun, after: SuiteRun, targets: list[TargetTest]
) -> tuple[list[Finding], dict[str, Any]]:
    findings: list[Finding] = []
    timeout = ctx.gate_settings.test_timeout_s
    regressions: list[str] = []
    new_failures: list[str] = []
    target_failures: list[str] = []
    if after.setup_failed:
        findings.append(_finding("setup-failed", "the setup command failed after the patch"))
    if before.setup_failed:
        findings.append(
            _finding(
                "setup-failed-before",
                "the setup command already failed at the base commit",
                severity="warning",
            )
        )
    if before.timed_out:
        findings.append(
            _finding(
                "tests-timeout-before",
                f"at the base commit the tests did "
                f"not finish within {timeout} s, so there is no baseline",
                severity="warning",
            )
        )
    if after.timed_out:
        findings.append(
            _finding(
                "tests-timeout",
                f"with the patch the test command did not "
                f"finish within {timeout} s (hanging test?)",
            )
        )
    elif after.junit:
        baseline = before.junit and not before.timed_out
        for cid, outcome in sorted(after.final.items()):
            if outcome != "failed":
                continue
            was = before.final.get(cid) if baseline else None
            if was == "passed":
                regressions.append(cid)
            elif was != "failed" or not baseline:
                new_failures.append(cid)
        if regressions:
            findings.append(
                _finding(
                    "test-regression",
                    f"{len(regressions)} test(s) passed "
                    f"before the patch and fail after: {_names(regressions)}",
                )
            )
        if new_failures:
            findings.append(
                _finding(
                    "test-fails",
                    f"{len(new_failures)} test(s) fail with "
                    f"the patch that did not fail before: "
                    f"{_names(new_failures)}",
                )
            )
        preexisting = [
            c for c, o in after.final.items() if o == "failed" and before.final.get(c) == "failed"
        ]
        if preexisting and baseline:
            findings.append(
                _finding(
                    "preexisting-failures",
                    f"{len(preexisting)} test(s) "
                    f"already failed before the patch: {_names(preexisting)}",
                    severity="info",
                )
            )
        vanished = [c for c, o in before.final.items() if o == "passed" and c not in after.final]
        if vanished and baseline:
            findings.append(
                _finding(
                    "tests-missing",
                    f"{len(vanished)} test(s) that passed "
                    f"before did not run after the patch: {_names(vanished)}",
                    severity="warning",
                )
            )
        for target in targets:
            hits = [c for c in after.cases.values() if _matches(c, target)]
            if not hits:
                if target.path is not None:  # issue texts name tests loosely; patches don't
                    target_failures.append(target.name)
                    findings.append(
                        _finding(
                            "target-test-not-run",
                            f"the patch changes "
                            f"`{target.name}` but the test command did not "
                            "run it",
                            path=target.path,
                        )
                    )
                continue
            bad = [c.id for c in hits if after.final.get(c.id) != "passed"]
            if bad:
                target_failures += bad
                findings.append(
                    _finding(
                        "target-test-fails",
                        f"a test the issue is about does not pass: {_names(bad)}",
                        path=target.path,
                    )
                )
        if (
            not after.suite_ok
            and not any(o == "failed" for o in after.final.values())
            and before.suite_ok
        ):
            findings.append(
                _finding(
                    "test-command-failed",
                    f"the test command exits "
                    f"{after.exit_code} after the patch (0 before), though "
                    "no test case failed",
                )
            )
        if not after.final:
            findings.append(
                _finding("no-tests", "the test command ran no tests", severity="warning")
            )
    else:
        if not after.suite_ok:
            findings.append(
                _finding(
                    "tests-failed",
                    f"the test command exits "
                    f"{after.exit_code} with the patch (no per-test report "
                    "to tell which tests fail)",
                )
            )
        elif after.first_exit_code != 0:
            findings.append(
                _finding(
                    "flaky-suite",
                    "the test command failed, then passed on a rerun",
                    severity="warning",
                )
            )
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
        "command": ctx.repo_config.test,
        "before": before.summary(),
        "after": after.summary(),
        "targets": sorted({t.name for t in targets}),
        "regressions": regressions,
        "new_failures": new_failures,
        "target_failures": sorted(set(target_failures)),
        "flaky": flaky,
    }
    return findings, details
