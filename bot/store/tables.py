"""Ribbit's tables. Changes go through an Alembic migration (bot/store/migrations)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
    false,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from bot.forges.base import RepoRef, forge_name
from bot.store.failure import FailureReason
from bot.store.payloads import JobPayload, decode_payload
from bot.store.records import SolveRecord


def utcnow() -> datetime:
    return datetime.now(UTC)


class Base(DeclarativeBase):
    type_annotation_map = {dict[str, Any]: JSON, datetime: DateTime(timezone=True)}


class Repository(Base):
    """A repository Ribbit has seen; holds per-repo switches and cached config."""

    __tablename__ = "repositories"
    __table_args__ = (UniqueConstraint("forge", "full_name"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    forge: Mapped[str] = mapped_column(String(16))
    full_name: Mapped[str] = mapped_column(String(255))
    paused: Mapped[bool] = mapped_column(Boolean, default=False)
    # The label .ribbit.yml asks for, cached by the worker when it reads the file, so intake
    # can honour a per-repo label without calling the forge.
    trigger_label: Mapped[str | None] = mapped_column(String(255), nullable=True)
    installation_id: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    # Whether a job has made sure the trigger label exists on the forge (claimed by one
    # job: worker/first_contact.py), so the forge is asked once per repository.
    label_ensured: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    # Whether the forge says the repository is private; None: not recorded, treated as
    # private (bot/model_lines.py: its outcomes train no shared model line).
    private: Mapped[bool | None] = mapped_column(Boolean, nullable=True)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class Delivery(Base):
    """One webhook delivery as received; the unique key makes redelivery a no-op."""

    __tablename__ = "deliveries"
    __table_args__ = (
        UniqueConstraint("forge", "delivery_id"),
        Index("ix_deliveries_body", "forge", "body_sha256", unique=True),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    forge: Mapped[str] = mapped_column(String(16))
    delivery_id: Mapped[str] = mapped_column(String(128))
    event: Mapped[str] = mapped_column(String(64))
    key: Mapped[str | None] = mapped_column(String(128), nullable=True)
    outcome: Mapped[str] = mapped_column(String(32))  # accepted | ignored | refused | duplicate
    reason: Mapped[str | None] = mapped_column(Text, nullable=True)
    job_id: Mapped[str | None] = mapped_column(String(32), nullable=True)
    # SHA-256 of the signed body: a body replayed under a new delivery id is a duplicate.
    body_sha256: Mapped[str | None] = mapped_column(String(64), nullable=True)
    received_at: Mapped[datetime] = mapped_column(default=utcnow, index=True)


class Job(Base):
    """A unit of work for the worker, with its state machine (see bot/store/jobs/states.py)."""

    __tablename__ = "jobs"
    __table_args__ = (
        # Set while a solve/revise job is queued or running, NULL after: the unique
        # constraint is what makes "one agent job per issue" hold under concurrent deliveries.
        UniqueConstraint("active_key"),
        Index("ix_jobs_issue", "forge", "repo", "issue_number", "state"),
        Index("ix_jobs_state_created", "state", "created_at"),
        Index("ix_jobs_pr", "forge", "repo", "pr_number"),
        # The daily per-repo budget, counted by every webhook that may create a job.
        Index("ix_jobs_repo_created", "forge", "repo", "created_at"),
    )

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    kind: Mapped[str] = mapped_column(String(16))  # a kind of bot/store/kinds.py
    state: Mapped[str] = mapped_column(String(16), default="queued")
    forge: Mapped[str] = mapped_column(String(16))
    repo: Mapped[str] = mapped_column(String(255))
    issue_number: Mapped[int | None] = mapped_column(Integer, nullable=True)
    # The issue's title as the webhook that admitted the job gave it, so the job's pages
    # can name the issue even when the job fails before the worker reads it (set-up,
    # clone, a refusal). NULL for jobs admitted before it was kept, and for jobs with no
    # issue event behind them.
    issue_title: Mapped[str | None] = mapped_column(Text, nullable=True)
    pr_number: Mapped[int | None] = mapped_column(Integer, nullable=True)
    actor: Mapped[str | None] = mapped_column(String(255), nullable=True)
    delivery_id: Mapped[str | None] = mapped_column(String(128), nullable=True)
    installation_id: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    instructions: Mapped[str | None] = mapped_column(Text, nullable=True)
    # held: accepted while paused; dispatched: handed to the broker. A job that is queued,
    # not held and not dispatched is re-sent by dispatch_pending (broker was down).
    active_key: Mapped[str | None] = mapped_column(String(300), nullable=True)
    held: Mapped[bool] = mapped_column(Boolean, default=False)
    dispatched: Mapped[bool] = mapped_column(Boolean, default=False)
    # The sweep alone re-sends a queued job (after a deferral, a lost worker, a dead broker),
    # never before not_before. Each send carries the next dispatch_seq; a message whose seq
    # is not the job's current one is stale (an earlier send, a broker redelivery) and runs
    # nothing, so one job is never several task chains.
    dispatch_seq: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    not_before: Mapped[datetime | None] = mapped_column(nullable=True)
    # Times the sweep found the job's worker dead; capped (a job that kills its worker).
    requeues: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    stage: Mapped[str | None] = mapped_column(String(32), nullable=True)
    failure_reason: Mapped[str | None] = mapped_column(Text, nullable=True)
    # The structured reason behind failure_reason (bot/store/failure.py), when the job's
    # pipeline knew one: what failed, its output's tail, who can fix it.
    failure_detail: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    superseded_by: Mapped[str | None] = mapped_column(String(32), nullable=True)
    parent_id: Mapped[str | None] = mapped_column(String(32), ForeignKey("jobs.id"), nullable=True)
    # GitHub comment ids passed 2**31 long ago.
    status_comment_id: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    branch: Mapped[str | None] = mapped_column(String(255), nullable=True)
    pr_url: Mapped[str | None] = mapped_column(String(512), nullable=True)
    result: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(default=utcnow, onupdate=utcnow)
    started_at: Mapped[datetime | None] = mapped_column(nullable=True)
    finished_at: Mapped[datetime | None] = mapped_column(nullable=True)

    @property
    def repo_ref(self) -> RepoRef:
        """The job's repository as the forges name it (the row keeps forge and repo in two
        columns for its indexes)."""
        return RepoRef(forge_name(self.forge), self.repo)

    @property
    def payload(self) -> JobPayload | None:
        """What this job carries for its kind (bot/store/payloads.py); raises
        PayloadError for a stored value its kind cannot hold."""
        return decode_payload(self.kind, self.instructions)

    @property
    def failure(self) -> FailureReason | None:
        """``failure_detail`` read as its record (None: the job stored none)."""
        return FailureReason.from_json(self.failure_detail)

    @property
    def solve_record(self) -> SolveRecord:
        """``result`` read as a solve/revise job's typed record (empty for other kinds)."""
        return SolveRecord.from_json(self.result)


class Outcome(Base):
    """What finally happened to a bot PR (or a human fix for an issue the bot failed on)."""

    __tablename__ = "outcomes"
    __table_args__ = (UniqueConstraint("forge", "repo", "pr_number"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    forge: Mapped[str] = mapped_column(String(16))
    repo: Mapped[str] = mapped_column(String(255))
    pr_number: Mapped[int] = mapped_column(Integer)
    issue_number: Mapped[int | None] = mapped_column(Integer, nullable=True)
    job_id: Mapped[str | None] = mapped_column(String(32), nullable=True)
    human_authored: Mapped[bool] = mapped_column(Boolean, default=False)
    state: Mapped[str] = mapped_column(String(16))  # merged | closed
    actor: Mapped[str | None] = mapped_column(String(255), nullable=True)
    decided_at: Mapped[datetime | None] = mapped_column(nullable=True)
    time_to_merge_s: Mapped[float | None] = mapped_column(Float, nullable=True)
    revisions: Mapped[int] = mapped_column(Integer, default=0)
    review_comments: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    bot_diff: Mapped[str | None] = mapped_column(Text, nullable=True)
    merged_diff: Mapped[str | None] = mapped_column(Text, nullable=True)
    diff_similarity: Mapped[float | None] = mapped_column(Float, nullable=True)
    recorded_at: Mapped[datetime] = mapped_column(default=utcnow)


class Control(Base):
    """Process-wide switches (the global kill switch) that every web and worker process reads."""

    __tablename__ = "controls"

    key: Mapped[str] = mapped_column(String(64), primary_key=True)
    value: Mapped[str] = mapped_column(Text)
    updated_at: Mapped[datetime] = mapped_column(default=utcnow, onupdate=utcnow)
