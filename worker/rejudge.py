"""Re-judging Ribbit's open draft PRs that an older judge passed (``ribbit prs rejudge``).

A draft opened before the verdict had levels says "gates passed" and ``Fixes #N`` on the
old judge's word, which took "no test failed" for evidence: merging it may close a bug
no test shows fixed. Each open draft whose job's verdict was not made by today's judge
(bot/store/gate_report.py JUDGE_VERSION) and is not verified is re-labelled as an
unverified draft's body reads (worker/pipelines/publish.py :func:`as_unverified`): its
own closing line becomes ``Refs #N`` and the "Not verified" warning opens it.

There is no job kind that runs the gates again on a PR (bot/store/kinds.py), so nothing
is queued: a human, or a revision, re-judges it for real. Re-labelling is idempotent (a
body that already reads so is not written), each write is audited with its actor, and a
dry run only says what it would do.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import cast

from sqlalchemy import select

from bot.cli import audited
from bot.forges import ForgeFactory
from bot.forges.base import ForgeName, PullRequestRef, RepoRef
from bot.store.db import Database
from bot.store.gate_report import JUDGE_VERSION, Verdict
from bot.store.kinds import AGENT_KINDS
from bot.store.tables import Job
from worker.pipelines.publish import as_unverified

AUDIT_ACTION = "rejudge"


@dataclass(frozen=True)
class Judged:
    """A Ribbit PR as its latest succeeded agent job left it."""

    forge: ForgeName
    repo: str
    pr_number: int
    issue: int | None  # the issue it names (None: no job on it named one)
    job_id: str
    installation_id: int | None
    verdict: Verdict | None  # None: no gate report stored
    judge: str | None  # the judge's version; None: judged before it was recorded

    @property
    def target(self) -> str:
        """How the audit log names the PR."""
        return str(PullRequestRef(RepoRef(self.forge, self.repo), self.pr_number))


class Action(StrEnum):
    RELABELLED = "relabelled as unverified"
    WOULD_RELABEL = "would relabel as unverified (dry run)"
    ALREADY = "already reads as unverified"
    VERIFIED = "verified: left as it is"
    NOT_OPEN_DRAFT = "not an open draft: left as it is"
    NO_ISSUE = "names no issue: left as it is"


@dataclass(frozen=True)
class Rejudged:
    pr: Judged
    action: Action


def judged_by_older(db: Database, repo: str | None = None) -> list[Judged]:
    """Ribbit's PRs whose latest agent job's verdict is not today's judge's, oldest first."""
    return [pr for pr in _latest_per_pr(db, repo) if pr.judge != JUDGE_VERSION]


def _latest_per_pr(db: Database, repo: str | None) -> Iterator[Judged]:
    query = (
        select(Job)
        .where(Job.kind.in_(AGENT_KINDS), Job.state == "succeeded", Job.pr_number.is_not(None))
        .order_by(Job.finished_at, Job.created_at, Job.id)
    )
    if repo is not None:
        query = query.where(Job.repo == repo)
    with db.session() as session:
        jobs: Sequence[Job] = session.scalars(query).all()
        latest: dict[tuple[str, str, int], Judged] = {}
        for job in jobs:  # later jobs replace earlier ones; the issue is the first named
            key = (job.forge, job.repo, cast(int, job.pr_number))
            record = job.solve_record
            before = latest.get(key)
            latest[key] = Judged(
                forge=cast(ForgeName, job.forge),
                repo=job.repo,
                pr_number=key[2],
                issue=before.issue if before and before.issue else job.issue_number,
                job_id=job.id,
                installation_id=job.installation_id,
                verdict=record.verdict,
                judge=record.judge,
            )
    yield from latest.values()


def rejudge(
    db: Database, forges: ForgeFactory, actor: str, *, repo: str | None = None, dry_run: bool
) -> list[Rejudged]:
    """Re-label each open draft an older judge passed without a verified verdict."""
    older = judged_by_older(db, repo)
    return [_rejudge_one(db, forges, actor, pr, dry_run=dry_run) for pr in older]


def _rejudge_one(
    db: Database, forges: ForgeFactory, actor: str, judged: Judged, *, dry_run: bool
) -> Rejudged:
    if judged.verdict is Verdict.VERIFIED:
        return Rejudged(judged, Action.VERIFIED)
    if judged.issue is None:
        return Rejudged(judged, Action.NO_ISSUE)
    forge = forges(judged.forge, installation_id=judged.installation_id)
    ref = PullRequestRef(RepoRef(judged.forge, judged.repo), judged.pr_number)
    pr = forge.get_pull_request(ref)
    if pr.state != "open" or not pr.draft:
        return Rejudged(judged, Action.NOT_OPEN_DRAFT)
    body = as_unverified(pr.body, judged.issue, judged.verdict or Verdict.BEFORE_EVIDENCE)
    if body == pr.body:
        return Rejudged(judged, Action.ALREADY)
    if dry_run:
        return Rejudged(judged, Action.WOULD_RELABEL)

    def relabel() -> str:
        forge.update_pull_request_body(ref, body)
        was = judged.verdict.value if judged.verdict else "no gate report"
        return (
            f"job {judged.job_id} ({was}, judge {judged.judge or 'unrecorded'}): "
            f"body re-labelled unverified, Refs #{judged.issue}"
        )

    audited(db, actor, AUDIT_ACTION, judged.target, relabel)
    return Rejudged(judged, Action.RELABELLED)
