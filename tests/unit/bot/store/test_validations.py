"""ValidationStore on a real (SQLite) database."""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy import update

from bot.store.db import Database
from bot.store.tables import utcnow
from bot.store.validations import EnvironmentValidation, ValidationStore

HOURS = timedelta(hours=6)


def test_one_running_per_environment_then_history(db: Database) -> None:
    store = ValidationStore(db)
    first = store.begin("e1", "alice", abandoned_after=HOURS)
    assert first is not None
    assert store.begin("e1", "bob", abandoned_after=HOURS) is None
    assert store.begin("e2", "bob", abandoned_after=HOURS) is not None
    store.finish(first, "valid", "all held")
    second = store.begin("e1", "bob", abandoned_after=HOURS)
    assert second is not None
    assert [(r.id, r.state, r.requested_by) for r in store.history("e1", limit=5)] == [
        (second, "running", "bob"),
        (first, "valid", "alice"),
    ]
    assert [r.id for r in store.history("e1", limit=1)] == [second]
    done = store.history("e1", limit=5)[1]
    assert done.detail == "all held" and done.finished_at is not None


def test_an_abandoned_run_no_longer_blocks(db: Database) -> None:
    store = ValidationStore(db)
    stuck = store.begin("e1", "alice", abandoned_after=HOURS)
    assert stuck is not None
    with db.session() as session:  # its process died long ago
        session.execute(
            update(EnvironmentValidation)
            .where(EnvironmentValidation.id == stuck)
            .values(requested_at=utcnow() - HOURS - timedelta(minutes=1))
        )
    assert store.begin("e1", "bob", abandoned_after=HOURS) is not None
    old = store.history("e1", limit=5)[1]
    assert (old.id, old.state) == (stuck, "error")
    assert old.detail is not None and "abandoned" in old.detail
