"""The database helpers of bot/store/db.py: WAL on a bare file, and a transaction re-run
on a fresh connection when the first was found dead."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session

from bot.store.db import Database, use_wal


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
