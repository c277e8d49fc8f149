"""The typed records the job reports (bot.store.jobs.reports) are asked and answer: a
listing's filter and page, the dashboard's counts, per-repository tallies."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime


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
