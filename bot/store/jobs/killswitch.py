"""The kill switch: pausing the whole bot or one repository, and lifting the pause. A job
accepted while paused is held (not sent to a worker) until its pause is lifted."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from bot.store.db import Database
from bot.store.jobs.repositories import repository_row
from bot.store.tables import Control, Job, Repository

# The control row whose value "1" pauses the whole bot (intake reads it in its one
# statement, bot.store.jobs.intake).
GLOBAL_PAUSE = "paused"


def _global_paused(session: Session) -> bool:
    ctl = session.get(Control, GLOBAL_PAUSE)
    return ctl is not None and ctl.value == "1"


def paused(session: Session, forge: str, repo: str) -> bool:
    """Whether jobs of the repository are held: the bot or the repository is paused."""
    if _global_paused(session):
        return True
    row = session.scalar(
        select(Repository).where(Repository.forge == forge, Repository.full_name == repo)
    )
    return bool(row and row.paused)


def _set_control(session: Session, key: str, value: str) -> None:
    ctl = session.get(Control, key)
    if ctl is None:
        session.add(Control(key=key, value=value))
    else:
        ctl.value = value


class KillSwitch:
    """JobStore's kill switch (a mixin over JobStore's database)."""

    db: Database

    def pause(self, *, forge: str | None = None, repo: str | None = None) -> None:
        with self.db.session() as session:
            if repo is None:
                _set_control(session, GLOBAL_PAUSE, "1")
            else:
                repository_row(session, forge or "github", repo).paused = True

    def resume(self, *, forge: str | None = None, repo: str | None = None) -> list[str]:
        """Lift a pause; returns the ids of held jobs that may now be dispatched."""
        with self.db.session() as session:
            if repo is None:
                _set_control(session, GLOBAL_PAUSE, "0")
            else:
                repository_row(session, forge or "github", repo).paused = False
            held = session.scalars(
                select(Job).where(Job.state == "queued", Job.held.is_(True))
            ).all()
            released = []
            for job in held:
                if not paused(session, job.forge, job.repo):
                    job.held = False
                    job.dispatched = False
                    released.append(job.id)
            return released

    def is_paused(self, session: Session, forge: str, repo: str) -> bool:
        return paused(session, forge, repo)

    def paused_scopes(self) -> list[str]:
        with self.db.session() as session:
            scopes = ["*"] if _global_paused(session) else []
            scopes += [
                f"{r.forge}:{r.full_name}"
                for r in session.scalars(
                    select(Repository).where(Repository.paused.is_(True))
                ).all()
            ]
            return scopes
