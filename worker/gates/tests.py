"""The test gate: run the repository's tests in fresh sandboxes before and after the
patch, and compare them test by test.

It passes when the tests the issue is about pass (tests the patch adds or changes,
and tests the issue text names) and every test that passed before still passes
after: the base decides the test set, so a test that vanishes from the run, is
skipped now, or fails, blocks; a run of zero tests blocks.

Passing is not evidence. A third run, of the base code with the patch's own test files
(:func:`worker.gates.evidence.base_with_patch_tests`; the base run itself when the
patch touches no test), gives the result its ``evidence``: the test ids that fail or
are absent there and pass with the patch (:func:`worker.gates.evidence.fail_to_pass`,
the environment builder's judge). Without any, the verdict is at most unverified.
Target tests are named by test id (file, class, parametrisation), never by name alone.
A fourth run, of the patched code with the base's own versions of the test files the
patch edits or deletes (issue #38), finds base tests the patch's code breaks: a
regression when the patch leaves the test itself alone, a behaviour change to confirm
(a warning, and no evidence counts) when the patch edits it to match.

Per-test results come from the one test runner (:mod:`worker.gates.testrun`): the
one JUnit report Ribbit asks for, through ``PYTEST_ADDOPTS``, written in a fresh,
randomly named folder outside the workspace and checked for freshness, type and
size, test ids as pytest node ids; any other XML the run writes is ignored. Code
under test runs in the same process as the runner and could still rewrite the
report, so the report is cross-checked against the exit status and pytest's
console summary, and hygiene flags exit hooks, report writes and runner
monkeypatching in every changed file.
Without a report (a runner that writes none), the exit code decides for the suite.

A patch that changes test discovery or runner configuration (see discovery.py) is
blocked by hygiene unless the repository opted into ``warn``; then this gate also runs
the patched code with the base's configuration files and judges that run too.

A run with failures is rerun once, right away, in a sandbox of its own: a test that
fails and then passes is flaky (named in the report, not blocking), one that fails
twice is broken. The rerun shares nothing with the first run (not its /tmp, home or
processes): a shared /tmp let code fail until it had left a marker file there, and so
pass as "flaky" (issue #31). Every run starts from a fresh sandbox, set up afresh.

A plain pytest command runs watched (worker/gates/watch.py): what its audit hook and
runner checks attribute to the repository's non-test code becomes a blocking
``tamper`` finding naming the mechanism, file and line, unless the base code does the
same (then a warning: it is the repository's, not the patch's).
"""

from __future__ import annotations

import re
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from bot.store.gate_report import Finding, GateResult, Severity
from worker.gates.base import GateContext
from worker.gates.discovery import DiscoveryChange, changed_paths, discovery_changes
from worker.gates.evidence import (
    BehaviourChange,
    base_with_patch_tests,
    fail_to_pass,
    patched_code_with_base_tests,
)
from worker.gates.hygiene import is_test_path
from worker.gates.junit import NESTED_SEPARATOR, Outcome, TestCase
from worker.gates.runner import apply_failure, run_tree_gate
from worker.gates.tamper import tamper_findings
from worker.gates.testcmd import TestCommand, resolve_test_command
from worker.gates.testrun import TestRun, run_tests
from worker.gates.trees import PatchTrees, regular_file_inside
from worker.gates.watch import TamperEvent
from worker.sandbox.base import ExecResult, Sandbox, SandboxError, SandboxFactory
from worker.sandbox.setup import SetupResult

NAME = "tests"
_LOG_TAIL = 3000
_CANCEL_POLL_S = 0.5  # how soon a /ribbit stop reaches a running test command
_ISSUE_TEST_RE = re.compile(r"\b(test_\w+|Test\w+)")
_PY_DEF_RE = re.compile(r"^(\s*)(?:async\s+)?def\s+(\w+)\s*\(")
_PY_CLASS_RE = re.compile(r"^(\s*)class\s+(\w+)\s*[:(]")
_GO_FUNC_RE = re.compile(r"^func\s+(?:\([^)]*\)\s*)?(\w+)\s*[\[(]")
_GO_TEST_NAME_RE = re.compile(r"(?:Test|Fuzz)(?:[^a-z]\w*)?")
_RS_FN_RE = re.compile(r"^(\s*)(?:pub(?:\([^)]*\))?\s+)?(?:async\s+)?fn\s+(\w+)")
# JavaScript and TypeScript test files (jest, vitest, node --test): a.test.ts, a.spec.js,
# and any script under a test folder.
_JS_EXT_RE = re.compile(r"\.[cm]?[jt]sx?$")
# it("title", ...), test('title', ...), it.only(`title`, ...): the title as a literal.
_JS_TEST_RE = re.compile(r"""^\s*(?:it|test)(?:\.\w+)*\s*\(\s*(['"`])((?:\\.|(?!\1).)*)\1""")
_JS_SUITE_RE = re.compile(r"^\s*(?:describe|suite)(?:\.\w+)*\s*\(")


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
    # Why the run's exit status or console disagrees with its report (None: they agree).
    mismatch: str | None = None
    watched: bool = False  # every run of it went through Ribbit's pytest bootstrap
    tamper: list[TamperEvent] = field(default_factory=list)

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
            "mismatch": self.mismatch,
            "flaky": sorted(self.flaky),
            "watched": self.watched,
            "tamper": [e.describe() for e in self.tamper],
        }


@dataclass(frozen=True)
class TargetTest:
    name: str  # function name
    path: str | None  # the file, when the patch says
    # The pytest class the function is a method of (Python, when the patch says): tests
    # of one name in different classes of one file are different tests.
    cls: str | None = None


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
        # The base decides the command too: a patch that adds a go.mod or a package.json
        # test script does not choose its own yardstick.
        test = resolve_test_command(ctx.repo_config, trees.before)
        before = self._run_tree(ctx, test, trees.before, "before")
        after = self._run_tree(ctx, test, trees.after, "after")
        # The patch's own tests against the old code (base + its test files), as the
        # environment builder validates fail-to-pass; the base run when it adds none.
        with base_with_patch_tests(trees) as tree:
            old_code = (
                before
                if tree is None
                else self._run_tree(ctx, test, tree, "base code with the patch's tests")
            )
        # The base's own versions of the test files the patch edits or deletes, against
        # the patched code (issue #38): what the repository pinned before the patch.
        with patched_code_with_base_tests(trees) as tree:
            pinned = (
                None
                if tree is None
                else self._run_tree(ctx, test, tree, "patched code with the base's tests")
            )
        targets = target_tests(ctx, trees)
        findings, details = judge(ctx, before, after, targets, test.command, old_code=old_code)
        findings += tamper_findings(before, after, trees)
        evidence = shown_fixed(old_code, after, before)
        if pinned is not None:
            # The patched code runs here too, under the base's tests: what it forges there
            # would hide a pinned behaviour it broke.
            findings += [f for f in tamper_findings(before, pinned, trees) if f not in findings]
            moved = pinned_changes(before, pinned, targets)
            findings += moved.findings()
            details["pinned"] = {"run": pinned.summary(), **moved.to_dict(trees, targets)}
            if moved.edited:
                # A behaviour the base's tests pinned moved, and the patch edited those
                # tests to match: a reviewer must confirm it, so no test counts as
                # evidence (the edited ones would pass on new code by construction).
                evidence = []
        details["evidence"] = {"run": old_code.summary(), "fail_to_pass": evidence}
        changes = discovery_changes(
            trees.before, trees.after, changed_paths(trees.before, trees.after)
        )
        # Hygiene reports these changes (they block, or warn when the repository allows
        # them); here they decide whether the base's configuration must judge as well.
        logs = f"--- before ---\n{before.log}\n--- after ---\n{after.log}"
        if old_code is not before:
            logs += f"\n--- base code with the patch's tests ---\n{old_code.log}"
        if pinned is not None:
            logs += f"\n--- patched code with the base's tests ---\n{pinned.log}"
        if changes and ctx.repo_config.gates.test_config_changes == "warn":
            # The repository lets the patch change its test configuration; the verdict
            # still rests on the base's: the patched code runs again with it.
            with base_config_tree(trees, changes) as tree:
                again = self._run_tree(ctx, test, tree, "after (base test configuration)")
            base_findings, _ = judge(ctx, before, again, targets, test.command)
            base_findings += tamper_findings(before, again, trees)
            findings += [
                replace(f, rule=f"base-config-{f.rule}")
                for f in base_findings
                if f.severity == "error"
            ]
            details["after_base_config"] = again.summary()
            logs += f"\n--- after, base test configuration ---\n{again.log}"
        details["test_config_changes"] = [f"{c.path}: {c.what}" for c in changes]
        details["runner"] = test.runner
        details["command_source"] = test.source
        blocking = [f for f in findings if f.severity == "error"]
        return GateResult(
            name=NAME,
            passed=not blocking,
            findings=tuple(findings),
            logs=logs,
            duration_s=time.monotonic() - start,
            details=details,
            evidence=tuple(evidence),
        )

    def _run_tree(self, ctx: GateContext, test: TestCommand, tree: Path, label: str) -> SuiteRun:
        run = SuiteRun(label=label)
        timeout = ctx.time_left(float(ctx.gate_settings.test_timeout_s))
        logs: list[str] = []
        setup_step = ctx.setup_step or repo_setup(ctx.repo_config.setup, timeout)

        def opened() -> AbstractContextManager[tuple[Sandbox, SetupResult | None]]:
            return fresh_sandbox(ctx.sandbox_factory, tree, setup_step, cancel=ctx.cancel)

        try:
            self._run_in(ctx, test, opened, run, logs, timeout)
        except SandboxError:
            stop = ctx.stop_reason()
            if stop is not None:  # the sandbox was closed under the run on purpose
                raise stop from None
            raise
        stop = ctx.stop_reason()
        if stop is not None:  # what ran was cut short; it is no evidence either way
            raise stop
        run.log = _tail("\n".join(logs))
        return run

    def _run_in(
        self,
        ctx: GateContext,
        test: TestCommand,
        opened: Callable[[], AbstractContextManager[tuple[Sandbox, SetupResult | None]]],
        run: SuiteRun,
        logs: list[str],
        timeout: float,
    ) -> None:
        """The first run and, when something failed, the rerun, each in a sandbox of
        its own (``opened`` makes a fresh one)."""
        with opened() as (sandbox, setup):
            if setup is not None:
                if setup.command or not setup.ok:
                    logs.append(f"$ {setup.command or '(environment)'}\n{setup.output}")
                run.setup_failed = not setup.ok
            first = run_tests(sandbox, test, timeout=timeout)
        first_cases = first.by_id
        logs.append(f"$ {test.command}\n{_output(first.result)}")
        run.first_exit_code = run.exit_code = first.exit_code
        run.timed_out = first.timed_out
        run.junit = first.report
        run.cases = first_cases
        _watch(run, first, first=True)
        # An error (a broken fixture, a collection error) fails like a failure here.
        run.final = {cid: "failed" if c.failed else c.outcome for cid, c in first_cases.items()}
        run.mismatch = first.tampered
        if first.report and not first.timed_out:
            run.mismatch = run.mismatch or report_disagreement(first.result, first_cases)
        failed = any(c.failed for c in first_cases.values())
        timeout = ctx.time_left(timeout)
        if first.timed_out or first.exit_code == 0 or not (failed or not first.report):
            return
        run.reran = True
        with opened() as (sandbox, setup):
            if setup is not None and not setup.ok:
                logs.append(f"$ {setup.command or '(environment)'}  # rerun\n{setup.output}")
            second = run_tests(sandbox, test, timeout=timeout)
        second_cases = second.by_id
        logs.append(f"$ {test.command}  # rerun\n{_output(second.result)}")
        run.exit_code = second.exit_code
        run.timed_out = second.timed_out
        run.mismatch = run.mismatch or second.tampered
        _watch(run, second, first=False)
        if second.report and not second.timed_out:
            run.mismatch = run.mismatch or report_disagreement(second.result, second_cases)
        for cid, outcome in run.final.items():
            if outcome != "failed":
                continue
            again = second_cases.get(cid)
            if again is not None and again.outcome == "passed":
                run.final[cid] = "passed"
                run.flaky.append(cid)


def _watch(run: SuiteRun, test_run: TestRun, *, first: bool) -> None:
    """Fold one run's watch into the tree's: watched only if every run was."""
    run.watched = test_run.watched if first else run.watched and test_run.watched
    run.tamper += [e for e in test_run.tamper if e not in run.tamper]


SetupStep = Callable[[Sandbox], SetupResult | None]
"""Prepares a fresh sandbox before the tests run (worker/sandbox/setup.py run_setup,
bound to the repo's config: the environment and the setup command behind the registry
proxy); None when there was nothing to set up."""


def repo_setup(command: str | None, timeout: float) -> SetupStep:
    """Only the repository's own setup command from .ribbit.yml, run without a login
    shell (for callers that give no full setup step)."""

    def step(sandbox: Sandbox) -> SetupResult | None:
        if not command:
            return None
        done = sandbox.exec(_shell(command), timeout=timeout)
        return SetupResult(
            command=command,
            ok=done.exit_code == 0 and not done.timed_out,
            exit_code=done.exit_code,
            output=_output(done),
            duration_s=done.duration_s,
            timed_out=done.timed_out,
        )

    return step


@contextmanager
def fresh_sandbox(
    factory: SandboxFactory,
    tree: Path,
    setup: SetupStep,
    *,
    cancel: threading.Event | None = None,
) -> Iterator[tuple[Sandbox, SetupResult | None]]:
    """A new sandbox over ``tree`` (a host-built tree: the base commit, with only the
    judged diff applied for the after run), set up by ``setup``. Every test run of the
    gate starts here, so nothing an agent changed outside the repository (its /tmp,
    its home, processes it left) reaches the verdict. When ``cancel`` is set the sandbox
    is closed under the command running in it (``exec`` has no other kill handle)."""
    with factory(tree) as sandbox:
        done = threading.Event()
        watcher = None
        if cancel is not None:
            watcher = threading.Thread(
                target=_close_on_cancel, args=(sandbox, cancel, done), daemon=True
            )
            watcher.start()
        try:
            yield sandbox, setup(sandbox)
        finally:
            done.set()
            if watcher is not None:
                watcher.join()


def _close_on_cancel(sandbox: Sandbox, cancel: threading.Event, done: threading.Event) -> None:
    while not done.is_set():
        if cancel.wait(_CANCEL_POLL_S):
            sandbox.close()
            return


@contextmanager
def base_config_tree(trees: PatchTrees, changes: list[DiscoveryChange]) -> Iterator[Path]:
    """A copy of the after tree with every discovery file as the base has it (removed
    where the base has none)."""
    root = Path(tempfile.mkdtemp(prefix="ribbit-baseconfig-"))
    try:
        tree = root / "tree"
        shutil.copytree(trees.after, tree, symlinks=True)
        for change in changes:
            target = tree / change.path
            if target.is_symlink() or target.exists():
                target.unlink()
            original = regular_file_inside(trees.before, change.path)
            if original is not None:
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(original, target)
        yield tree
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _shell(command: str) -> list[str]:
    """The repository's command, run by bash without a login shell: nothing a profile
    file says runs before Ribbit's own steps."""
    return ["bash", "--noprofile", "--norc", "-c", command]


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


def _output(result: ExecResult) -> str:
    status = "timed out" if result.timed_out else f"exit {result.exit_code}"
    return _tail(f"{result.stdout}\n{result.stderr}".strip()) + f"\n[{status}]"


def target_tests(ctx: GateContext, trees: PatchTrees) -> list[TargetTest]:
    """Tests the patch adds or changes (the test function around each added line:
    Python's ``test_*``, Go's ``TestX``, Rust's ``#[test]`` fns), and tests the issue
    names."""
    targets: dict[tuple[str, str | None, str | None], TargetTest] = {}
    for change in trees.parsed.files:
        if change.new is None or change.new.escapes:
            continue
        path = change.new.path
        enclosing = _test_finder(path)
        lines = _lines(trees.after, path) if enclosing is not None else None
        if enclosing is None or lines is None:
            continue
        for line_no, _ in change.added:
            name = enclosing(lines, line_no)
            if name:
                cls = _test_class(lines, line_no) if enclosing is _enclosing_test else None
                targets[(name, path, cls)] = TargetTest(name=name, path=path, cls=cls)
    for name in _ISSUE_TEST_RE.findall(ctx.issue_text or ""):
        targets.setdefault((name, None, None), TargetTest(name=name, path=None))
    return list(targets.values())


def _test_finder(path: str) -> Callable[[list[str], int], str | None] | None:
    """How to find the test around a line of ``path``, or None: not a test file."""
    # Rust's unit tests live in the code's own files (a #[test] in src/lib.rs).
    if path.endswith(".py") and is_test_path(path):
        return _enclosing_test
    if path.endswith("_test.go"):
        return _enclosing_go_test
    if path.endswith(".rs"):
        return _enclosing_rust_test
    if _JS_EXT_RE.search(path) and is_test_path(path):
        return _enclosing_js_test
    return None


def _lines(tree: Path, path: str) -> list[str] | None:
    file = regular_file_inside(tree, path)
    if file is None:
        return None
    try:
        return file.read_text(errors="replace").splitlines()
    except OSError:
        return None


def edited_lines(trees: PatchTrees, target: TargetTest) -> tuple[list[str], list[str]]:
    """The lines the patch removes from and adds to the test ``target`` names (in the
    base's file and in the patched one): its assertions before and after, side by side."""
    old: list[str] = []
    new: list[str] = []
    finder = _test_finder(target.path or "")
    if finder is None:
        return old, new
    for change in trees.parsed.files:
        if change.new is None or change.new.path != target.path:
            continue
        base = _lines(trees.before, change.old.path) if change.old is not None else None
        after = _lines(trees.after, target.path)
        for lines, edits, into in ((base, change.removed, old), (after, change.added, new)):
            for line_no, text in edits:
                if lines is not None and finder(lines, line_no) == target.name and text.strip():
                    into.append(text.strip())
    return old, new


def _test_class(lines: list[str], line_no: int) -> str | None:
    """The pytest class (``Test*``) whose method holds line ``line_no`` (1-based), or
    None: a module-level test, or a method of a mixin that ``Test*`` classes inherit
    (collected under their names, not the mixin's)."""
    own = lines[line_no - 1]
    indent = len(own) - len(own.lstrip())
    def_indent: int | None = None
    for i in range(line_no - 1, -1, -1):
        line = lines[i]
        if def_indent is None:
            m = _PY_DEF_RE.match(line)
            if m and (i == line_no - 1 or len(m[1]) < indent):
                def_indent = len(m[1])
            continue
        c = _PY_CLASS_RE.match(line)
        if c and len(c[1]) < def_indent:
            collected = c[2].startswith("Test") or "TestCase" in line
            return c[2] if collected else None
        if line[:1].strip() and not line.startswith(("#", "@")):
            return None  # reached module level: not in a class
    return None


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


def _enclosing_go_test(lines: list[str], line_no: int) -> str | None:
    """The ``TestX`` function whose body (or ``func`` line) holds line ``line_no``:
    gofmt puts a top-level ``func`` and its closing ``}`` at column 0."""
    if not 1 <= line_no <= len(lines) or not lines[line_no - 1].strip():
        return None
    if lines[line_no - 1].lstrip().startswith("//"):
        return None
    for i in range(line_no - 1, -1, -1):
        m = _GO_FUNC_RE.match(lines[i])
        if m:
            return m[1] if _GO_TEST_NAME_RE.fullmatch(m[1]) else None
        if lines[i].startswith("}") and i != line_no - 1:
            return None  # after the end of the function above: not inside one
    return None


def _enclosing_rust_test(lines: list[str], line_no: int) -> str | None:
    """The ``#[test]`` function whose body (or ``fn`` line) holds line ``line_no``."""
    if not 1 <= line_no <= len(lines):
        return None
    own = lines[line_no - 1]
    if not own.strip() or own.lstrip().startswith("//"):
        return None
    indent = len(own) - len(own.lstrip())
    for i in range(line_no - 1, -1, -1):
        m = _RS_FN_RE.match(lines[i])
        if not m:
            if i == line_no - 1 and own.lstrip().startswith("#["):
                # An attribute (#[test], #[ignore]) belongs to the fn below it.
                below = next(
                    (j for j in range(line_no, len(lines)) if not _rust_attribute(lines[j])),
                    None,
                )
                fn = _RS_FN_RE.match(lines[below]) if below is not None else None
                return fn[2] if fn and below is not None and _rust_is_test(lines, below) else None
            continue
        if i == line_no - 1 or len(m[1]) < indent:
            return m[2] if _rust_is_test(lines, i) else None
    return None


def _enclosing_js_test(lines: list[str], line_no: int) -> str | None:
    """The title of the ``it``/``test`` call whose callback holds line ``line_no``, by
    indentation (test files are formatted; a formatter puts a callback's body deeper
    than its call): the nearest such call above, less indented than every line between."""
    if not 1 <= line_no <= len(lines):
        return None
    own = lines[line_no - 1]
    if not own.strip() or own.lstrip().startswith("//"):
        return None
    m = _JS_TEST_RE.match(own)
    if m:
        return _js_title(m)
    indent = len(own) - len(own.lstrip())
    for i in range(line_no - 2, -1, -1):
        line = lines[i]
        depth = len(line) - len(line.lstrip())
        if not line.strip() or depth >= indent:
            continue
        m = _JS_TEST_RE.match(line)
        if m:
            return _js_title(m)
        if depth == 0 or _JS_SUITE_RE.match(line):
            return None  # in a describe block or a helper, not in a test
        indent = depth
    return None


def _js_title(m: re.Match[str]) -> str | None:
    title = re.sub(r"\\(.)", r"\1", m[2])
    # A template literal with a placeholder has no fixed title to look for.
    return None if m[1] == "`" and "${" in title else title


def _rust_attribute(line: str) -> bool:
    text = line.strip()
    return text.startswith(("#[", "//"))


def _rust_is_test(lines: list[str], fn_line: int) -> bool:
    """Whether the attributes right above line ``fn_line`` (0-based) hold ``#[test]``."""
    for i in range(fn_line - 1, -1, -1):
        if lines[i].strip() == "#[test]":
            return True
        if not _rust_attribute(lines[i]):
            return False
    return False


def _matches(case: TestCase, target: TargetTest) -> bool:
    if target.path is not None and target.path.endswith(".go"):
        # go test: classname is the package's import path, name "TestX" or "TestX/sub".
        if case.name != target.name and not case.name.startswith(target.name + "/"):
            return False
        folder = str(Path(target.path).parent)
        return folder == "." or case.classname.endswith("/" + folder)
    if target.path is not None and target.path.endswith(".rs"):
        # libtest: classname is the test binary's source ("src/lib.rs", "tests/cli.rs"),
        # name the test's module path ("tests::jaro_x").
        if case.name.rsplit("::", 1)[-1] != target.name:
            return False
        if target.path.startswith("tests/"):
            # tests/x.rs is its own binary; tests/x/helpers.rs belongs to one of them.
            nested = target.path.count("/") > 1
            return case.classname == target.path or (nested and case.classname.startswith("tests/"))
        return not case.classname.startswith(("tests/", "doc:"))
    if target.path is not None and _JS_EXT_RE.search(target.path):
        # jest: the file, and the describe blocks and title joined by spaces; vitest:
        # the file, and the same joined by " > ". Node's junit names no file.
        if case.classname not in (target.path, "test"):
            return False
        return case.name == target.name or case.name.endswith(
            (" " + target.name, NESTED_SEPARATOR + target.name)
        )
    # An issue names a Rust test by its function: libtest's name is its module path.
    name = case.base_name.rsplit("::", 1)[-1]
    if name != target.name and case.classname.rsplit(".", 1)[-1] != target.name:
        return False
    if target.path is None:
        return True
    where = Path(target.path)
    # A test method in a package's __init__.py (a mixin, say) runs as a method of the
    # classes that inherit it, collected from the package's other modules.
    stem = where.parent.name if where.name == "__init__.py" else where.stem
    parts = case.classname.split(".")
    if target.cls is not None and case.classname and target.cls not in parts:
        return False  # the same name in another class of the file: another test
    return not case.classname or stem in parts


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
) -> tuple[list[Finding], dict[str, Any]]:
    """The gate's findings on the runs before and after the patch, and the details the
    report keeps (the test ids behind the findings). With a per-test report the runs
    are compared test by test; without one only the exit statuses can be. ``old_code``
    is the run of the base code with the patch's tests, which the target tests' "before"
    shows (the base run when not given)."""
    findings = [
        *_setup_findings(before, after),
        *_timeout_findings(before, after, ctx.gate_settings.test_timeout_s),
    ]
    compared = _Comparison.of(before, after)
    target_failures: list[str] = []
    if after.timed_out:
        pass  # nothing ran to the end: the timeout is the finding
    elif after.junit:
        findings += compared.findings()
        found, target_failures = _target_findings(after, targets)
        findings += found
        findings += _report_findings(before, after)
    else:
        findings += _exit_status_findings(before, after)
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


def shown_fixed(old_code: SuiteRun, after: SuiteRun, before: SuiteRun) -> list[str]:
    """The gate's fail-to-pass evidence (:func:`worker.gates.evidence.fail_to_pass`):
    the test ids that fail or are absent on the base code with the patch's tests and
    pass with the patch. A test flaky in any run shows nothing; without per-test reports
    the whole command is one test, named by its exit status."""
    if old_code.timed_out or after.timed_out or old_code.setup_failed or after.setup_failed:
        return []
    flaky = {*old_code.flaky, *after.flaky, *before.flaky}
    if old_code.junit and after.junit:
        return fail_to_pass(old_code.final, after.final, flaky=flaky)
    if (
        not old_code.junit
        and not after.junit
        and old_code.exit_code not in (0, None)
        and after.exit_code == 0
        and after.first_exit_code == 0
    ):
        return [f"(the test command: exit {old_code.exit_code} without the fix, 0 with it)"]
    return []


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

    @classmethod
    def of(cls, before: SuiteRun, after: SuiteRun) -> _Comparison:
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
        return cls(
            judged=after.junit and not after.timed_out,
            baseline=baseline,
            regressions=regressions,
            new_failures=new_failures,
            preexisting=[c for c, o in after.final.items() if o == "failed" and c in failed_before],
            vanished=[c for c in passed_before if after.final.get(c) is None],
            now_skipped=[c for c in passed_before if after.final.get(c) == "skipped"],
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
    if after.mismatch and not before.mismatch:
        found.append(
            _finding("report-mismatch", f"the test report is not the run's own: {after.mismatch}")
        )
    return found


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


@dataclass(frozen=True)
class PinnedChanges:
    """Base tests (from the test files the patch edits or deletes, in their base
    versions) that passed on the base code and fail with the patch's code (issue #38)."""

    edited: list[str]  # the patch edits the test too: a behaviour change to confirm
    regressions: list[str]  # the patch leaves the test itself alone: a regression

    def findings(self) -> list[Finding]:
        found = []
        if self.regressions:
            found.append(
                _finding(
                    "pinned-test-regression",
                    f"{len(self.regressions)} test(s) of the base's own test files pass on "
                    f"the base code and fail with the patch's code (the patch edits their "
                    f"files, not them): {_names(self.regressions)}",
                )
            )
        if self.edited:
            found.append(
                _finding(
                    "behaviour-change",
                    f"the patch changes what {len(self.edited)} test(s) pinned and edits "
                    f"them to match; a reviewer must confirm: {_names(self.edited)}",
                    severity="warning",
                )
            )
        return found

    def to_dict(self, trees: PatchTrees, targets: list[TargetTest]) -> dict[str, Any]:
        changes = []
        for test in self.edited:
            target = next((t for t in targets if t.path and _id_names(test, t)), None)
            old, new = edited_lines(trees, target) if target is not None else ([], [])
            changes.append(BehaviourChange(test, tuple(old), tuple(new)).to_dict())
        return {"regressions": self.regressions, "behaviour_changes": changes}


def _id_names(test: str, target: TargetTest) -> bool:
    """Whether test id ``test`` is the test ``target`` names (by file and name)."""
    path, _, rest = test.partition("::")
    name = rest.rsplit("::", 1)[-1].split("[", 1)[0]
    return path == target.path and name.rsplit("::", 1)[-1] == target.name


def pinned_changes(before: SuiteRun, pinned: SuiteRun, targets: list[TargetTest]) -> PinnedChanges:
    """Which base tests the patch's code breaks, split by whether the patch edits them
    (a target test with a path: the patch adds lines inside it)."""
    if not (before.junit and pinned.junit) or before.timed_out or pinned.timed_out:
        return PinnedChanges(edited=[], regressions=[])
    broken = sorted(
        t for t, o in pinned.final.items() if o == "failed" and before.final.get(t) == "passed"
    )
    edited_targets = [t for t in targets if t.path is not None]
    edited = [
        t
        for t in broken
        if t in pinned.cases and any(_matches(pinned.cases[t], e) for e in edited_targets)
    ]
    return PinnedChanges(edited=edited, regressions=[t for t in broken if t not in edited])
