"""Reports over the jobs, for the CLI, the dashboard and the metrics: listings, counts
and per-repository tallies, each in a fixed number of statements."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import case, func, select

from bot.store.db import Database
from bot.store.jobs.lookups import count_jobs
from bot.store.jobs.report_records import (
    ActiveCounts,
    JobListing,
    JobQuery,
    JobSummary,
    RepoCount,
    RepoEndings,
)
from bot.store.jobs.states import ACTIVE_STATES
from bot.store.kinds import AGENT_KINDS
from bot.store.tables import Job

# JobReports.list shadows the builtin inside the class, so annotations there use these.
JobList = list[Job]
RepoCountList = list[RepoCount]
RepoEndingsList = list[RepoEndings]

_SUMMARY_COLUMNS = (
    Job.id,
    Job.kind,
    Job.state,
    Job.forge,
    Job.repo,
    Job.issue_number,
    Job.pr_number,
    Job.pr_url,
    Job.stage,
    Job.failure_reason,
    Job.created_at,
    Job.started_at,
    Job.finished_at,
)


class JobReports:
    """JobStore's reports (a mixin over JobStore's database)."""

    db: Database

    def list(
        self,
        *,
        state: str | None = None,
        forge: str | None = None,
        repo: str | None = None,
        limit: int = 50,
        offset: int = 0,
    ) -> JobList:
        with self.db.session() as session:
            q = select(Job).order_by(Job.created_at.desc(), Job.id)
            if state:
                q = q.where(Job.state == state)
            if forge:
                q = q.where(Job.forge == forge)
            if repo:
                q = q.where(Job.repo == repo)
            rows: JobList = [*session.scalars(q.limit(limit).offset(offset)).all()]
            session.expunge_all()
            return rows

    def count_by_state(self) -> dict[str, int]:
        with self.db.session() as session:
            rows = session.execute(select(Job.state, func.count()).group_by(Job.state)).all()
            return {state: int(n) for state, n in rows}

    def listing(self, query: JobQuery, *, limit: int, offset: int) -> JobListing:
        """One page of the jobs ``query`` matches, newest first, and how many match: two
        statements whatever the number of jobs."""
        conditions = [
            column == value
            for column, value in (
                (Job.state, query.state),
                (Job.kind, query.kind),
                (Job.forge, query.forge),
                (Job.repo, query.repo),
            )
            if value
        ]
        with self.db.session() as session:
            rows = session.execute(
                select(*_SUMMARY_COLUMNS)
                .where(*conditions)
                .order_by(Job.created_at.desc(), Job.id.desc())
                .limit(limit)
                .offset(offset)
            ).all()
            total = count_jobs(session, *conditions)
        return JobListing([JobSummary(**r._asdict()) for r in rows], total)

    def active_counts(self) -> ActiveCounts:
        with self.db.session() as session:
            rows = session.execute(
                select(Job.state, Job.held, func.count())
                .where(Job.state.in_(ACTIVE_STATES))
                .group_by(Job.state, Job.held)
            ).all()
        return ActiveCounts(
            queued=sum(int(n) for s, h, n in rows if s == "queued" and not h),
            held=sum(int(n) for s, h, n in rows if s == "queued" and h),
            running=sum(int(n) for s, _h, n in rows if s == "running"),
        )

    def failed_by_repo(self, since: datetime) -> RepoCountList:
        """Jobs of any kind that failed since ``since``, per repository, by repository."""
        with self.db.session() as session:
            rows = session.execute(
                select(Job.forge, Job.repo, func.count())
                .where(Job.state == "failed", Job.finished_at >= since)
                .group_by(Job.forge, Job.repo)
            ).all()
        return [RepoCount(f, r, int(n)) for f, r, n in sorted(rows)]

    def agent_jobs_by_repo(self, since: datetime) -> RepoCountList:
        """Solve and revise jobs created since ``since`` (the daily budget's count), per
        repository, by repository."""
        with self.db.session() as session:
            rows = session.execute(
                select(Job.forge, Job.repo, func.count())
                .where(Job.kind.in_(AGENT_KINDS), Job.created_at >= since)
                .group_by(Job.forge, Job.repo)
            ).all()
        return [RepoCount(f, r, int(n)) for f, r, n in sorted(rows)]

    def agent_endings_by_repo(self, since: datetime) -> RepoEndingsList:
        """Per repository, the solve and revise jobs that finished since ``since`` as
        succeeded or failed, and how many of them failed."""
        failed = func.sum(case((Job.state == "failed", 1), else_=0))
        with self.db.session() as session:
            rows = session.execute(
                select(Job.forge, Job.repo, func.count(), failed)
                .where(
                    Job.kind.in_(AGENT_KINDS),
                    Job.state.in_(("succeeded", "failed")),
                    Job.finished_at >= since,
                )
                .group_by(Job.forge, Job.repo)
            ).all()
        return [RepoEndings(f, r, int(n), int(k or 0)) for f, r, n, k in sorted(rows)]

    def queue_position(self, job_id: str) -> int:
        """1-based position among queued jobs (oldest first); 0 if not queued."""
        with self.db.session() as session:
            job = session.get(Job, job_id)
            if job is None or job.state != "queued":
                return 0
            ahead = count_jobs(
                session, Job.state == "queued", Job.held.is_(False), Job.created_at < job.created_at
            )
            return ahead + 1
