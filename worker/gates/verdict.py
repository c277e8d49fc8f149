"""What the test gate's result means for the people reading the issue and the PR: whether
the base tree was already broken (so the patch is not to blame), which tests show the
fix (fail without the patch's code, pass with it), which target tests pass, and whether
any test exercised the change at all."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from bot.store.records.gate_report import GateResult
from worker.gates.evidence import BehaviourChange
from worker.repo_config import CONFIG_PATH


@dataclass(frozen=True)
class TestVerdict:
    __test__ = False  # not a pytest class, whatever its name says

    base_broken: bool  # the tests fail at the base commit the same way as with the patch
    base_reason: str  # what failed at the base, for the message
    targets: tuple[str, ...]  # tests the patch adds or changes, or the issue names
    target_failures: tuple[str, ...]
    # name -> {"before": outcome, "after": outcome} (worker/gates/judge.py _target_results)
    target_results: dict[str, dict[str, str]] = field(default_factory=dict)
    # Test ids that fail without the patch's code and pass with it (GateResult.evidence).
    evidence: tuple[str, ...] = ()
    # Base tests the patch's code breaks and the patch edits to match (issue #38).
    behaviour_changes: tuple[BehaviourChange, ...] = ()
    # The label under which the repository's reviewers accept those changes.
    behaviour_change_label: str | None = None
    # How the results were read: "watched" (every run that decided them went through
    # Ribbit's pytest watch), "report" (the test process's own report or exit status),
    # "" (no run on record).
    reading: str = ""
    runner: str = ""  # testcmd.TestCommand.runner: pytest, go, cargo, shell...

    @classmethod
    def from_result(cls, result: GateResult | None) -> TestVerdict:
        """The test gate's result as the notes read it (no result: nothing known)."""
        if result is None:
            return cls.from_details({})
        return cls.from_details(result.details, evidence=result.evidence)

    @classmethod
    def from_details(
        cls, details: dict[str, Any], *, evidence: tuple[str, ...] = ()
    ) -> TestVerdict:
        before: dict[str, Any] = details.get("before") or {}
        after: dict[str, Any] = details.get("after") or {}
        reason = _base_broken(before, after)
        results = details.get("target_results")
        pinned = details.get("pinned")
        moved = pinned.get("behaviour_changes") if isinstance(pinned, dict) else None
        changes = (BehaviourChange.from_dict(c) for c in (moved if isinstance(moved, list) else ()))
        label = pinned.get("accepted_by_label") if isinstance(pinned, dict) else None
        runner = details.get("runner")
        return cls(
            reading=_reading(details),
            runner=runner if isinstance(runner, str) else "",
            behaviour_changes=tuple(c for c in changes if c is not None),
            behaviour_change_label=label if isinstance(label, str) else None,
            base_broken=bool(reason),
            base_reason=reason,
            targets=tuple(details.get("targets") or ()),
            target_failures=tuple(details.get("target_failures") or ()),
            target_results={
                str(name): {k: str(v) for k, v in r.items()}
                for name, r in (results if isinstance(results, dict) else {}).items()
                if isinstance(r, dict)
            },
            evidence=evidence,
        )

    def _behaviour_change_lines(self) -> list[str]:
        """The tests whose pinned behaviour the patch moves, old and new side by side."""
        if not self.behaviour_changes:
            return []
        confirm = (
            f"The issue is labelled {_code(self.behaviour_change_label)}, under which "
            f"this repository's reviewers accept such a change "
            f"(`gates.behaviour_change_labels` in `{CONFIG_PATH}`), so they count as "
            f"evidence."
            if self.behaviour_change_label
            else "A reviewer must confirm the change; they count as no evidence."
        )
        return [
            "- **Changes behaviour the repository's tests pinned**: these tests pass "
            "on the base code in their base version and fail with the patch's code, "
            f"and the patch edits them to match. {confirm}",
            "",
            "  | test | before the patch | with the patch |",
            "  |---|---|---|",
            *(
                f"  | {_code(c.test)} | {_cell(c.old)} | {_cell(c.new)} |"
                for c in self.behaviour_changes[:20]
            ),
            "",
        ]

    @property
    def passing_targets(self) -> tuple[str, ...]:
        failed = set(self.target_failures)
        return tuple(t for t in self.targets if t not in failed and not any(t in f for f in failed))

    def notes_markdown(self) -> str:
        """Plain statements for the PR body and the status comment."""
        lines = []
        if self.base_broken:
            lines.append(
                f"- The base tree's tests fail too: {self.base_reason}. The repository's "
                f"test set-up looks broken, not the patch; check `setup` and `test` in "
                f"`{CONFIG_PATH}`."
            )
        if self.evidence:
            shown = ", ".join(_code(t) for t in self.evidence[:10])
            more = len(self.evidence) - 10
            lines.append(
                f"- Fails without this patch's code and passes with it: {shown}"
                + (f" and {more} more" if more > 0 else "")
                + "."
            )
        lines += self._behaviour_change_lines()
        if not self.targets:
            lines.append(
                "- No test exercised the change: the patch adds or changes no test, and "
                "the issue names none."
            )
        elif not self.evidence:
            lines.append(
                "- No test fails without this patch: the tests it adds or changes, and "
                "those the issue names, pass on the old code too (or not with the patch)."
            )
        if self.targets and self.passing_targets:
            shown = ", ".join(_code(t) for t in self.passing_targets[:10])
            lines.append(f"- Target tests passing with the patch: {shown}.")
        if self.target_results:
            shown = ", ".join(
                f"{_code(name)} {_word(r.get('before'))} → {_word(r.get('after'))}"
                for name, r in list(self.target_results.items())[:10]
            )
            more = len(self.target_results) - 10
            lines.append(
                f"- Target tests, before → with the patch: {shown}"
                + (f" and {more} more" if more > 0 else "")
                + "."
            )
        reading = self._reading_line()
        if reading:
            lines.append(reading)
        return "\n".join(lines)

    def _reading_line(self) -> str:
        """What the results above rest on: a "passes" read from a report the code under
        test could have written is worth less than one the watch saw, and the reviewer
        should know which it is."""
        if self.reading == "watched":
            return (
                "- How these results were read: every run was watched (pytest under "
                "Ribbit's bootstrap: results over a channel the tests cannot reach, what "
                "the code under test did to the runner recorded, the interpreter's "
                "start-up compared with the base run's)."
            )
        if self.reading != "report":
            return ""
        why = {
            "shell": f"the test command is not a plain pytest command (`test` in `{CONFIG_PATH}`)",
            "pytest": "a pytest run did not start under Ribbit's bootstrap",
        }.get(self.runner, f"Ribbit watches pytest runs only, not {self.runner or 'this runner'}")
        return (
            "- How these results were read: from the test command's own report and exit "
            f"status, unwatched ({why}). The code under test runs in the process that "
            "writes them and could forge them: only Ribbit's cross-checks of report, "
            "console and exit status and its checks of the patch's code stand in the "
            "way, so read the tests named above before trusting a pass."
        )


def _code(name: str) -> str:
    """A test's name as a code span: its text comes from the patch (a JavaScript test's
    title may hold a backtick or a line break), so it cannot end the span early."""
    return "`" + name.replace("`", "'").replace("\n", " ") + "`"


def _cell(lines: tuple[str, ...]) -> str:
    """A test's changed lines in one table cell, each a code span (patch text)."""
    if not lines:
        return "(none)"
    return "<br>".join(_code(line.replace("|", "\\|")) for line in lines[:8])


def _word(outcome: str | None) -> str:
    """A target test's outcome in one tree, as the notes say it."""
    if outcome == "absent":
        return "not run"  # no test of that name ran there: new with the patch, or gone
    return outcome if outcome in ("passed", "failed", "skipped") else "unknown"


def _reading(details: dict[str, Any]) -> str:
    """``TestVerdict.reading`` from the gate's details: watched only when both trees'
    runs and the old-code evidence run (where there was one) all were."""
    evidence = details.get("evidence")
    old_code = evidence.get("run") if isinstance(evidence, dict) else None
    runs = [details.get("before"), details.get("after"), old_code]
    ran = [r for r in runs if isinstance(r, dict) and r.get("exit_code") is not None]
    if not ran:
        return ""
    return "watched" if all(r.get("watched") is True for r in ran) else "report"


def _passed(run: dict[str, Any]) -> int:
    counts = run.get("counts") or {}
    return int(counts.get("passed", 0))


def _base_broken(before: dict[str, Any], after: dict[str, Any]) -> str:
    """Why the base tree's tests already fail the way they do with the patch ("" when
    they do not): setup failing on both, no test passing on either with the same exit
    (command not found, import or collection errors, zero tests), or only tests that
    already failed failing again."""
    if before.get("setup_failed") and after.get("setup_failed"):
        return "the setup command fails before and after the patch"
    code = before.get("exit_code")
    if before.get("report_expected") and not before.get("per_test") and not before.get("timed_out"):
        return f"the test command exits {code} at the base commit without running its tests"
    if code in (0, None) or after.get("exit_code") != code:
        return ""
    if _passed(before) == 0 and _passed(after) == 0:
        return (
            f"the test command exits {code} before and after the patch and no test passes "
            "(command not found, import or collection errors, or no tests?)"
        )
    failing_before = set(before.get("failing") or ())
    failing_after = set(after.get("failing") or ())
    if failing_after and failing_after <= failing_before:
        return f"the same {len(failing_after)} test(s) fail before and after the patch"
    return ""
