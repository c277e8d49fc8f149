"""The verdict each of Ribbit's pull requests carries: its latest succeeded agent job's,
with the judge that made it (read by `ribbit prs rejudge`, worker/rejudge.py)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import cast

from sqlalchemy import select

from bot.forges.base import ForgeName, PullRequestRef, RepoRef
from bot.store.db import Database
from bot.store.kinds import AGENT_KINDS
from bot.store.records.gate_report import Verdict
from bot.store.tables import Job


@dataclass(frozen=True)
class PrVerdict:
    """A Ribbit PR as its latest succeeded agent job (a solve, or a revision) left it."""

    forge: ForgeName
    repo: str
    pr_number: int
    issue: int | None  # the issue its jobs name (None: none did)
    job_id: str
    installation_id: int | None
    verdict: Verdict | None  # None: no gate report stored
    judge: str | None  # the judge's version; None: judged before it was recorded
    head_sha: str | None  # the commit the job pushed (and its status is on)

    @property
    def ref(self) -> PullRequestRef:
        return PullRequestRef(RepoRef(self.forge, self.repo), self.pr_number)


def pr_verdicts(db: Database, repo: str | None = None, forge: str | None = None) -> list[PrVerdict]:
    """Every PR an agent job opened or revised (``repo`` on ``forge``'s only, if given),
    oldest first."""
    query = (
        select(Job)
        .where(Job.kind.in_(AGENT_KINDS), Job.state == "succeeded", Job.pr_number.is_not(None))
        .order_by(Job.finished_at, Job.created_at, Job.id)
    )
    if repo is not None:
        query = query.where(Job.repo == repo)
    if forge is not None:
        query = query.where(Job.forge == forge)
    latest: dict[tuple[str, str, int], PrVerdict] = {}
    with db.session() as session:
        jobs: Sequence[Job] = session.scalars(query).all()
        for job in jobs:  # a later job's verdict replaces an earlier one's
            key = (job.forge, job.repo, cast(int, job.pr_number))
            record = job.solve_record
            before = latest.get(key)
            latest[key] = PrVerdict(
                forge=cast(ForgeName, job.forge),
                repo=job.repo,
                pr_number=key[2],
                issue=before.issue if before and before.issue else job.issue_number,
                job_id=job.id,
                installation_id=job.installation_id,
                verdict=record.verdict,
                judge=record.judge,
                head_sha=record.head_sha,
            )
    return list(latest.values())
