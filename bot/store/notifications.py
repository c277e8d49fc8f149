"""The notifications_sent table: the key of every notification posted, which is what makes
each condition announced once (bot/notify.py says which conditions and keys)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from sqlalchemy import DateTime, String, Text, or_, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Mapped, mapped_column

from bot.store.db import Database
from bot.store.tables import Base, utcnow


class NotificationSent(Base):
    __tablename__ = "notifications_sent"

    key: Mapped[str] = mapped_column(String(300), primary_key=True)
    sent_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    text: Mapped[str] = mapped_column(Text)


class NotificationStore:
    def __init__(self, db: Database) -> None:
        self.db = db

    def sent_keys(self, *prefixes: str) -> set[str]:
        """The keys sent so far that start with one of ``prefixes``."""
        with self.db.session() as session:
            return set(
                session.scalars(
                    select(NotificationSent.key).where(
                        or_(*(NotificationSent.key.like(f"{p}%") for p in prefixes))
                    )
                )
            )

    def send_once(self, key: str, text: str, send: Callable[[], None]) -> bool:
        """Run ``send`` unless ``key`` was sent before (False), keeping the key only if
        ``send`` returns: the key is inserted in the same transaction, before, so of two
        processes only one sends, and an error from ``send`` rolls it back (raised on)."""
        try:
            with self.db.session() as session:
                session.add(NotificationSent(key=key, text=text))
                session.flush()  # a duplicate key fails here, before anything is sent
                send()
        except IntegrityError:
            return False
        return True
