"""The database helpers of bot/store/db.py: WAL on a bare file, a transaction re-run on a
fresh connection when the first was found dead, and the group commit that lets concurrent
webhooks share a transaction while each keeps its own outcome."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from sqlalchemy import event, text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session

from bot.store.db import Database, GroupCommit, use_wal
from tests.support import HeldLead


def _journal_mode(path: Path) -> str:
    conn = sqlite3.connect(path)
    try:
        return str(conn.execute("PRAGMA journal_mode").fetchone()[0])
    finally:
        conn.close()


def test_use_wal_sets_the_mode_on_the_file_for_later_connections(tmp_path: Path) -> None:
    path = tmp_path / "broker.db"
    sqlite3.connect(path).close()
    assert _journal_mode(path) == "delete"  # SQLite's default: what kombu would get
    use_wal(path)
    assert _journal_mode(path) == "wal"
    use_wal(path)  # again, on a file already in WAL (every process start)
    assert _journal_mode(path) == "wal"


def test_use_wal_creates_a_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "new.db"
    use_wal(path)
    assert path.is_file()
    assert _journal_mode(path) == "wal"


class _Lost(DBAPIError):
    def __init__(self, *, invalidated: bool) -> None:
        super().__init__("SELECT 1", None, Exception("server closed the connection"))
        self.connection_invalidated = invalidated


def test_transaction_reruns_once_on_a_dead_connection(tmp_path: Path) -> None:
    db = Database(f"sqlite:///{tmp_path / 'db.sqlite'}")
    runs: list[int] = []

    def work(session: Session) -> str:
        runs.append(1)
        if len(runs) == 1:
            raise _Lost(invalidated=True)
        return "done"

    assert db.transaction(work) == "done" and len(runs) == 2

    def always_lost(session: Session) -> str:
        runs.append(1)
        raise _Lost(invalidated=True)

    runs.clear()
    with pytest.raises(_Lost):
        db.transaction(always_lost)
    assert len(runs) == 2

    def other_error(session: Session) -> str:
        runs.append(1)
        raise _Lost(invalidated=False)

    runs.clear()
    with pytest.raises(_Lost):
        db.transaction(other_error)
    assert len(runs) == 1
    db.dispose()


# -- group commit ------------------------------------------------------------------------


class _Rows:
    """A table of names, a GroupCommit over it, and a count of commits."""

    def __init__(self, tmp_path: Path) -> None:
        self.db = Database(f"sqlite:///{tmp_path / 'group.sqlite'}")
        with self.db.session() as session:
            session.execute(text("CREATE TABLE names (name TEXT PRIMARY KEY)"))
        self.commits = GroupCommit(self.db)
        self.transactions = 0
        event.listen(self.db.engine, "commit", self._count)

    def _count(self, _conn: object) -> None:
        self.transactions += 1

    def names(self) -> list[str]:
        with self.db.session() as session:
            return sorted(session.scalars(text("SELECT name FROM names")))

    @staticmethod
    def insert(name: str) -> Callable[[Session], str]:
        def work(session: Session) -> str:
            session.execute(text("INSERT INTO names VALUES (:n)"), {"n": name})
            return name

        return work


def _queue_behind_a_leader(
    rows: _Rows, works: list[Callable[[Session], str]]
) -> tuple[dict[int, object], Callable[[], None]]:
    """A held lead (whose work inserts "leader"), then one thread per work, queued behind
    it; returns their outcomes (by index, the leader's at -1) and a function that lets the
    leader go and joins every thread."""
    lead = HeldLead(rows.commits, then=rows.insert("leader"))
    outcomes: dict[int, object] = {}

    def call(index: int, work: Callable[[Session], str]) -> None:
        try:
            outcomes[index] = rows.commits.run(work)
        except BaseException as exc:
            outcomes[index] = exc

    threads = [threading.Thread(target=call, args=(i, w)) for i, w in enumerate(works)]
    for t in threads:
        t.start()
    lead.wait_queued(len(works))

    def finish() -> None:
        lead.release()
        for t in threads:
            t.join(30)
        outcomes[-1] = lead.outcome

    return outcomes, finish


def test_group_commit_runs_a_lone_caller_in_a_transaction_of_its_own(tmp_path: Path) -> None:
    rows = _Rows(tmp_path)
    before = rows.transactions
    assert rows.commits.run(rows.insert("a")) == "a"
    assert rows.commits.run(rows.insert("b")) == "b"
    assert rows.transactions - before == 2
    assert rows.names() == ["a", "b"]


def test_group_commit_puts_callers_queued_together_in_one_transaction(tmp_path: Path) -> None:
    rows = _Rows(tmp_path)
    before = rows.transactions
    outcomes, finish = _queue_behind_a_leader(rows, [rows.insert(f"n{i}") for i in range(6)])
    finish()
    assert outcomes == {-1: "leader", **{i: f"n{i}" for i in range(6)}}
    # The leader's own, then the six that queued behind it, together.
    assert rows.transactions - before == 2
    assert rows.names() == sorted(["leader", *(f"n{i}" for i in range(6))])


def test_group_commit_a_failing_work_keeps_nothing_and_spares_the_others(tmp_path: Path) -> None:
    rows = _Rows(tmp_path)

    def half_done(session: Session) -> str:
        rows.insert("half")(session)  # written, then the work fails: must not be kept
        raise ValueError("bad payload")

    works = [rows.insert("a"), half_done, rows.insert("b"), rows.insert("c")]
    before = rows.transactions
    outcomes, finish = _queue_behind_a_leader(rows, works)
    finish()
    # The leader's; the failing work alone (rolled back); the other three, together again.
    assert rows.transactions - before == 2
    assert outcomes[0] == "a" and outcomes[2] == "b" and outcomes[3] == "c"
    error = outcomes[1]
    assert isinstance(error, ValueError) and str(error) == "bad payload"
    assert rows.names() == ["a", "b", "c", "leader"]


def test_group_commit_a_conflict_inside_the_batch_lets_exactly_one_through(
    tmp_path: Path,
) -> None:
    """Two callers inserting the same key in one batch: as if each had run alone, one
    succeeds and the other gets the unique-key error, whatever the order."""
    rows = _Rows(tmp_path)
    outcomes, finish = _queue_behind_a_leader(
        rows, [rows.insert("x"), rows.insert("same"), rows.insert("same"), rows.insert("y")]
    )
    finish()
    assert outcomes[0] == "x" and outcomes[3] == "y"
    assert sorted(type(outcomes[i]).__name__ for i in (1, 2)) == ["IntegrityError", "str"]
    assert rows.names() == ["leader", "same", "x", "y"]


def test_group_commit_settles_every_queued_caller_when_the_leader_is_interrupted(
    tmp_path: Path,
) -> None:
    class Interrupted(BaseException):
        pass

    rows = _Rows(tmp_path)

    def interrupted(session: Session) -> str:
        raise Interrupted

    outcomes, finish = _queue_behind_a_leader(rows, [interrupted, rows.insert("after")])
    finish()
    # The first leader led its own work only, then woke the first caller queued, who led
    # the other two: that thread got the interrupt, and the caller queued with it is
    # answered with an error, not left waiting. Nothing of their batch was kept.
    assert outcomes[-1] == "leader"
    assert sorted(type(outcomes[i]).__name__ for i in (0, 1)) == ["Interrupted", "RuntimeError"]
    assert rows.names() == ["leader"]
    # The next caller is served as usual.
    assert rows.commits.run(rows.insert("later")) == "later"


def test_group_commit_under_contention_runs_every_work_once(tmp_path: Path) -> None:
    """Many threads at once, in whatever interleaving the scheduler picks: every call
    returns its own result and every row is there once (a work left queued with no
    leader would hang its thread: the join would time out)."""
    rows = _Rows(tmp_path)
    returned: list[str] = []

    def caller(t: int) -> None:
        for i in range(25):
            returned.append(rows.commits.run(rows.insert(f"t{t}-{i}")))

    threads = [threading.Thread(target=caller, args=(t,)) for t in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not any(t.is_alive() for t in threads)
    expected = sorted(f"t{t}-{i}" for t in range(12) for i in range(25))
    assert sorted(returned) == expected
    assert rows.names() == expected
