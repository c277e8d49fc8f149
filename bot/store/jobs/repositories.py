"""What Ribbit records of a repository: its pause, trigger label (cached, and whether it was
made sure of on the forge) and visibility."""

from __future__ import annotations

from sqlalchemy import select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from bot.store.db import Database
from bot.store.tables import Repository


def repository_row(session: Session, forge: str, full_name: str) -> Repository:
    """The repository's row, created if it has none (a concurrent creator's row if that
    one won the race)."""
    row = session.scalar(
        select(Repository).where(Repository.forge == forge, Repository.full_name == full_name)
    )
    if row is None:
        row = Repository(forge=forge, full_name=full_name)
        try:
            with session.begin_nested():
                session.add(row)
                session.flush()
        except IntegrityError:
            row = session.scalar(
                select(Repository).where(
                    Repository.forge == forge, Repository.full_name == full_name
                )
            )
            assert row is not None
    return row


class Repositories:
    """JobStore's repositories (a mixin over JobStore's database)."""

    db: Database

    def repository(self, session: Session, forge: str, full_name: str) -> Repository:
        return repository_row(session, forge, full_name)

    def cached_trigger_label(self, session: Session, forge: str, full_name: str) -> str | None:
        row = session.scalar(
            select(Repository).where(Repository.forge == forge, Repository.full_name == full_name)
        )
        return row.trigger_label if row else None

    def visibility(self, forge: str, full_name: str) -> bool | None:
        """Whether the repository is private, as recorded; None where never recorded."""
        with self.db.session() as session:
            return session.scalar(
                select(Repository.private).where(
                    Repository.forge == forge, Repository.full_name == full_name
                )
            )

    def record_visibility(
        self, session: Session, forge: str, full_name: str, *, private: bool
    ) -> None:
        """In the caller's transaction (intake's, one per webhook): kept with its jobs or
        rolled back with them."""
        self.repository(session, forge, full_name).private = private

    def set_visibility(self, forge: str, full_name: str, *, private: bool) -> None:
        with self.db.session() as session:
            self.record_visibility(session, forge, full_name, private=private)

    def set_trigger_label(self, forge: str, full_name: str, label: str | None) -> None:
        with self.db.session() as session:
            self.repository(session, forge, full_name).trigger_label = label

    def claim_label_check(self, forge: str, full_name: str) -> bool:
        """True for the one caller that is to make sure the trigger label exists on the
        repository (a conditional UPDATE: of jobs starting together, one wins)."""
        with self.db.session() as session:
            repository_row(session, forge, full_name)
            claimed = session.execute(
                update(Repository)
                .where(
                    Repository.forge == forge,
                    Repository.full_name == full_name,
                    Repository.label_ensured.is_(False),
                )
                .values(label_ensured=True)
            )
            return bool(getattr(claimed, "rowcount", 0) == 1)

    def release_label_check(self, forge: str, full_name: str) -> None:
        """The claimed check could not finish (the forge was down): the next job tries."""
        with self.db.session() as session:
            repository_row(session, forge, full_name).label_ensured = False
