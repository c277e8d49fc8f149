"""The one statement the web process writes to the embedded broker's own tables itself.

kombu's SQLAlchemy channel owns those tables (``kombu_queue``, ``kombu_message``); the
sender in bot/queue.py writes a batch of messages in one statement and one commit, the
rows as kombu's own ``Message`` would be inserted.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Table, insert
from sqlalchemy.orm import Session


def insert_messages(session: Session, table: Table, rows: Sequence[dict[str, Any]]) -> None:
    """One executemany for the batch, in ``session``'s transaction: kombu's channel built
    an ORM object per message and flushed it, half of a send's CPU."""
    session.execute(insert(table), list(rows))
