"""Finding jobs: by id or id prefix, an issue's active agent job, a pull request's jobs,
and what earlier jobs on an issue left behind (its record, its status comment)."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import ColumnElement, and_, func, or_, select
from sqlalchemy.orm import Session

from bot.store.db import Database
from bot.store.jobs.states import ACTIVE_STATES, JobNotFound
from bot.store.kinds import AGENT_KINDS
from bot.store.records import SolveRecord
from bot.store.tables import Job


def count_jobs(session: Session, *where: ColumnElement[bool]) -> int:
    """How many jobs match every condition in ``where``."""
    return int(session.scalar(select(func.count()).select_from(Job).where(*where)) or 0)


class JobLookups:
    """JobStore's lookups (a mixin over JobStore's database)."""

    db: Database

    def get_in(self, session: Session, job_id: str) -> Job | None:
        """The job, attached to the caller's transaction (to change it there)."""
        return session.get(Job, job_id)

    def get(self, job_id: str) -> Job:
        with self.db.session() as session:
            job = session.get(Job, job_id)
            if job is None:
                raise JobNotFound(job_id)
            session.expunge(job)
            return job

    def find(self, job_id_prefix: str) -> Job:
        """A job by id or unique id prefix (for the CLI)."""
        with self.db.session() as session:
            rows = session.scalars(
                select(Job).where(Job.id.startswith(job_id_prefix)).limit(2)
            ).all()
            if len(rows) != 1:
                raise JobNotFound(job_id_prefix)
            session.expunge(rows[0])
            return rows[0]

    def active_for_issue(self, session: Session, forge: str, repo: str, issue: int) -> Job | None:
        return session.scalar(
            select(Job).where(
                Job.forge == forge,
                Job.repo == repo,
                Job.issue_number == issue,
                Job.kind.in_(AGENT_KINDS),
                Job.state.in_(ACTIVE_STATES),
            )
        )

    def latest_on_pull_request(
        self, session: Session, forge: str, repo: str, pr_number: int
    ) -> Job | None:
        """The newest job of any kind recorded against a PR (None: not a bot PR)."""
        return session.scalar(
            select(Job)
            .where(Job.forge == forge, Job.repo == repo, Job.pr_number == pr_number)
            .order_by(Job.created_at.desc())
            .limit(1)
        )

    def issue_of_pull_request(
        self, session: Session, forge: str, repo: str, pr_number: int
    ) -> int | None:
        """The issue a bot PR works on, from the newest of its jobs that names one."""
        return session.scalar(
            select(Job.issue_number)
            .where(
                Job.forge == forge,
                Job.repo == repo,
                Job.pr_number == pr_number,
                Job.issue_number.is_not(None),
            )
            .order_by(Job.created_at.desc())
            .limit(1)
        )

    def agent_worked_on(self, session: Session, forge: str, repo: str, issue: int) -> bool:
        """Whether a solve or revise job was ever created for the issue."""
        found = session.scalar(
            select(Job.id)
            .where(
                Job.forge == forge,
                Job.repo == repo,
                Job.issue_number == issue,
                Job.kind.in_(AGENT_KINDS),
            )
            .limit(1)
        )
        return found is not None

    def agent_jobs_on_pull_request(self, forge: str, repo: str, pr_number: int) -> Sequence[Job]:
        """The succeeded solve and revise jobs behind a PR, in the order they finished."""
        with self.db.session() as session:
            jobs = list(
                session.scalars(
                    select(Job)
                    .where(
                        Job.forge == forge,
                        Job.repo == repo,
                        Job.pr_number == pr_number,
                        Job.kind.in_(AGENT_KINDS),
                        Job.state == "succeeded",
                    )
                    .order_by(Job.finished_at)
                )
            )
            session.expunge_all()
            return jobs

    def revisions_done(self, forge: str, repo: str, pr_number: int) -> int:
        """Revisions that succeeded on a PR (the limit in .ribbit.yml counts these)."""
        with self.db.session() as session:
            return count_jobs(
                session,
                Job.forge == forge,
                Job.repo == repo,
                Job.pr_number == pr_number,
                Job.kind == "revise",
                Job.state == "succeeded",
            )

    def last_agent_record(self, forge: str, repo: str, issue_number: int) -> SolveRecord | None:
        """The record of the issue's latest solve or revise job that stored one."""
        with self.db.session() as session:
            job = session.scalar(
                select(Job)
                .where(
                    Job.forge == forge,
                    Job.repo == repo,
                    Job.issue_number == issue_number,
                    Job.kind.in_(AGENT_KINDS),
                    Job.result.is_not(None),
                )
                .order_by(Job.created_at.desc())
                .limit(1)
            )
            return job.solve_record if job is not None else None

    def issue_status_comment(self, forge: str, repo: str, issue_number: int) -> int | None:
        """The status comment an earlier job on the issue posted (one per issue)."""
        with self.db.session() as session:
            return session.scalar(
                select(Job.status_comment_id)
                .where(
                    Job.forge == forge,
                    Job.repo == repo,
                    Job.issue_number == issue_number,
                    Job.status_comment_id.is_not(None),
                )
                .order_by(Job.created_at.desc())
                .limit(1)
            )

    def command_told_elsewhere(self, job: Job, *, refused_reason: str) -> bool:
        """Whether another command job of ``job``'s actor on its issue answers them instead:
        one refused for ``refused_reason`` (it told them), or an earlier one still queued or
        running (it will). Ties on creation time go to the smaller id, so of several
        commands sent at once exactly one is "first"."""
        earlier = or_(
            Job.created_at < job.created_at,
            and_(Job.created_at == job.created_at, Job.id < job.id),
        )
        refused = and_(
            Job.state == "failed", Job.failure_reason.like(f"refused: %{refused_reason}")
        )
        with self.db.session() as session:
            other = session.scalar(
                select(Job.id)
                .where(
                    Job.forge == job.forge,
                    Job.repo == job.repo,
                    Job.issue_number == job.issue_number,
                    Job.actor == job.actor,
                    Job.kind == "command",
                    Job.id != job.id,
                    or_(refused, and_(earlier, Job.state.in_(("queued", "running")))),
                )
                .limit(1)
            )
        return other is not None
