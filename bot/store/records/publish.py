"""The publish plan a job's record keeps (``publish``) between the gates and the PR.

Stored before the push and dropped once the PR exists, so that a rerun after a lost
answer or a killed worker publishes the same commit instead of running the agent again
(worker/pipelines/publish.py makes and carries it out). It lives here, beside the record
that stores it, so that the record reads it typed.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, Literal

from bot.forges.branches import validate_branch_name
from bot.store.records.gate_report import Verdict


@dataclass(frozen=True)
class PublishPlan:
    """Everything the publish steps (commit, push, PR) need, stored in the job's result
    before the push so a rerun resumes from it instead of running the agent again."""

    branch: str
    base_sha: str
    diff: str
    commit_message: str
    commit_date: str  # git's internal format, "<unix seconds> +0000"
    title: str
    body: str
    labels: tuple[str, ...]
    reviewers: tuple[str, ...]
    passed: bool  # verified
    summary_line: str
    report_md: str
    revise: bool
    # A plan stored before the gates looked for evidence reads as judged before it.
    verdict: Verdict = Verdict.BEFORE_EVIDENCE

    def to_dict(self) -> dict[str, Any]:
        return {
            **{f.name: getattr(self, f.name) for f in fields(self)},
            "labels": list(self.labels),
            "reviewers": list(self.reviewers),
            "verdict": self.verdict.value,
        }

    @property
    def status_state(self) -> Literal["success", "failure"]:
        """The head's commit status. GitHub's commit statuses and GitLab's pipeline
        statuses have no neutral state, so only a verified patch is "success"; an
        unverified one is "failure" (its description says "Not verified"), so a branch
        protection that requires Ribbit's status keeps it unmerged until a human has
        looked. "pending" would read as a run still going, forever."""
        return "success" if self.passed else "failure"

    def checked(self) -> PublishPlan:
        """The plan, once its branch is known safe to hand to git (UnsafeRefError if
        not): a stored plan is read back from the database before it is pushed."""
        validate_branch_name(self.branch)
        return self

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> PublishPlan | None:
        """The plan a record stored, checked (None: none, or one this code cannot use)."""
        plan = cls.read(data)
        return plan.checked() if plan is not None else None

    @classmethod
    def read(cls, data: Any) -> PublishPlan | None:
        """The plan a record stored, unchecked: how the job's record reads it, so that a
        page showing the record never fails on it (None: none, or one this code cannot
        use)."""
        if not isinstance(data, dict):
            return None
        try:
            return cls(
                **{
                    **data,
                    "labels": tuple(data["labels"]),
                    "reviewers": tuple(data["reviewers"]),
                    "verdict": Verdict(data.get("verdict", Verdict.BEFORE_EVIDENCE)),
                }
            )
        except (KeyError, TypeError, ValueError):
            return None
