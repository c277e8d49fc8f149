"""What the dashboard's pages show, shaped from the stores' named queries. Each page costs a
fixed, small number of statements whatever the number of jobs (JobStore.listing: one for
the page of rows, one for the total)."""

from __future__ import annotations

import hashlib
import json
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from bot.store.db import Database
from bot.store.jobs import JobNotFound, JobQuery, JobStore, JobSummary
from bot.store.kinds import DASHBOARD_KINDS
from bot.store.outcomes import OutcomeStore
from bot.store.tables import Job
from bot.store.training import TableView, TrainingStore

PER_PAGE = 50
MAX_PAGE = 10_000  # OFFSET grows linearly; nobody pages this far by hand
JOB_STATES = ("queued", "running", "succeeded", "failed", "cancelled")
JOB_KINDS = DASHBOARD_KINDS
FORGES = ("github", "gitlab")


@dataclass(frozen=True)
class JobFilter:
    """What the jobs list is narrowed to; unknown values are dropped, not trusted."""

    state: str | None = None
    kind: str | None = None
    forge: str | None = None
    repo: str | None = None

    @classmethod
    def from_args(cls, args: Any) -> JobFilter:
        def pick(name: str, allowed: tuple[str, ...]) -> str | None:
            value = args.get(name) or None
            return value if value in allowed else None

        repo = (args.get("repo") or "").strip()[:255] or None
        return cls(
            state=pick("state", JOB_STATES),
            kind=pick("kind", JOB_KINDS),
            forge=pick("forge", FORGES),
            repo=repo,
        )

    def as_args(self) -> dict[str, str]:
        return {
            k: v
            for k, v in (
                ("state", self.state),
                ("kind", self.kind),
                ("forge", self.forge),
                ("repo", self.repo),
            )
            if v
        }


@dataclass(frozen=True)
class JobRow(JobSummary):
    """A job as the dashboard's list shows it: the store's summary, with its created time
    made timezone-aware and how long it ran (or has been running)."""

    duration_s: float | None = None


@dataclass(frozen=True)
class JobPage:
    rows: list[JobRow]
    total: int
    page: int
    per_page: int

    @property
    def pages(self) -> int:
        return max(1, -(-self.total // self.per_page))

    def version(self) -> str:
        """Changes whenever the rendered list would, except for a running job's growing
        duration: the page refetches its rows only then."""
        seen = [self.total, self.page] + [
            [r.id, r.state, r.stage, r.failure_reason, r.pr_number, r.pr_url] for r in self.rows
        ]
        return hashlib.sha256(json.dumps(seen).encode()).hexdigest()[:16]


def _aware(value: datetime | None) -> datetime | None:
    # SQLite hands back naive datetimes even for timezone=True columns; they were stored UTC.
    if value is None:
        return None
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def _duration(job: Any, now: datetime) -> float | None:
    started = _aware(job.started_at)
    if started is None:
        return None
    end = _aware(job.finished_at) or now
    return max(0.0, (end - started).total_seconds())


def list_jobs(db: Database, flt: JobFilter, page: int = 1, per_page: int = PER_PAGE) -> JobPage:
    page = min(max(page, 1), MAX_PAGE)
    now = datetime.now(UTC)
    found = JobStore(db).listing(
        JobQuery(state=flt.state, kind=flt.kind, forge=flt.forge, repo=flt.repo),
        limit=per_page,
        offset=(page - 1) * per_page,
    )
    return JobPage(
        rows=[
            JobRow(
                **{**asdict(r), "created_at": _aware(r.created_at)},
                duration_s=_duration(r, now),
            )
            for r in found.rows
        ],
        total=found.total,
        page=page,
        per_page=per_page,
    )


def get_job(db: Database, job_id: str) -> Job | None:
    try:
        return JobStore(db).get(job_id)
    except JobNotFound:
        return None


# -- outcomes -------------------------------------------------------------------------------


@dataclass
class OutcomeSeries:
    """Per-week counts of decided bot PRs and the rates the chart draws."""

    weeks: list[str] = field(default_factory=list)
    merged: list[int] = field(default_factory=list)
    closed: list[int] = field(default_factory=list)
    revised: list[int] = field(default_factory=list)

    @property
    def total(self) -> int:
        return sum(self.merged) + sum(self.closed)

    def rates(self) -> dict[str, list[float]]:
        out: dict[str, list[float]] = {"merged": [], "closed": [], "revised": []}
        for m, c, r in zip(self.merged, self.closed, self.revised, strict=True):
            n = m + c
            out["merged"].append(round(m / n, 4) if n else 0.0)
            out["closed"].append(round(c / n, 4) if n else 0.0)
            out["revised"].append(round(r / n, 4) if n else 0.0)
        return out

    def chart_data(self) -> dict[str, Any]:
        return {
            "weeks": self.weeks,
            "counts": {"merged": self.merged, "closed": self.closed, "revised": self.revised},
            "rates": self.rates(),
        }


def _week_start(moment: datetime) -> str:
    day = moment.astimezone(UTC).date()
    return (day - timedelta(days=day.weekday())).isoformat()


def outcome_series(db: Database) -> OutcomeSeries:
    """Bot-authored outcomes by ISO week of decision (recorded_at when undecided)."""
    buckets: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
    for decision in OutcomeStore(db).bot_decisions():
        state, revisions = decision.state, decision.revisions
        moment = _aware(decision.decided_at) or _aware(decision.recorded_at)
        if moment is None:
            continue
        bucket = buckets[_week_start(moment)]
        if state == "merged":
            bucket[0] += 1
        elif state == "closed":
            bucket[1] += 1
        if revisions:
            bucket[2] += 1
    series = OutcomeSeries()
    for week in sorted(buckets):
        merged, closed, revised = buckets[week]
        series.weeks.append(week)
        series.merged.append(merged)
        series.closed.append(closed)
        series.revised.append(revised)
    return series


# -- trainer tables (they exist only once the trainer has migrated its schema) ---------------

TRAINER_TABLES = {
    "environments": "training_environments",
    "training-runs": "training_runs",
    "model-versions": "model_versions",
}
TRAINER_ROW_LIMIT = 200


def trainer_table(db: Database, table: str) -> TableView:
    """Newest rows of a trainer table, or an empty view where the table does not exist."""
    return TrainingStore(db).table_view(table, TRAINER_ROW_LIMIT)


def environment_row(db: Database, instance_id: str) -> list[tuple[str, Any]] | None:
    """One environment's row of the trainer's index, as (column, value) pairs; None where
    the table or the row is missing."""
    return TrainingStore(db).environment_row(instance_id)


def reward_curves(db: Database, limit: int = 10) -> list[dict[str, Any]]:
    """The newest training runs' per-step mean rewards, for the reward-curve chart."""
    return [
        {"run": f"run {c.run_id}", "rewards": c.rewards}
        for c in TrainingStore(db).reward_curves(limit)
    ]
