"""The admin_sessions table: one row per signed-in dashboard browser.

The cookie carries a random session id; the table keeps only its SHA-256, so a copy of
the database signs no one in. Logging out deletes the row, which is what makes a copied
cookie worthless at once rather than when it would have expired. Each row also keeps a
fingerprint of the token its admin signed in with (bot/web/admin/auth.py): a token changed
in the settings ends that admin's sessions.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import DateTime, String, delete
from sqlalchemy.orm import Mapped, mapped_column

from bot.store.db import Database
from bot.store.tables import Base, utcnow


class AdminSessionRow(Base):
    __tablename__ = "admin_sessions"

    id_hash: Mapped[str] = mapped_column(String(64), primary_key=True)
    actor: Mapped[str] = mapped_column(String(64))
    token_fingerprint: Mapped[str] = mapped_column(String(64))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    expires_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), index=True)


@dataclass(frozen=True)
class AdminSession:
    actor: str
    token_fingerprint: str
    expires_at: datetime


def _hash(session_id: str) -> str:
    return hashlib.sha256(session_id.encode("utf-8", "surrogateescape")).hexdigest()


def _aware(value: datetime) -> datetime:
    # SQLite hands back naive datetimes even for timezone=True columns; they were stored UTC.
    return value if value.tzinfo else value.replace(tzinfo=utcnow().tzinfo)


class AdminSessionStore:
    def __init__(self, db: Database) -> None:
        self.db = db

    def start(
        self, actor: str, token_fingerprint: str, *, ttl: timedelta, now: datetime | None = None
    ) -> str:
        """A new session's id (for the cookie), valid for ``ttl``; expired rows are swept
        on the way, so the table holds only live sessions and those not yet swept."""
        now = now or utcnow()
        session_id = secrets.token_urlsafe(32)
        with self.db.session() as session:
            session.execute(delete(AdminSessionRow).where(AdminSessionRow.expires_at <= now))
            session.add(
                AdminSessionRow(
                    id_hash=_hash(session_id),
                    actor=actor,
                    token_fingerprint=token_fingerprint,
                    created_at=now,
                    expires_at=now + ttl,
                )
            )
        return session_id

    def find(self, session_id: str, *, now: datetime | None = None) -> AdminSession | None:
        """The live session of that id; None if there is none, it ended, or it expired."""
        now = now or utcnow()
        with self.db.session() as session:
            row = session.get(AdminSessionRow, _hash(session_id))
            if row is None or _aware(row.expires_at) <= now:
                return None
            return AdminSession(row.actor, row.token_fingerprint, _aware(row.expires_at))

    def end(self, session_id: str) -> bool:
        """Delete that session; whether there was one."""
        with self.db.session() as session:
            result = session.execute(
                delete(AdminSessionRow).where(AdminSessionRow.id_hash == _hash(session_id))
            )
            return bool(getattr(result, "rowcount", 0))

    def end_all(self, actor: str) -> int:
        """Delete every session of ``actor`` (signed out everywhere); how many there were."""
        with self.db.session() as session:
            result = session.execute(delete(AdminSessionRow).where(AdminSessionRow.actor == actor))
            return int(getattr(result, "rowcount", 0))
