"""Whether the gates' report holds a patch back from the forge, and what the issue and
the job's record then say: the gates refused it (hygiene or Semgrep block even a draft;
a failing test blocks unless the repository asks for failing drafts), or no test shows
the fix and the repository refuses unverified patches. solve.py acts on the answer.
"""

from __future__ import annotations

from dataclasses import dataclass

from bot.store.gate_report import GateReport, Verdict
from worker.pipelines.verdict import TestVerdict
from worker.repo_config import CONFIG_PATH, RepoConfig


@dataclass(frozen=True)
class HeldBack:
    """A patch that gets no pull request."""

    message: str  # for the issue's status comment, above the gates' report
    reason: str  # the job's failure reason


def held_back(report: GateReport, verdict: TestVerdict, config: RepoConfig) -> HeldBack | None:
    """Why the patch the gates judged is not published, or None: it is (a pass, or a
    failing draft the repository asked for)."""
    draft_on_failure = config.gates.draft_on_failure
    if report.refused and not (draft_on_failure and report.may_push):
        return _gates_failed(report, verdict, draft_on_failure=draft_on_failure)
    if report.verdict is Verdict.UNVERIFIED and config.gates.unverified == "refuse":
        return HeldBack(
            "Not verified: no test fails without this patch, and this repository "
            f"refuses unverified patches (`gates.unverified: refuse` in `{CONFIG_PATH}`), "
            "so no PR was opened.",
            "gates: not verified (the repository refuses unverified patches)",
        )
    return None


def _gates_failed(report: GateReport, verdict: TestVerdict, *, draft_on_failure: bool) -> HeldBack:
    """Which gates failed, and whether the base's own tests failed too (then the
    repository's test set-up is blamed, not the patch)."""
    why = (
        " (hygiene or Semgrep blocked it, so it is not pushed even with gates.draft_on_failure)"
        if draft_on_failure
        else ""
    )
    blame = (
        f"The gates did not pass (`{report.summary_line()}`), but the base tree's "
        f"tests fail too ({verdict.base_reason}): the repository's test set-up "
        f"looks broken rather than the patch. No PR was opened{why}."
        if verdict.base_broken
        else f"The patch did not pass the gates "
        f"(`{report.summary_line()}`), so no PR was opened{why}."
    )
    return HeldBack(blame, f"gates failed: {report.summary_line()}")
