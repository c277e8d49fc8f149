"""The noise_pauses table: each time a repository was paused for its bot PRs' merge rate,
with the numbers, and whether its maintainers were told (worker/noise.py decides)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Literal

from sqlalchemy import BigInteger, DateTime, Integer, String, func, or_, select
from sqlalchemy.orm import Mapped, Session, mapped_column

from bot.store.db import Database
from bot.store.tables import Base, utcnow

ToldColumn = Literal["commented_at", "notified_at"]


class NoisePause(Base):
    __tablename__ = "noise_pauses"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    forge: Mapped[str] = mapped_column(String(16))
    repo: Mapped[str] = mapped_column(String(255))
    paused_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    window_start: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    merged: Mapped[int] = mapped_column(Integer)
    closed: Mapped[int] = mapped_column(Integer)
    issue_number: Mapped[int | None] = mapped_column(Integer, nullable=True)
    installation_id: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    commented_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    notified_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)


class NoiseStore:
    def __init__(self, db: Database) -> None:
        self.db = db

    @staticmethod
    def last_paused_at(session: Session, forge: str, repo: str) -> datetime | None:
        """When the repository was last paused for noise, in the caller's transaction (the
        check decides and pauses in the same one)."""
        last = session.scalar(
            select(func.max(NoisePause.paused_at)).where(
                NoisePause.forge == forge, NoisePause.repo == repo
            )
        )
        # SQLite hands back naive datetimes even for timezone=True columns; stored UTC.
        return None if last is None else last if last.tzinfo else last.replace(tzinfo=UTC)

    @staticmethod
    def record(session: Session, pause: NoisePause) -> NoisePause:
        """Insert ``pause`` in the caller's transaction; returned detached, with its id."""
        session.add(pause)
        session.flush()
        session.expunge(pause)
        return pause

    def untold(self, forge: str, repo: str) -> list[NoisePause]:
        """The repository's pauses not yet commented on or not yet notified, detached."""
        with self.db.session() as session:
            rows = list(
                session.scalars(
                    select(NoisePause).where(
                        NoisePause.forge == forge,
                        NoisePause.repo == repo,
                        or_(NoisePause.commented_at.is_(None), NoisePause.notified_at.is_(None)),
                    )
                )
            )
            session.expunge_all()
            return rows

    def mark_told(self, pause_id: int, column: ToldColumn) -> None:
        with self.db.session() as session:
            row = session.get(NoisePause, pause_id)
            assert row is not None
            setattr(row, column, utcnow())
