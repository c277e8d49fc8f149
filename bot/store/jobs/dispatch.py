"""The dispatch sweep's side of jobs: which queued jobs are due to be sent, recording
that they were, giving a job back to the sweep for later, and running jobs gone stale."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

from sqlalchemy import bindparam, select, update

from bot.store.db import Database
from bot.store.jobs.states import TERMINAL_STATES, move
from bot.store.tables import Job, utcnow

_MARK_DISPATCHED = (
    update(Job.__table__)  # type: ignore[arg-type]
    .where(
        Job.__table__.c.id == bindparam("job_id"),
        Job.__table__.c.dispatch_seq == bindparam("seq"),
    )
    .values(dispatched=True)
)


class JobDispatch:
    """JobStore's dispatch sweep (a mixin over JobStore's database)."""

    db: Database

    def mark_dispatched(self, sent: Sequence[tuple[str, int]]) -> None:
        """Record sends of (job id, dispatch seq). A job that moved on meanwhile (ran and was
        deferred again: a newer seq) stays undispatched, or its deferral would be lost."""
        if not sent:
            return
        rows = [{"job_id": job_id, "seq": seq} for job_id, seq in sent]
        # One prebuilt Core statement run as an executemany: an ORM update built per job
        # cost the sender more than the web request did for the job.
        self.db.transaction(lambda session: session.connection().execute(_MARK_DISPATCHED, rows))

    def defer(self, job_id: str, until: datetime, reason: str) -> None:
        """Give a job back to the sweep, to be re-sent at ``until`` at the earliest: a
        running job (forge outage) returns to queued, a queued one (no free slot) waits."""
        with self.db.session() as session:
            job = session.get(Job, job_id)
            if job is None or job.state in TERMINAL_STATES:
                return
            if job.state == "running":
                move(job, "queued", reason=reason)
            else:
                job.dispatched = False
                job.dispatch_seq += 1
            job.not_before = until

    def take_pending_dispatch(self, *, now: datetime | None = None) -> list[Job]:
        """Queued jobs due to be sent (never sent, deferred past their time, released from
        a pause), oldest first, each with a fresh dispatch seq for its message."""
        now = now or utcnow()
        with self.db.session() as session:
            rows: list[Job] = [
                *session.scalars(
                    select(Job)
                    .where(
                        Job.state == "queued",
                        Job.held.is_(False),
                        Job.dispatched.is_(False),
                        (Job.not_before.is_(None)) | (Job.not_before <= now),
                    )
                    .order_by(Job.created_at)
                ).all()
            ]
            for job in rows:
                job.dispatch_seq += 1
            session.flush()
            session.expunge_all()
            return rows

    def stale_running(self, older_than: timedelta) -> list[Job]:
        cutoff = utcnow() - older_than
        with self.db.session() as session:
            rows: list[Job] = [
                *session.scalars(
                    select(Job).where(Job.state == "running", Job.updated_at < cutoff)
                ).all()
            ]
            session.expunge_all()
            return rows
