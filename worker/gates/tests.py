"""The test gate: run the repository's tests in fresh sandboxes before and after the
patch, and compare them test by test.

It passes when the tests the issue is about pass (tests the patch adds or changes,
and tests the issue text names) and every test that passed before still passes
after: the base decides the test set, so a test that vanishes from the run, is
skipped now, or fails, blocks; a run of zero tests blocks.

Passing is not evidence. A third run, of the base code with the patch's own test files
(:func:`worker.gates.evidence.base_with_patch_tests`; the base run itself when the
patch touches no test), gives the result its ``evidence``: the test ids that fail there
(or are absent because their module could not load) and pass with the patch
(:func:`worker.gates.evidence.fail_to_pass`, the environment builder's judge). Without
any, the verdict is at most unverified. Target tests are named by test id (file, class,
parametrisation), never by name alone.
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

This module runs the tests; which tests the patch is about is targets.py's, what the
runs show judge.py's, and the pinned run's reading (#38) pinned.py's.
"""

from __future__ import annotations

import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import replace
from pathlib import Path

from bot.store.records.gate_report import Finding, GateResult
from worker.gates.base import GateContext
from worker.gates.discovery import DiscoveryChange, changed_paths, discovery_changes
from worker.gates.evidence import base_with_patch_tests, patched_code_with_base_tests
from worker.gates.judge import NAME, SuiteRun, judge, report_disagreement, shown_fixed
from worker.gates.pinned import accepting_label, answered, pinned_changes, pinned_verdict
from worker.gates.runner import apply_failure, run_tree_gate
from worker.gates.startup import setup_changes
from worker.gates.tamper import ran_outside, tamper_findings
from worker.gates.targets import TargetTest, target_tests
from worker.gates.testcmd import TestCommand, resolve_test_command
from worker.gates.testrun import TestRun, run_tests
from worker.gates.trees import PatchTrees, regular_file_inside
from worker.sandbox.base import ExecResult, Sandbox, SandboxError, SandboxFactory
from worker.sandbox.setup import SetupResult

_LOG_TAIL = 3000
_CANCEL_POLL_S = 0.5  # how soon a /ribbit stop reaches a running test command


def _tail(text: str, limit: int = _LOG_TAIL) -> str:
    return text if len(text) <= limit else "…" + text[-limit:]


def _run_log(entries: list[tuple[str, str]]) -> str:
    """One tree's log: each step's command line whole (what ran, which a tail of the
    joined text would cut off) over the tail of its output, the last step's longest."""
    shown = [
        f"{header}\n{_tail(body, _LOG_TAIL if i == len(entries) - 1 else _LOG_TAIL // 2)}"
        for i, (header, body) in enumerate(entries)
    ]
    return "\n".join(shown)


def _run_logs(
    before: SuiteRun, after: SuiteRun, old_code: SuiteRun, pinned: SuiteRun | None
) -> str:
    """Each run's log under its own heading."""
    logs = f"--- before ---\n{before.log}\n--- after ---\n{after.log}"
    if old_code is not before:
        logs += f"\n--- base code with the patch's tests ---\n{old_code.log}"
    if pinned is not None:
        logs += f"\n--- patched code with the base's tests ---\n{pinned.log}"
    return logs


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
        old_code, pinned = self._evidence_runs(ctx, test, trees, before)
        targets = target_tests(ctx, trees)
        moved = pinned_changes(before, pinned, targets, accepting_label(ctx))
        held = answered(pinned, moved)
        findings, details = judge(
            ctx, before, after, targets, test.command, old_code=old_code, answered=held
        )
        findings += tamper_findings(before, after, trees)
        evidence = shown_fixed(old_code, after, before, test.runner)
        if ran_outside(old_code, after):
            evidence = []  # a test's result came from an unwatched process
        if pinned is not None:
            found, details["pinned"], unconfirmed = pinned_verdict(
                before, pinned, trees, moved, findings
            )
            findings += found
            if unconfirmed:
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
        logs = _run_logs(before, after, old_code, pinned)
        if changes and ctx.repo_config.gates.test_config_changes == "warn":
            # The repository lets the patch change its test configuration; the verdict
            # still rests on the base's: the patched code runs again with it.
            again, blocked = self._base_config_run(ctx, test, trees, changes, before, targets)
            findings += blocked
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

    def _base_config_run(
        self,
        ctx: GateContext,
        test: TestCommand,
        trees: PatchTrees,
        changes: list[DiscoveryChange],
        before: SuiteRun,
        targets: list[TargetTest],
    ) -> tuple[SuiteRun, list[Finding]]:
        """The patched code run with the base's test configuration, and what blocks in
        that run (its rules prefixed ``base-config-``)."""
        with base_config_tree(trees, changes) as tree:
            again = self._run_tree(ctx, test, tree, "after (base test configuration)")
        found, _ = judge(ctx, before, again, targets, test.command)
        found += tamper_findings(before, again, trees)
        blocked = [replace(f, rule=f"base-config-{f.rule}") for f in found if f.severity == "error"]
        return again, blocked

    def _evidence_runs(
        self, ctx: GateContext, test: TestCommand, trees: PatchTrees, before: SuiteRun
    ) -> tuple[SuiteRun, SuiteRun | None]:
        """The runs that judge the patch's tests and the base's against the other side's
        code: the old code with the patch's tests (``before`` when it adds none) and the
        patched code with the base's tests (None when it edits or deletes none)."""
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
        return old_code, pinned

    def _run_tree(self, ctx: GateContext, test: TestCommand, tree: Path, label: str) -> SuiteRun:
        run = SuiteRun(label=label)
        timeout = ctx.time_left(float(ctx.gate_settings.test_timeout_s))
        logs: list[tuple[str, str]] = []
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
        run.log = _run_log(logs)
        run.setup_wrote = setup_changes(run.startup, tree)
        return run

    def _run_in(
        self,
        ctx: GateContext,
        test: TestCommand,
        opened: Callable[[], AbstractContextManager[tuple[Sandbox, SetupResult | None]]],
        run: SuiteRun,
        logs: list[tuple[str, str]],
        timeout: float,
    ) -> None:
        """The first run and, when something failed, the rerun, each in a sandbox of
        its own (``opened`` makes a fresh one)."""
        with opened() as (sandbox, setup):
            if setup is not None:
                if setup.command or not setup.ok:
                    logs.append((f"$ {setup.command or '(environment)'}", setup.output))
                run.setup_failed = not setup.ok
            since = setup.restored_at_ns if setup is not None else None
            first = run_tests(sandbox, test, timeout=timeout, written_since=since)
        first_cases = first.by_id
        logs.append((f"$ {_ran(test, first)}", _output(first.result)))
        run.report_expected = first.report_expected
        run.first_exit_code = run.exit_code = first.exit_code
        run.timed_out = first.timed_out
        run.junit = first.report
        run.cases = first_cases
        _watch(run, first, first=True)
        # An error (a broken fixture, a collection error) fails like a failure here.
        run.final = {cid: "failed" if c.failed else c.outcome for cid, c in first_cases.items()}
        run.mismatch = first.tampered
        run.strays = first.strays
        if first.report and not first.timed_out:
            run.mismatch = run.mismatch or report_disagreement(first.result, first_cases)
        failed = any(c.failed for c in first_cases.values())
        timeout = ctx.time_left(timeout)
        if first.timed_out or first.exit_code == 0 or not (failed or not first.report):
            return
        run.reran = True
        with opened() as (sandbox, setup):
            if setup is not None and not setup.ok:
                logs.append((f"$ {setup.command or '(environment)'}  # rerun", setup.output))
            since = setup.restored_at_ns if setup is not None else None
            second = run_tests(sandbox, test, timeout=timeout, written_since=since)
        second_cases = second.by_id
        logs.append((f"$ {_ran(test, second)}  # rerun", _output(second.result)))
        run.exit_code = second.exit_code
        run.timed_out = second.timed_out
        run.mismatch = run.mismatch or second.tampered
        run.strays += second.strays
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


def _ran(test: TestCommand, test_run: TestRun) -> str:
    """The log's command line: the command as the repository wrote it and, where Ribbit
    ran it differently (a launcher, report options), what really ran."""
    if not test_run.ran or test_run.ran == test.command:
        return test.command
    return f"{test.command}\n# ran: {test_run.ran}"


def _watch(run: SuiteRun, test_run: TestRun, *, first: bool) -> None:
    """Fold one run's watch into the tree's: watched only if every run was."""
    run.watched = test_run.watched if first else run.watched and test_run.watched
    run.tamper += [e for e in test_run.tamper if e not in run.tamper]
    kept = [] if first else run.startup  # None: an earlier run was not scanned
    if test_run.startup is None or kept is None:
        run.startup = None
    else:
        run.startup = [*kept, *(i for i in test_run.startup if i not in kept)]


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


def _output(result: ExecResult) -> str:
    status = "timed out" if result.timed_out else f"exit {result.exit_code}"
    return _tail(f"{result.stdout}\n{result.stderr}".strip()) + f"\n[{status}]"
