"""OutcomeStore.bot_decisions on a real (SQLite) database."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from bot.store.db import Database
from bot.store.outcomes import OutcomeStore
from bot.store.records.outcome import OutcomeRecord
from bot.store.records.review import ReviewFeedback
from bot.store.tables import utcnow

_MERGED = OutcomeRecord(
    forge="github",
    repo="o/r",
    pr_number=1,
    issue_number=1,
    job_id=None,
    human_authored=False,
    state="merged",
    actor="m",
    decided_at=None,
    time_to_merge_s=None,
    revisions=2,
    review_comments=ReviewFeedback(),
    bot_diff=None,
    merged_diff=None,
    diff_similarity=None,
)


def test_bot_decisions_leave_human_fixes_out(db: Database) -> None:
    store = OutcomeStore(db)
    decided = utcnow() - timedelta(days=3)
    store.save(replace(_MERGED, decided_at=decided))
    store.save(replace(_MERGED, pr_number=2, state="closed", revisions=0))
    store.save(replace(_MERGED, pr_number=3, human_authored=True))
    found = sorted(store.bot_decisions(), key=lambda d: d.state)
    assert [(d.state, d.revisions) for d in found] == [("closed", 0), ("merged", 2)]
    closed, merged = found
    assert closed.decided_at is None and closed.recorded_at is not None
    assert merged.decided_at is not None
    assert merged.decided_at.replace(tzinfo=decided.tzinfo) == decided
