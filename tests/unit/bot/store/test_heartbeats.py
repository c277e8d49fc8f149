"""HeartbeatStore on a real (SQLite) database."""

from __future__ import annotations

from bot.store.db import Database
from bot.store.heartbeats import HeartbeatStore


def test_beat_seen_and_forget(db: Database) -> None:
    store = HeartbeatStore(db)
    store.beat("w2", started=True)
    store.beat("w1", started=True)
    first = {w.name: w for w in store.seen()}
    store.beat("w1")
    again = {w.name: w for w in store.seen()}
    assert list(again) == ["w1", "w2"]
    assert again["w1"].started_at == first["w1"].started_at
    assert again["w1"].last_seen >= first["w1"].last_seen
    assert again["w1"].last_seen.tzinfo is not None
    store.beat("w1", started=True)
    assert store.seen()[0].started_at >= first["w1"].last_seen
    store.forget("w1")
    assert [w.name for w in store.seen()] == ["w2"]
