"""Issue #38: the base's own versions of the test files a patch edits or deletes, run
against the patched code. A base test that passed on the base code and fails there is a
regression when the patch leaves the test alone, and a behaviour change a reviewer must
confirm (a warning; no test counts as evidence then) when the patch edits it to match,
unless the issue carries a label under which the repository's reviewers accept such
changes (``.ribbit.yml`` ``gates.behaviour_change_labels``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bot.store.records.gate_report import Finding
from worker.gates.base import GateContext
from worker.gates.evidence import BehaviourChange
from worker.gates.judge import SuiteRun, _finding, _names
from worker.gates.tamper import tamper_findings
from worker.gates.targets import TargetTest, _matches, edited_lines
from worker.gates.trees import PatchTrees


@dataclass(frozen=True)
class PinnedChanges:
    """Base tests (from the test files the patch edits or deletes, in their base
    versions) that passed on the base code and fail with the patch's code (issue #38)."""

    # The patch edits the test too (the edited test the patch's diff names): a behaviour
    # change to confirm.
    edited: dict[str, TargetTest]
    regressions: list[str]  # the patch leaves the test itself alone: a regression
    # The issue's label under which the repository's reviewers accept such a change.
    accepted_by: str | None = None

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
            confirm = (
                f"the issue is labelled {self.accepted_by!r}, under which the repository's "
                f"reviewers accept such a change"
                if self.accepted_by
                else "a reviewer must confirm"
            )
            found.append(
                _finding(
                    "behaviour-change",
                    f"the patch changes what {len(self.edited)} test(s) pinned and edits "
                    f"them to match; {confirm}: {_names(list(self.edited))}",
                    severity="warning",
                )
            )
        return found

    def to_dict(self, trees: PatchTrees) -> dict[str, Any]:
        changes = [
            BehaviourChange(test, *map(tuple, edited_lines(trees, target))).to_dict()
            for test, target in self.edited.items()
        ]
        return {
            "regressions": self.regressions,
            "behaviour_changes": changes,
            "accepted_by_label": self.accepted_by,
        }


def accepting_label(ctx: GateContext) -> str | None:
    """The issue's label, if it carries one, under which the repository's reviewers
    accept a change of pinned behaviour as verified (``gates.behaviour_change_labels``;
    forge labels are case-insensitive). Only people with triage rights label issues, so
    the patch's author cannot grant it."""
    wanted = {label.casefold() for label in ctx.repo_config.gates.behaviour_change_labels}
    return next((label for label in ctx.issue_labels if label.casefold() in wanted), None)


def pinned_changes(
    before: SuiteRun,
    pinned: SuiteRun | None,
    targets: list[TargetTest],
    accepted_by: str | None = None,
) -> PinnedChanges:
    """Which base tests the patch's code breaks, split by whether the patch edits them
    (a target test with a path: the patch adds lines inside it; matched by file, class
    and name in every language the targets know). No pinned run (the patch edits no
    test file), or no per-test report: none."""
    if pinned is None or not (before.junit and pinned.junit):
        return PinnedChanges(edited={}, regressions=[])
    if before.timed_out or pinned.timed_out:
        return PinnedChanges(edited={}, regressions=[])
    broken = sorted(
        t for t, o in pinned.final.items() if o == "failed" and before.final.get(t) == "passed"
    )
    edited_targets = [t for t in targets if t.path is not None]
    edited: dict[str, TargetTest] = {}
    for test in broken:
        case = pinned.cases.get(test)
        target = next((e for e in edited_targets if case and _matches(case, e)), None)
        if target is not None:
            edited[test] = target
    regressions = [t for t in broken if t not in edited]
    return PinnedChanges(edited=edited, regressions=regressions, accepted_by=accepted_by)


def answered(pinned: SuiteRun | None, moved: PinnedChanges) -> frozenset[str]:
    """Base tests the pinned run judged against the patched code: passed there (their
    base versions hold, whatever the patch did to their ids), or failed there in a test
    the patch edits (a behaviour change, reported as one). A base test that stops running
    after the patch is then no silent loss (judge.py's ``tests-missing``)."""
    if pinned is None or not pinned.junit or pinned.timed_out:
        return frozenset()
    held = {t for t, o in pinned.final.items() if o == "passed"}
    return frozenset(held | set(moved.edited))


def pinned_verdict(
    before: SuiteRun,
    pinned: SuiteRun,
    trees: PatchTrees,
    moved: PinnedChanges,
    findings: list[Finding],
) -> tuple[list[Finding], dict[str, Any], bool]:
    """What the pinned run adds to the gate's ``findings`` (the ones it made already),
    the report's details of it, and whether no test may count as evidence: a pinned
    behaviour moved with its tests edited to match, and no label of the issue says the
    repository's reviewers accept that."""
    # The patched code runs here too, under the base's tests: what it forges there
    # would hide a pinned behaviour it broke.
    added = [f for f in tamper_findings(before, pinned, trees) if f not in findings]
    added += moved.findings()
    details = {"run": pinned.summary(), **moved.to_dict(trees)}
    return added, details, bool(moved.edited) and moved.accepted_by is None
