"""What a webhook reads and writes of jobs in its one transaction: what intake decides a
new agent job on (one prebuilt statement), the daily budget's count, and the new job."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cache
from typing import Any

from sqlalchemy import Executable, String, and_, bindparam, func, literal, select
from sqlalchemy.orm import Session, configure_mappers, make_transient_to_detached

from bot.store.jobs.inserts import insert_or_skip
from bot.store.jobs.killswitch import GLOBAL_PAUSE
from bot.store.jobs.lookups import count_jobs
from bot.store.jobs.states import ACTIVE_STATES
from bot.store.kinds import AGENT_KINDS, JobKind
from bot.store.payloads import JobPayload, encode_payload
from bot.store.tables import Control, Job, Repository, utcnow


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
    issue_title: str | None = None  # as the admitting webhook gave it, for the job's pages


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
        select(Control.value).where(Control.key == GLOBAL_PAUSE).scalar_subquery(),
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


_INTAKE_VIEW = _intake_view_statement()


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


class JobIntake:
    """JobStore's intake (a mixin: every method takes the caller's session)."""

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
            issue_title=spec.issue_title,
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
        if not insert_or_skip(session, Job.__table__, row):  # type: ignore[arg-type]
            return None
        # The row as inserted, attached without reading it back: callers change it (cancel,
        # hold) in the same transaction as if the ORM had inserted it. Its values go in as
        # loaded ones, the way the ORM fills a row it read: Job(**row) recorded a change
        # event for each of the 30 columns, a sixth of the webhook's transaction.
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

    def started_today(self, session: Session, forge: str, repo: str) -> int:
        return count_jobs(
            session,
            Job.forge == forge,
            Job.repo == repo,
            Job.kind.in_(AGENT_KINDS),
            Job.created_at >= _start_of_day(utcnow()),
        )
