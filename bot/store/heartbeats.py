"""The worker_heartbeats table: each worker process's own heartbeat (bot/worker_heartbeats.py
says who beats and who reads)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import DateTime, String, delete, select
from sqlalchemy.orm import Mapped, mapped_column

from bot.store.db import Database
from bot.store.tables import Base, utcnow


class WorkerHeartbeat(Base):
    __tablename__ = "worker_heartbeats"

    name: Mapped[str] = mapped_column(String(255), primary_key=True)
    started_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    last_seen: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


@dataclass(frozen=True)
class WorkerSeen:
    name: str
    started_at: datetime
    last_seen: datetime


def _aware(value: datetime) -> datetime:
    # SQLite hands back naive datetimes even for timezone=True columns; they were stored UTC.
    return value if value.tzinfo else value.replace(tzinfo=utcnow().tzinfo)


class HeartbeatStore:
    def __init__(self, db: Database) -> None:
        self.db = db

    def beat(self, name: str, *, started: bool = False) -> None:
        """Record that ``name`` is alive now; ``started``: it has just (re)started."""
        now = utcnow()
        with self.db.session() as session:
            row = session.get(WorkerHeartbeat, name)
            if row is None:
                session.add(WorkerHeartbeat(name=name, started_at=now, last_seen=now))
            else:
                row.last_seen = now
                if started:
                    row.started_at = now

    def forget(self, name: str) -> None:
        with self.db.session() as session:
            session.execute(delete(WorkerHeartbeat).where(WorkerHeartbeat.name == name))

    def seen(self) -> list[WorkerSeen]:
        """Every worker with a row, by name."""
        with self.db.session() as session:
            rows = session.scalars(select(WorkerHeartbeat).order_by(WorkerHeartbeat.name)).all()
            return [WorkerSeen(r.name, _aware(r.started_at), _aware(r.last_seen)) for r in rows]
