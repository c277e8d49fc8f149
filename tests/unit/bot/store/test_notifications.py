"""NotificationStore: a key is sent once, and kept only when the send succeeded."""

from __future__ import annotations

import pytest

from bot.store.db import Database
from bot.store.notifications import NotificationStore


def test_send_once_per_key_and_again_after_a_failed_send(db: Database) -> None:
    store = NotificationStore(db)
    sent: list[str] = []

    def fail() -> None:
        raise ConnectionError("receiver down")

    with pytest.raises(ConnectionError):
        store.send_once("k:1", "one", fail)
    assert store.sent_keys("k:") == set()  # rolled back: the next check tries again
    assert store.send_once("k:1", "one", lambda: sent.append("one"))
    assert not store.send_once("k:1", "one", lambda: sent.append("twice"))
    assert sent == ["one"]


def test_sent_keys_by_prefix(db: Database) -> None:
    store = NotificationStore(db)
    for key in ("lost:a:1", "back:a:1", "budget:x", "lost_%:b"):
        assert store.send_once(key, key, lambda: None)
    assert store.sent_keys("lost:", "back:") == {"lost:a:1", "back:a:1"}
    assert store.sent_keys("budget:") == {"budget:x"}
