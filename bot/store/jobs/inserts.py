"""INSERT ... ON CONFLICT DO NOTHING, for the rows a concurrent duplicate may race: a
delivery (its id, its signed body) and a job (its issue's active_key)."""

from __future__ import annotations

from functools import cache
from typing import Any

from sqlalchemy import Executable, Table
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session


@cache
def _insert_or_skip_statement(dialect: str, table: Table) -> Executable:
    """INSERT that skips a row breaking a unique key instead of failing, and returns the
    key of a row it did insert (rowcount cannot tell: drivers report -1 or 1 for a skipped
    row): no savepoint around it and no error that aborts a PostgreSQL transaction."""
    key = table.primary_key.columns
    if dialect == "sqlite":
        return sqlite.insert(table).on_conflict_do_nothing().returning(*key)
    if dialect == "postgresql":
        return postgresql.insert(table).on_conflict_do_nothing().returning(*key)
    raise NotImplementedError(f"no insert-or-skip for {dialect}")


def insert_or_skip(session: Session, table: Table, row: dict[str, Any]) -> bool:
    """Insert ``row``; False where a unique key already held it (nothing inserted)."""
    # Pending ORM changes first: a job cancelled earlier in this transaction frees its
    # issue's active_key before a new job may take it.
    session.flush()
    conn = session.connection()
    stmt = _insert_or_skip_statement(conn.dialect.name, table)
    return conn.execute(stmt, row).first() is not None
