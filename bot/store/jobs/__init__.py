"""Job records and their state machine, deliveries, and the kill switch.

    queued ──> running ──> succeeded
      │  ^        │   └──> failed
      │  └────────┘ (requeued: forge rate limit, worker lost)
      └──> cancelled / failed           running ──> cancelled

Every change of state goes through :meth:`JobStore.transition`, which refuses
moves the diagram does not have, so a job can never show a wrong state (an
error for a run that succeeded, say).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import cache
from typing import Any, Literal

from sqlalchemy import (
    Executable,
    String,
    Table,
    and_,
    bindparam,
    case,
    func,
    literal,
    or_,
    select,
    update,
)
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, configure_mappers, make_transient_to_detached

from bot.store.db import Database
from bot.store.kinds import AGENT_KINDS, JobKind
from bot.store.payloads import JobPayload, encode_payload
from bot.store.records import SolveRecord
from bot.store.tables import Control, Delivery, Job, Repository, utcnow

JobState = Literal["queued", "running", "succeeded", "failed", "cancelled"]
ACTIVE_STATES: tuple[JobState, ...] = ("queued", "running")
TERMINAL_STATES: tuple[JobState, ...] = ("succeeded", "failed", "cancelled")

TRANSITIONS: dict[str, frozenset[str]] = {
    "queued": frozenset({"running", "cancelled", "failed"}),
    "running": frozenset({"succeeded", "failed", "cancelled", "queued"}),
    "succeeded": frozenset(),
    "failed": frozenset(),
    "cancelled": frozenset(),
}

_ADMISSION_LOCK = "admission-lock"
_GLOBAL_PAUSE = "paused"


# JobStore.list shadows the builtin inside the class, so annotations there use these.
JobList = list[Job]
StrList = list[str]


class InvalidTransition(RuntimeError):
    pass


class JobNotFound(LookupError):
    pass


class DuplicateDelivery(Exception):
    """A delivery id or signed body the forge sent before."""


@dataclass(frozen=True)
class JobSpec:
    """What intake asks for; the store turns it into a Job row."""

    kind: JobKind
    forge: str
    repo: str
    issue_number: int | None = None
    pr_number: int | None = None
    actor: str | None = None
    delivery_id: str | None = None
    installation_id: int | None = None
    payload: JobPayload | None = None
    parent_id: str | None = None


@dataclass(frozen=True)
class Limits:
    max_concurrent: int
    max_concurrent_per_repo: int


@dataclass(frozen=True)
class IntakeView:
    """What intake decides a new agent job on, for one issue, read in one statement."""

    paused: bool  # the whole bot, or this repository
    trigger_label: str | None  # the label .ribbit.yml asks for, as cached by the worker
    agent_jobs_today: int  # solve/revise jobs created for the repository since 00:00 UTC
    active_job_id: str | None  # the issue's queued or running solve/revise job
    private: bool | None = None  # the repository's recorded visibility (None: not recorded)


def _intake_view_statement() -> Executable:
    # Built once: a webhook runs it as is, with no statement to build or cache key to make.
    forge, repo = bindparam("forge", type_=String), bindparam("repo", type_=String)
    in_repo = and_(Repository.forge == forge, Repository.full_name == repo)
    # IN lists of fixed literals, not one list parameter: SQLAlchemy re-renders the SQL of
    # an "expanding" parameter at every execution.
    kinds = [literal(kind) for kind in AGENT_KINDS]
    jobs_in_repo = and_(Job.forge == forge, Job.repo == repo, Job.kind.in_(kinds))
    return select(
        select(Control.value).where(Control.key == _GLOBAL_PAUSE).scalar_subquery(),
        select(Repository.paused).where(in_repo).scalar_subquery(),
        select(Repository.trigger_label).where(in_repo).scalar_subquery(),
        select(func.count())
        .select_from(Job)
        .where(jobs_in_repo, Job.created_at >= bindparam("day"))
        .scalar_subquery(),
        select(Job.id)
        .where(
            jobs_in_repo,
            Job.issue_number == bindparam("issue"),
            Job.state.in_([literal(state) for state in ACTIVE_STATES]),
        )
        .limit(1)
        .scalar_subquery(),
        select(Repository.private).where(in_repo).scalar_subquery(),
    )


@cache
def _insert_or_skip(dialect: str, table: Table) -> Executable:
    """INSERT that skips a row breaking a unique key instead of failing, and returns the
    key of a row it did insert (rowcount cannot tell: drivers report -1 or 1 for a skipped
    row): no savepoint around it and no error that aborts a PostgreSQL transaction."""
    key = table.primary_key.columns
    if dialect == "sqlite":
        return sqlite.insert(table).on_conflict_do_nothing().returning(*key)
    if dialect == "postgresql":
        return postgresql.insert(table).on_conflict_do_nothing().returning(*key)
    raise NotImplementedError(f"no insert-or-skip for {dialect}")


@dataclass(frozen=True)
class JobQuery:
    """What a listing of jobs is narrowed to (None: any)."""

    state: str | None = None
    kind: str | None = None
    forge: str | None = None
    repo: str | None = None


@dataclass(frozen=True)
class JobSummary:
    """A job as a list shows it: everything but its record (the big JSON stays on disk)."""

    id: str
    kind: str
    state: str
    forge: str
    repo: str
    issue_number: int | None
    pr_number: int | None
    pr_url: str | None
    stage: str | None
    failure_reason: str | None
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None


@dataclass(frozen=True)
class JobListing:
    rows: list[JobSummary]
    total: int  # matching jobs on every page


@dataclass(frozen=True)
class ActiveCounts:
    queued: int  # waiting to run (not held)
    held: int  # accepted while paused
    running: int


@dataclass(frozen=True)
class RepoCount:
    forge: str
    repo: str
    jobs: int


@dataclass(frozen=True)
class RepoEndings:
    """A repository's agent jobs that ended (succeeded or failed) in some window."""

    forge: str
    repo: str
    ended: int
    failed: int


# JobStore.list shadows the builtin in the class body (as JobList above).
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


ClaimOutcome = Literal[
    "claimed", "reclaimed", "no_slot", "finished", "running_elsewhere", "held", "stale"
]


_INTAKE_VIEW = _intake_view_statement()
_MARK_DISPATCHED = (
    update(Job.__table__)  # type: ignore[arg-type]
    .where(
        Job.__table__.c.id == bindparam("job_id"),
        Job.__table__.c.dispatch_seq == bindparam("seq"),
    )
    .values(dispatched=True)
)


@cache
def _job_manager() -> Any:
    # Mappers are configured on first use (Job(...) does it itself); the manager's
    # attributes have no implementation before.
    configure_mappers()
    return Job.__mapper__.class_manager


def new_job_id() -> str:
    return uuid.uuid4().hex


def active_key_for(spec: JobSpec) -> str | None:
    if spec.kind in AGENT_KINDS and spec.issue_number is not None:
        return f"{spec.forge}:{spec.repo}#{spec.issue_number}"
    return None


def _start_of_day(now: datetime) -> datetime:
    return now.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)


class JobStore:
    def __init__(self, db: Database) -> None:
        self.db = db

    # -- deliveries -------------------------------------------------------------------------

    def record_delivery(
        self,
        session: Session,
        *,
        forge: str,
        delivery_id: str,
        event: str,
        key: str | None,
        outcome: str,
        reason: str | None = None,
        job_id: str | None = None,
        body_sha256: str | None = None,
    ) -> None:
        """Insert the delivery, or raise DuplicateDelivery if this forge already delivered
        that id, or the same signed body under another id (a replay). The caller rolls its
        transaction back then: nothing decided for a duplicate may be kept."""
        inserted = self._insert_or_skip(
            session,
            Delivery.__table__,  # type: ignore[arg-type]
            dict(
                forge=forge,
                delivery_id=delivery_id,
                event=event,
                key=key,
                outcome=outcome,
                reason=reason,
                job_id=job_id,
                body_sha256=body_sha256,
                received_at=utcnow(),
            ),
        )
        if not inserted:
            raise DuplicateDelivery(f"{forge} delivery {delivery_id}")

    def _insert_or_skip(self, session: Session, table: Table, row: dict[str, Any]) -> bool:
        # Pending ORM changes first: a job cancelled earlier in this transaction frees its
        # issue's active_key before a new job may take it.
        session.flush()
        conn = session.connection()
        return conn.execute(_insert_or_skip(conn.dialect.name, table), row).first() is not None

    def delivery_seen(self, session: Session, forge: str, delivery_id: str) -> bool:
        return (
            session.scalar(
                select(func.count())
                .select_from(Delivery)
                .where(Delivery.forge == forge, Delivery.delivery_id == delivery_id)
            )
            or 0
        ) > 0

    # -- jobs ---------------------------------------------------------------------------------

    def create(self, session: Session, spec: JobSpec, *, held: bool = False) -> Job | None:
        """Create a queued job, or return None if an agent job is already active for the
        issue (the unique active_key makes this hold under concurrent deliveries)."""
        now = utcnow()
        row: dict[str, Any] = dict(
            id=new_job_id(),
            kind=spec.kind,
            state="queued",
            forge=spec.forge,
            repo=spec.repo,
            issue_number=spec.issue_number,
            pr_number=spec.pr_number,
            actor=spec.actor,
            delivery_id=spec.delivery_id,
            installation_id=spec.installation_id,
            instructions=encode_payload(spec.kind, spec.payload),
            active_key=active_key_for(spec),
            held=held,
            dispatched=False,
            dispatch_seq=1,
            not_before=None,
            requeues=0,
            attempts=0,
            stage=None,
            failure_reason=None,
            superseded_by=None,
            parent_id=spec.parent_id,
            status_comment_id=None,
            branch=None,
            pr_url=None,
            result=None,
            created_at=now,
            updated_at=now,
            started_at=None,
            finished_at=None,
        )
        if not self._insert_or_skip(session, Job.__table__, row):  # type: ignore[arg-type]
            return None
        # The row as inserted, attached without reading it back: callers change it (cancel,
        # hold) in the same transaction as if the ORM had inserted it. Its values go in as
        # loaded ones, the way the ORM fills a row it read: Job(**row) recorded a change
        # event for each of the 29 columns, a sixth of the webhook's transaction.
        job = _job_manager().new_instance()
        job.__dict__.update(row)
        make_transient_to_detached(job)
        session.add(job)
        return job

    def intake_view(
        self, session: Session, forge: str, repo: str, issue_number: int | None
    ) -> IntakeView:
        row = (
            session.connection()
            .execute(
                _INTAKE_VIEW,
                dict(
                    forge=forge,
                    repo=repo,
                    issue=issue_number,
                    day=_start_of_day(utcnow()),
                ),
            )
            .one()
        )
        global_paused, repo_paused, label, today, active, private = row
        return IntakeView(
            paused=global_paused == "1" or bool(repo_paused),
            trigger_label=label,
            agent_jobs_today=int(today or 0),
            active_job_id=active,
            private=private,
        )

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

    def get_in(self, session: Session, job_id: str) -> Job | None:
        """The job, attached to the caller's transaction (to change it there)."""
        return session.get(Job, job_id)

    def cancel(self, session: Session, job: Job, reason: str) -> None:
        """Cancel a queued or running job; a running job's worker notices and stops."""
        self._move(job, "cancelled", reason=reason)
        session.flush()

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

    def list(
        self,
        *,
        state: str | None = None,
        repo: str | None = None,
        limit: int = 50,
        offset: int = 0,
    ) -> JobList:
        with self.db.session() as session:
            q = select(Job).order_by(Job.created_at.desc(), Job.id)
            if state:
                q = q.where(Job.state == state)
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
            total = session.scalar(select(func.count()).select_from(Job).where(*conditions))
        return JobListing([JobSummary(**r._asdict()) for r in rows], int(total or 0))

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
            ahead = session.scalar(
                select(func.count())
                .select_from(Job)
                .where(Job.state == "queued", Job.held.is_(False), Job.created_at < job.created_at)
            )
            return int(ahead or 0) + 1

    def _move(self, job: Job, to: JobState, *, reason: str | None = None) -> None:
        if to not in TRANSITIONS[job.state]:
            raise InvalidTransition(f"job {job.id}: {job.state} -> {to} is not allowed")
        now = utcnow()
        job.state = to
        if to == "running":
            job.started_at = now
            job.attempts += 1
        if to in TERMINAL_STATES:
            job.finished_at = now
            job.active_key = None
        if to == "queued":
            # Back to the sweep: whatever message brought it here is spent.
            job.dispatched = False
            job.dispatch_seq += 1
            job.not_before = None
        if reason is not None:
            job.failure_reason = reason

    def transition(
        self,
        job_id: str,
        to: JobState,
        *,
        reason: str | None = None,
        **fields: Any,
    ) -> Job:
        """Move a job to ``to`` (and set extra columns in the same transaction)."""
        with self.db.session() as session:
            job = session.get(Job, job_id)
            if job is None:
                raise JobNotFound(job_id)
            self._move(job, to, reason=reason)
            for name, value in fields.items():
                setattr(job, name, value)
            session.flush()
            session.expunge(job)
            return job

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
            return int(
                session.scalar(
                    select(func.count())
                    .select_from(Job)
                    .where(
                        Job.forge == forge,
                        Job.repo == repo,
                        Job.pr_number == pr_number,
                        Job.kind == "revise",
                        Job.state == "succeeded",
                    )
                )
                or 0
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

    def record_solve(self, job_id: str, record: SolveRecord, **columns: Any) -> None:
        """Store a solve/revise job's record as it stands (and other columns with it)."""
        self.update(job_id, result=record.to_json(), **columns)

    def update(self, job_id: str, **fields: Any) -> None:
        """Set non-state columns (stage, branch, pr_url, result, status_comment_id, ...)."""
        if "state" in fields:
            raise ValueError("use transition() to change a job's state")
        with self.db.session() as session:
            session.execute(
                update(Job).where(Job.id == job_id).values(**fields, updated_at=utcnow())
            )

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
                self._move(job, "queued", reason="worker lost; requeued")
                job.requeues += 1
                self._move(job, "running")
                # The message that reclaimed it is the live one.
                job.dispatch_seq = seq if seq is not None else job.dispatch_seq
                job.failure_reason = None
                return "reclaimed"
            if job.held or self._paused(session, job.forge, job.repo):
                job.held = True
                return "held"
            if job.kind not in AGENT_KINDS:
                # Replies, commands and bookkeeping are short and must not wait behind agent
                # runs (a /ribbit stop stuck behind the job it stops would never run).
                self._move(job, "running")
                job.updated_at = utcnow()
                return "claimed"
            running = (
                select(func.count())
                .select_from(Job)
                .where(Job.state == "running", Job.kind.in_(AGENT_KINDS))
            )
            if (session.scalar(running) or 0) >= limits.max_concurrent:
                return "no_slot"
            in_repo = running.where(Job.forge == job.forge, Job.repo == job.repo)
            if (session.scalar(in_repo) or 0) >= limits.max_concurrent_per_repo:
                return "no_slot"
            self._move(job, "running")
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

    def started_today(self, session: Session, forge: str, repo: str) -> int:
        return int(
            session.scalar(
                select(func.count())
                .select_from(Job)
                .where(
                    Job.forge == forge,
                    Job.repo == repo,
                    Job.kind.in_(AGENT_KINDS),
                    Job.created_at >= _start_of_day(utcnow()),
                )
            )
            or 0
        )

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
                self._move(job, "queued", reason=reason)
            else:
                job.dispatched = False
                job.dispatch_seq += 1
            job.not_before = until

    def take_pending_dispatch(self, *, now: datetime | None = None) -> JobList:
        """Queued jobs due to be sent (never sent, deferred past their time, released from
        a pause), oldest first, each with a fresh dispatch seq for its message."""
        now = now or utcnow()
        with self.db.session() as session:
            rows: JobList = [
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

    def stale_running(self, older_than: timedelta) -> JobList:
        cutoff = utcnow() - older_than
        with self.db.session() as session:
            rows: JobList = [
                *session.scalars(
                    select(Job).where(Job.state == "running", Job.updated_at < cutoff)
                ).all()
            ]
            session.expunge_all()
            return rows

    # -- kill switch --------------------------------------------------------------------------

    def pause(self, *, forge: str | None = None, repo: str | None = None) -> None:
        with self.db.session() as session:
            if repo is None:
                self._set_control(session, _GLOBAL_PAUSE, "1")
            else:
                self.repository(session, forge or "github", repo).paused = True

    def resume(self, *, forge: str | None = None, repo: str | None = None) -> StrList:
        """Lift a pause; returns the ids of held jobs that may now be dispatched."""
        with self.db.session() as session:
            if repo is None:
                self._set_control(session, _GLOBAL_PAUSE, "0")
            else:
                self.repository(session, forge or "github", repo).paused = False
            held = session.scalars(
                select(Job).where(Job.state == "queued", Job.held.is_(True))
            ).all()
            released = []
            for job in held:
                if not self._paused(session, job.forge, job.repo):
                    job.held = False
                    job.dispatched = False
                    released.append(job.id)
            return released

    def is_paused(self, session: Session, forge: str, repo: str) -> bool:
        return self._paused(session, forge, repo)

    def paused_scopes(self) -> StrList:
        with self.db.session() as session:
            scopes = ["*"] if self._global_paused(session) else []
            scopes += [
                f"{r.forge}:{r.full_name}"
                for r in session.scalars(
                    select(Repository).where(Repository.paused.is_(True))
                ).all()
            ]
            return scopes

    def _global_paused(self, session: Session) -> bool:
        ctl = session.get(Control, _GLOBAL_PAUSE)
        return ctl is not None and ctl.value == "1"

    def _paused(self, session: Session, forge: str, repo: str) -> bool:
        if self._global_paused(session):
            return True
        row = session.scalar(
            select(Repository).where(Repository.forge == forge, Repository.full_name == repo)
        )
        return bool(row and row.paused)

    def _set_control(self, session: Session, key: str, value: str) -> None:
        ctl = session.get(Control, key)
        if ctl is None:
            session.add(Control(key=key, value=value))
        else:
            ctl.value = value

    # -- repositories -------------------------------------------------------------------------

    def repository(self, session: Session, forge: str, full_name: str) -> Repository:
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
