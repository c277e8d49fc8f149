"""The admin audit log: who did what from the dashboard, and when.

Its own table and module (not bot/store/tables.py) so the dashboard's bookkeeping stays
apart from the job store; it shares the bot's metadata so one migration chain covers it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import DateTime, Integer, String, Text, select
from sqlalchemy.orm import Mapped, mapped_column

from bot.store.db import Database
from bot.store.tables import Base, utcnow


class AdminAction(Base):
    __tablename__ = "admin_actions"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow, index=True)
    actor: Mapped[str] = mapped_column(String(255))
    action: Mapped[str] = mapped_column(String(32))
    target: Mapped[str] = mapped_column(String(300))
    outcome: Mapped[str] = mapped_column(String(16))  # ok | refused | error
    detail: Mapped[str | None] = mapped_column(Text, nullable=True)


@dataclass(frozen=True)
class AuditEntry:
    at: datetime
    actor: str
    action: str
    target: str
    outcome: str
    detail: str | None


def record(
    db: Database, *, actor: str, action: str, target: str, outcome: str, detail: str | None
) -> None:
    with db.session() as session:
        session.add(
            AdminAction(actor=actor, action=action, target=target, outcome=outcome, detail=detail)
        )


def recent(db: Database, limit: int = 100) -> list[AuditEntry]:
    with db.session() as session:
        rows = session.scalars(
            select(AdminAction).order_by(AdminAction.id.desc()).limit(limit)
        ).all()
        return [AuditEntry(r.at, r.actor, r.action, r.target, r.outcome, r.detail) for r in rows]
