"""Issue #38: the base's own versions of the test files a patch edits or deletes, run
against the patched code. A base test that passed on the base code and fails there is a
regression when the patch leaves the test alone, and a behaviour change a reviewer must
confirm (a warning; no test counts as evidence then) when the patch edits it to match.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bot.store.gate_report import Finding
from worker.gates.evidence import BehaviourChange
from worker.gates.judge import SuiteRun, _finding, _names
from worker.gates.tamper import tamper_findings
from worker.gates.targets import TargetTest, _matches, edited_lines
from worker.gates.trees import PatchTrees


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


def pinned_verdict(
    before: SuiteRun,
    pinned: SuiteRun,
    trees: PatchTrees,
    targets: list[TargetTest],
    findings: list[Finding],
) -> tuple[list[Finding], dict[str, Any], bool]:
    """What the pinned run adds to the gate's ``findings`` (the ones it made already),
    the report's details of it, and whether a pinned behaviour moved with its tests
    edited to match (then no test counts as evidence)."""
    # The patched code runs here too, under the base's tests: what it forges there
    # would hide a pinned behaviour it broke.
    added = [f for f in tamper_findings(before, pinned, trees) if f not in findings]
    moved = pinned_changes(before, pinned, targets)
    added += moved.findings()
    details = {"run": pinned.summary(), **moved.to_dict(trees, targets)}
    return added, details, bool(moved.edited)
