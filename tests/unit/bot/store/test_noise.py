"""NoiseStore on a real (SQLite) database."""

from __future__ import annotations

from datetime import timedelta

from bot.store.db import Database
from bot.store.noise import NoisePause, NoiseStore
from bot.store.tables import utcnow


def _pause(forge: str, repo: str, days_ago: int) -> NoisePause:
    at = utcnow() - timedelta(days=days_ago)
    return NoisePause(forge=forge, repo=repo, paused_at=at, window_start=at, merged=1, closed=4)


def test_last_pause_record_and_telling(db: Database) -> None:
    store = NoiseStore(db)
    with db.session() as session:
        assert store.last_paused_at(session, "github", "o/r") is None
        old = store.record(session, _pause("github", "o/r", 9))
        new = store.record(session, _pause("github", "o/r", 2))
        store.record(session, _pause("gitlab", "o/r", 1))
        last = store.last_paused_at(session, "github", "o/r")
    assert last is not None and last.tzinfo is not None
    assert last == new.paused_at
    assert {p.id for p in store.untold("github", "o/r")} == {old.id, new.id}
    store.mark_told(old.id, "commented_at")
    assert {p.id for p in store.untold("github", "o/r")} == {old.id, new.id}
    store.mark_told(old.id, "notified_at")
    (left,) = store.untold("github", "o/r")
    assert left.id == new.id and left.commented_at is None
