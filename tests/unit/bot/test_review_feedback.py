"""The review feedback an outcome keeps: the outcome job's JSON reads back typed and
writes back the same; older or odd rows read tolerantly for the trainer's hints."""

from __future__ import annotations

import json
from typing import Any

from bot.store.records import content_free, holds_content
from bot.store.records.review import FeedbackComment, FeedbackReview, ReviewFeedback

# As worker/pipelines/outcomes.py wrote it before the feedback was typed.
STORED: dict[str, Any] = {
    "comments": [{"author": "maya", "body": "check negatives", "path": "calc.py", "line": 3}],
    "reviews": [{"author": "maya", "state": "changes_requested", "body": "wrong approach"}],
}


def test_stored_feedback_reads_typed_and_writes_back_the_same_json() -> None:
    feedback = ReviewFeedback.from_json(STORED)
    assert feedback == ReviewFeedback(
        comments=(FeedbackComment("maya", "check negatives", "calc.py", 3),),
        reviews=(FeedbackReview("maya", "changes_requested", "wrong approach"),),
    )
    assert json.dumps(feedback.to_json()) == json.dumps(STORED)


def test_the_hints_are_the_non_empty_texts_comments_first() -> None:
    row = {
        "comments": [{"body": "  also check zero "}, {"body": "   "}, "not an entry", {"x": 1}],
        "reviews": [{"body": "wrong approach"}, {"body": 7}],
    }
    assert ReviewFeedback.from_json(row).texts() == ["also check zero", "wrong approach"]
    assert ReviewFeedback.from_json(None).texts() == []
    assert ReviewFeedback.from_json({"comments": "nope"}).texts() == []


def test_a_jobs_result_is_cut_to_what_holds_no_content() -> None:
    row = {"version": 1, "turns": 3, "diff": "+x", "exit_reason": "submitted"}
    assert holds_content(row) and not holds_content(content_free(row))
    assert content_free(row) == {"version": 1, "turns": 3, "exit_reason": "submitted"}
    assert content_free({"diff": "+x"}) is None and not holds_content(None)
    assert content_free(row, frozenset({"turns"})) == {"turns": 3}
