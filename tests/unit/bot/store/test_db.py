"""The database helpers of bot/store/db.py that stand alone from an engine."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from bot.store.db import use_wal


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
