"""The review feedback an outcome keeps (``outcomes.review_comments``): the pull
request's review comments and reviews by writers, as the outcome job found them
(worker/pipelines/outcomes.py). The trainer turns their text into the hints of the
environments built from the outcome (trainer/envs/candidates.py).

Only writers' words are kept: the feedback obeys the prompt's trust rule, since what is
stored here reaches a model. Reading is tolerant (an entry of the wrong shape is
skipped, a value of the wrong type reads as absent); writing is exact, in the keys and
order the outcome job always wrote.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from bot.store.tolerant import opt_int, opt_str

_Entry = TypeVar("_Entry")


@dataclass(frozen=True)
class FeedbackComment:
    """A review comment, on a line of the diff when ``path`` is set."""

    author: str | None
    body: str
    path: str | None = None
    line: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {"author": self.author, "body": self.body, "path": self.path, "line": self.line}

    @classmethod
    def from_json(cls, data: Any) -> FeedbackComment | None:
        body = opt_str(data.get("body")) if isinstance(data, dict) else None
        if body is None:
            return None
        return cls(
            author=opt_str(data.get("author")),
            body=body,
            path=opt_str(data.get("path")),
            line=opt_int(data.get("line")),
        )


@dataclass(frozen=True)
class FeedbackReview:
    """A review (approved, changes requested, commented) with its summary text."""

    author: str | None
    state: str | None
    body: str

    def to_json(self) -> dict[str, Any]:
        return {"author": self.author, "state": self.state, "body": self.body}

    @classmethod
    def from_json(cls, data: Any) -> FeedbackReview | None:
        body = opt_str(data.get("body")) if isinstance(data, dict) else None
        if body is None:
            return None
        return cls(author=opt_str(data.get("author")), state=opt_str(data.get("state")), body=body)


@dataclass(frozen=True)
class ReviewFeedback:
    """What reviewers who may write said on a pull request."""

    comments: tuple[FeedbackComment, ...] = ()
    reviews: tuple[FeedbackReview, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "comments": [c.to_json() for c in self.comments],
            "reviews": [r.to_json() for r in self.reviews],
        }

    @classmethod
    def from_json(cls, data: Any) -> ReviewFeedback:
        """The feedback an outcome row holds (empty for None and for non-objects)."""
        if not isinstance(data, dict):
            return cls()
        return cls(
            comments=_entries(data.get("comments"), FeedbackComment.from_json),
            reviews=_entries(data.get("reviews"), FeedbackReview.from_json),
        )

    def texts(self) -> list[str]:
        """The comments' and then the reviews' text, stripped, the empty ones left out."""
        texts = [c.body for c in self.comments] + [r.body for r in self.reviews]
        return [t.strip() for t in texts if t.strip()]


def _entries(data: Any, read: Callable[[Any], _Entry | None]) -> tuple[_Entry, ...]:
    """The entries of a stored list that read whole (none for a non-list)."""
    if not isinstance(data, list):
        return ()
    return tuple(e for e in map(read, data) if e is not None)
