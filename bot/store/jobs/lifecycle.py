"""A job's life once created: claiming it for a worker under the concurrency limits (or
reclaiming it from a dead one), its heartbeat, its moves (bot.store.jobs.states) and the
columns a run sets on it."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, timedelta
from typing import Any, Literal

from sqlalchemy import update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from bot.store.db import Database
from bot.store.failure import FailureReason
from bot.store.jobs.killswitch import paused
from bot.store.jobs.lookups import count_jobs
from bot.store.jobs.states import TERMINAL_STATES, JobNotFound, JobState, move
from bot.store.kinds import AGENT_KINDS
from bot.store.records import SolveRecord
from bot.store.tables import Control, Job, utcnow

_ADMISSION_LOCK = "admission-lock"


@dataclass(frozen=True)
class Limits:
    max_concurrent: int
    max_concurrent_per_repo: int


ClaimOutcome = Literal[
    "claimed", "reclaimed", "no_slot", "finished", "running_elsewhere", "held", "stale"
]


class JobLifecycle:
    """JobStore's job lifecycle (a mixin over JobStore's database)."""

    db: Database

    def transition(
        self,
        job_id: str,
        to: JobState,
        *,
        reason: str | None = None,
        failure: FailureReason | None = None,
        **fields: Any,
    ) -> Job:
        """Move a job to ``to`` (and set extra columns in the same transaction)."""
        with self.db.session() as session:
            job = session.get(Job, job_id)
            if job is None:
                raise JobNotFound(job_id)
            move(job, to, reason=reason, failure=failure)
            for name, value in fields.items():
                setattr(job, name, value)
            session.flush()
            session.expunge(job)
            return job

    def cancel(self, session: Session, job: Job, reason: str) -> None:
        """Cancel a queued or running job; a running job's worker notices and stops."""
        move(job, "cancelled", reason=reason)
        session.flush()

    def update(self, job_id: str, **fields: Any) -> None:
        """Set non-state columns (stage, branch, pr_url, result, status_comment_id, ...)."""
        if "state" in fields:
            raise ValueError("use transition() to change a job's state")
        with self.db.session() as session:
            session.execute(
                update(Job).where(Job.id == job_id).values(**fields, updated_at=utcnow())
            )

    def record_solve(self, job_id: str, record: SolveRecord, **columns: Any) -> None:
        """Store a solve/revise job's record as it stands (and other columns with it)."""
        self.update(job_id, result=record.to_json(), **columns)

    def claim(
        self, job_id: str, limits: Limits, *, stale_after: timedelta, seq: int | None = None
    ) -> ClaimOutcome:
        """Move a queued job to running if the concurrency limits leave a slot (limits
        count agent jobs only).

        A job left running by a worker that died (no heartbeat for ``stale_after``) is
        reclaimed. The first statement writes the admission lock row, which serialises
        claims: SQLite takes its write lock there, PostgreSQL a row lock, so two workers
        can never both take the last free slot.

        ``seq`` is the dispatch sequence the message carried (None from senders older than
        it): a message of an earlier send is "stale" and must run nothing.
        """
        with self.db.session() as session:
            self._lock_admission(session)
            job = session.get(Job, job_id)
            if job is None or job.state in TERMINAL_STATES:
                return "finished"
            if seq is not None and seq != job.dispatch_seq:
                return "stale"
            if job.state == "running":
                if job.updated_at.replace(tzinfo=job.updated_at.tzinfo or UTC) > (
                    utcnow() - stale_after
                ):
                    return "running_elsewhere"
                move(job, "queued", reason="worker lost; requeued")
                job.requeues += 1
                move(job, "running")
                # The message that reclaimed it is the live one.
                job.dispatch_seq = seq if seq is not None else job.dispatch_seq
                job.failure_reason = job.failure_detail = None
                return "reclaimed"
            if job.held or paused(session, job.forge, job.repo):
                job.held = True
                return "held"
            if job.kind not in AGENT_KINDS:
                # Replies, commands and bookkeeping are short and must not wait behind agent
                # runs (a /ribbit stop stuck behind the job it stops would never run).
                move(job, "running")
                job.updated_at = utcnow()
                return "claimed"
            running = (Job.state == "running", Job.kind.in_(AGENT_KINDS))
            if count_jobs(session, *running) >= limits.max_concurrent:
                return "no_slot"
            in_repo = (Job.forge == job.forge, Job.repo == job.repo)
            if count_jobs(session, *running, *in_repo) >= limits.max_concurrent_per_repo:
                return "no_slot"
            move(job, "running")
            job.updated_at = utcnow()
            return "claimed"

    def heartbeat(self, job_id: str) -> str | None:
        """Refresh a running job's heartbeat; returns its state (None if gone)."""
        with self.db.session() as session:
            job = session.get(Job, job_id)
            if job is None:
                return None
            if job.state == "running":
                job.updated_at = utcnow()
            return job.state

    def _lock_admission(self, session: Session) -> None:
        result = session.execute(
            update(Control).where(Control.key == _ADMISSION_LOCK).values(updated_at=utcnow())
        )
        if result.rowcount == 0:  # type: ignore[attr-defined]
            try:
                with session.begin_nested():
                    session.add(Control(key=_ADMISSION_LOCK, value=""))
                    session.flush()
            except IntegrityError:
                pass
            session.execute(
                update(Control).where(Control.key == _ADMISSION_LOCK).values(updated_at=utcnow())
            )
