"""The outcome store: what finally happened to each bot PR, and the queries over it.

Outcomes are written by the worker's outcome job (and its reconciliation) and read by
the noise control, the CLI and the trainer; each reads and writes through a named
method here instead of composing its own query over the table.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Select, func, select
from sqlalchemy.orm import Session

from bot.store.db import Database
from bot.store.kinds import AGENT_KINDS
from bot.store.records.outcome import OutcomeRecord
from bot.store.tables import Job, Outcome


def outcome_dict(o: Outcome) -> dict[str, Any]:
    """An outcome as `ribbit outcomes --json` and `ribbit data export` write it."""
    return {
        "forge": o.forge,
        "repo": o.repo,
        "pr": o.pr_number,
        "issue": o.issue_number,
        "job_id": o.job_id,
        "human_authored": o.human_authored,
        "state": o.state,
        "actor": o.actor,
        "decided_at": o.decided_at.isoformat() if o.decided_at else None,
        "time_to_merge_s": o.time_to_merge_s,
        "revisions": o.revisions,
        "review_comments": o.review_comments,
        "diff_similarity": o.diff_similarity,
        "bot_diff": o.bot_diff,
        "merged_diff": o.merged_diff,
    }


@dataclass(frozen=True)
class PendingPullRequest:
    """A bot PR the store knows with no outcome recorded yet."""

    forge: str
    repo: str
    pr_number: int
    issue_number: int | None
    installation_id: int | None


@dataclass(frozen=True)
class MergeRate:
    merged: int
    closed: int

    @property
    def decided(self) -> int:
        return self.merged + self.closed

    @property
    def rate(self) -> float:
        return self.merged / self.decided if self.decided else 1.0


@dataclass(frozen=True)
class Decision:
    """When and how a bot PR was decided (the dashboard's weekly chart)."""

    state: str
    revisions: int
    decided_at: datetime | None
    recorded_at: datetime


class OutcomeStore:
    def __init__(self, db: Database) -> None:
        self.db = db

    def save(self, record: OutcomeRecord) -> None:
        """Insert or replace the outcome of ``record``'s PR (one row per PR)."""
        with self.db.session() as session:
            row = session.scalar(
                select(Outcome).where(
                    Outcome.forge == record.forge,
                    Outcome.repo == record.repo,
                    Outcome.pr_number == record.pr_number,
                )
            )
            if row is None:
                row = Outcome(forge=record.forge, repo=record.repo, pr_number=record.pr_number)
                session.add(row)
            for name, value in record.row_values().items():
                setattr(row, name, value)

    def outcomes(self, repo: str | None = None, forge: str | None = None) -> Sequence[Outcome]:
        """Every outcome (of ``repo`` on ``forge`` only, if given) in the order recorded
        (by id), detached. The one read of outcome rows: the outcomes CLI and the trainer
        (trainer/store.py) both come here."""
        q = select(Outcome).order_by(Outcome.id)
        if forge:
            q = q.where(Outcome.forge == forge)
        if repo:
            q = q.where(Outcome.repo == repo)
        return self._detached(q)

    def outcomes_by_id(self, ids: Collection[int]) -> Sequence[Outcome]:
        """The outcomes with these ids, by id, detached."""
        return self._detached(select(Outcome).where(Outcome.id.in_(ids)).order_by(Outcome.id))

    def repos(self) -> list[tuple[str, str]]:
        """(forge, repository) of every repository with an outcome, sorted."""
        with self.db.session() as session:
            rows = session.execute(select(Outcome.forge, Outcome.repo).distinct()).all()
        return sorted((f, r) for f, r in rows)

    def _detached(self, query: Select[Outcome]) -> list[Outcome]:
        with self.db.session() as session:
            rows = list(session.scalars(query))
            session.expunge_all()
            return rows

    def bot_decisions(self) -> list[Decision]:
        """Every outcome of a bot PR (not a human fix), in no particular order."""
        with self.db.session() as session:
            rows = session.execute(
                select(
                    Outcome.state, Outcome.revisions, Outcome.decided_at, Outcome.recorded_at
                ).where(Outcome.human_authored.is_(False))
            ).all()
        return [Decision(*r) for r in rows]

    def pull_requests_without_outcome(self) -> list[PendingPullRequest]:
        """Bot PRs (from solve and revise jobs) that have no outcome, in a stable order."""
        with self.db.session() as session:
            known = set(session.execute(select(Outcome.forge, Outcome.repo, Outcome.pr_number)))
            pending: dict[tuple[str, str, int], PendingPullRequest] = {}
            for job in session.scalars(
                select(Job).where(Job.pr_number.is_not(None), Job.kind.in_(AGENT_KINDS))
            ):
                assert job.pr_number is not None  # selected on that
                key = (job.forge, job.repo, job.pr_number)
                if key not in known:
                    pending[key] = PendingPullRequest(
                        job.forge, job.repo, job.pr_number, job.issue_number, job.installation_id
                    )
        return [pending[k] for k in sorted(pending)]

    @staticmethod
    def bot_merge_rate(session: Session, forge: str, repo: str, since: datetime) -> MergeRate:
        """The bot's pull requests (not human fixes) decided since ``since``, in the
        caller's transaction (the noise check pauses on it in the same one)."""
        rows = dict(
            session.execute(
                select(Outcome.state, func.count())
                .where(
                    Outcome.forge == forge,
                    Outcome.repo == repo,
                    Outcome.human_authored.is_(False),
                    Outcome.decided_at >= since,
                )
                .group_by(Outcome.state)
            ).all()
        )
        return MergeRate(merged=int(rows.get("merged", 0)), closed=int(rows.get("closed", 0)))
