"""The environment_validations table: each dashboard request to re-validate a training
environment and its result (bot/env_validation.py runs them)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import DateTime, Integer, String, Text, select, update
from sqlalchemy.orm import Mapped, mapped_column

from bot.store.db import Database
from bot.store.tables import Base, utcnow


class EnvironmentValidation(Base):
    __tablename__ = "environment_validations"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    instance_id: Mapped[str] = mapped_column(String(255), index=True)
    requested_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    requested_by: Mapped[str] = mapped_column(String(255))
    state: Mapped[str] = mapped_column(String(16))  # running | valid | changed | invalid | error
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    detail: Mapped[str | None] = mapped_column(Text, nullable=True)


@dataclass(frozen=True)
class ValidationRecord:
    id: int
    instance_id: str
    requested_at: datetime
    requested_by: str
    state: str
    finished_at: datetime | None
    detail: str | None


class ValidationStore:
    def __init__(self, db: Database) -> None:
        self.db = db

    def history(self, instance_id: str, limit: int) -> list[ValidationRecord]:
        """The environment's validations, newest first."""
        with self.db.session() as session:
            rows = session.scalars(
                select(EnvironmentValidation)
                .where(EnvironmentValidation.instance_id == instance_id)
                .order_by(EnvironmentValidation.id.desc())
                .limit(limit)
            ).all()
            return [
                ValidationRecord(
                    r.id,
                    r.instance_id,
                    r.requested_at,
                    r.requested_by,
                    r.state,
                    r.finished_at,
                    r.detail,
                )
                for r in rows
            ]

    def begin(
        self, instance_id: str, requested_by: str, *, abandoned_after: timedelta
    ) -> int | None:
        """A new running validation's id; None while another of the environment runs."""
        with self.db.session() as session:
            # A process that died mid-validation leaves its row "running"; past any real
            # validation's length it no longer blocks a new one.
            session.execute(
                update(EnvironmentValidation)
                .where(
                    EnvironmentValidation.instance_id == instance_id,
                    EnvironmentValidation.state == "running",
                    EnvironmentValidation.requested_at < utcnow() - abandoned_after,
                )
                .values(state="error", detail="abandoned: the process running it stopped")
            )
            running = session.scalar(
                select(EnvironmentValidation.id).where(
                    EnvironmentValidation.instance_id == instance_id,
                    EnvironmentValidation.state == "running",
                )
            )
            if running is not None:
                return None
            row = EnvironmentValidation(
                instance_id=instance_id, requested_by=requested_by, state="running"
            )
            session.add(row)
            session.flush()
            return row.id

    def finish(self, run_id: int, state: str, detail: str) -> None:
        with self.db.session() as session:
            row = session.get(EnvironmentValidation, run_id)
            if row is not None:
                row.state, row.detail, row.finished_at = state, detail, utcnow()
