"""One pull request's outcome as the worker found it on the forge (:class:`OutcomeRecord`),
written by the outcome job (worker/pipelines/outcomes.py) through
:meth:`bot.store.outcomes.OutcomeStore.save`, with the reviewers' words typed
(bot/store/records/review.py)."""

from __future__ import annotations

from dataclasses import dataclass, fields
from datetime import datetime
from typing import Any

from bot.store.records.review import ReviewFeedback


@dataclass(frozen=True)
class OutcomeRecord:
    """One PR's outcome as the worker found it on the forge."""

    forge: str
    repo: str
    pr_number: int
    issue_number: int | None
    job_id: str | None
    human_authored: bool
    state: str  # merged | closed
    actor: str | None
    decided_at: datetime | None
    time_to_merge_s: float | None
    revisions: int
    review_comments: ReviewFeedback
    bot_diff: str | None
    merged_diff: str | None
    diff_similarity: float | None

    def row_values(self) -> dict[str, Any]:
        """The outcome row's columns, by name (the feedback as the row's JSON)."""
        values = {f.name: getattr(self, f.name) for f in fields(self)}
        values["review_comments"] = self.review_comments.to_json()
        return values
