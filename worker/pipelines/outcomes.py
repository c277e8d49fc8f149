"""Outcomes: what finally happened to each bot PR (and human fixes for issues the bot
tried), and reconciliation for outcomes whose webhook was lost."""

from __future__ import annotations

import difflib
import logging
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from bot.forges import ForgeFactory
from bot.forges.base import Forge, ForgeError, PullRequestRef, RepoRef
from bot.forges.base import forge_name as to_forge_name
from bot.runtime import Runtime
from bot.store.jobs import JobStore
from bot.store.outcomes import OutcomeStore
from bot.store.payloads import OutcomeOf, PayloadError
from bot.store.records.outcome import OutcomeRecord
from bot.store.records.review import FeedbackComment, FeedbackReview, ReviewFeedback
from bot.store.tables import utcnow
from worker.jobs import JobContext, JobRefused, pipeline
from worker.pipelines.trusted_text import TrustedText
from worker.settings import WorkerSettings

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class OutcomeRecorded:
    """An outcome job's result: the pull request, how it ended (merged or closed), the
    revise jobs behind it and how much of the bot's diff was merged (None: not merged, or
    no bot diff to compare). The outcome itself is in the outcomes table."""

    pr: int
    state: str
    revisions: int
    diff_similarity: float | None

    def to_json(self) -> dict[str, Any]:
        return {
            "pr": self.pr,
            "state": self.state,
            "revisions": self.revisions,
            "diff_similarity": self.diff_similarity,
        }


@dataclass(frozen=True)
class Reconciled:
    """What a reconcile pass did: bot pull requests asked about, outcomes recorded."""

    checked: int
    repaired: int

    def to_json(self) -> dict[str, int]:
        return {"checked": self.checked, "repaired": self.repaired}


def _changed_lines(diff: str) -> list[str]:
    return [
        line
        for line in diff.splitlines()
        if line[:1] in "+-" and not line.startswith(("+++", "---"))
    ]


def diff_similarity(bot_diff: str, merged_diff: str) -> float:
    """1.0 when the merged change is the bot's change line for line; lower the more humans
    edited it before merging (compared on changed lines, ignoring context and offsets)."""
    a, b = _changed_lines(bot_diff), _changed_lines(merged_diff)
    if not a and not b:
        return 1.0
    return round(difflib.SequenceMatcher(a=a, b=b, autojunk=False).ratio(), 4)


def _aware(value: datetime | None) -> datetime | None:
    if value is None:
        return None
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def _trusted_review_text(forge: Forge, ref: PullRequestRef) -> ReviewFeedback:
    """The pull request's review comments and reviews by writers. The outcome's review
    text becomes the hints of training environments built from it
    (trainer/envs/candidates.py), so it obeys the prompt's trust rule: writers' words
    only, outsiders' counted as withheld."""
    trust = TrustedText(forge, ref.repo)
    comments = tuple(
        FeedbackComment(author=c.author, body=c.body, path=c.path, line=c.line)
        for c in forge.list_review_comments(ref)
        if trust.admit("review_comment", c.author)
    )
    reviews = tuple(
        FeedbackReview(author=r.author, state=r.state, body=r.body)
        for r in forge.list_reviews(ref)
        if trust.admit("review", r.author)
    )
    return ReviewFeedback(comments=comments, reviews=reviews)


def record_pull_request_outcome(
    runtime_store: JobStore,
    forges: ForgeFactory,
    *,
    forge_name: str,
    repo_name: str,
    pr_number: int,
    issue_number: int | None,
    human: bool,
    installation_id: int | None,
) -> OutcomeRecorded:
    repo = RepoRef(to_forge_name(forge_name), repo_name)
    forge = forges(repo.forge, installation_id=installation_id)
    ref = PullRequestRef(repo, pr_number)
    pr = forge.get_pull_request(ref)
    if pr.state == "open":
        raise JobRefused(f"PR {pr_number} is still open; no outcome yet")
    merged_diff = forge.get_pull_request_diff(ref) if pr.state == "merged" else ""
    review_comments = _trusted_review_text(forge, ref)
    bot_jobs = runtime_store.agent_jobs_on_pull_request(forge_name, repo_name, pr_number)
    bot_diff = (bot_jobs[-1].solve_record.diff or "") if bot_jobs else ""
    revisions = sum(1 for j in bot_jobs if j.kind == "revise")
    created = _aware(pr.created_at)
    decided = _aware(pr.merged_at if pr.state == "merged" else pr.closed_at) or utcnow()
    merged = pr.state == "merged"
    record = OutcomeRecord(
        forge=forge_name,
        repo=repo_name,
        pr_number=pr_number,
        issue_number=issue_number,
        job_id=bot_jobs[-1].id if bot_jobs else None,
        human_authored=human,
        state="merged" if merged else "closed",
        actor=pr.merged_by if merged else None,
        decided_at=decided,
        time_to_merge_s=(decided - created).total_seconds() if merged and created else None,
        revisions=revisions,
        review_comments=review_comments,
        bot_diff=bot_diff or None,
        merged_diff=merged_diff or None,
        diff_similarity=diff_similarity(bot_diff, merged_diff) if bot_diff and merged else None,
    )
    OutcomeStore(runtime_store.db).save(record)
    return OutcomeRecorded(pr_number, record.state, revisions, record.diff_similarity)


@pipeline("outcome")
def record_outcome(ctx: JobContext) -> OutcomeRecorded:
    job = ctx.job
    if job.pr_number is None:
        raise JobRefused("an outcome job needs a pull request number")
    try:
        source = job.payload
    except PayloadError as exc:
        raise JobRefused(str(exc)) from None
    human = isinstance(source, OutcomeOf) and source.author == "human"
    result = record_pull_request_outcome(
        ctx.store,
        ctx.forges,
        forge_name=job.forge,
        repo_name=job.repo,
        pr_number=job.pr_number,
        issue_number=job.issue_number,
        human=human,
        installation_id=job.installation_id,
    )
    if not human:
        _check_noise(
            ctx.store,
            ctx.settings,
            ctx.forges,
            job.forge,
            job.repo,
            job.issue_number,
            job.installation_id,
        )
    return result


def _check_noise(
    store: JobStore,
    settings: WorkerSettings,
    forges: ForgeFactory,
    forge_name: str,
    repo_name: str,
    issue_number: int | None,
    installation_id: int | None,
) -> None:
    """The repository's merge rate after this outcome (worker/noise.py); the outcome is
    recorded whatever happens here."""
    from worker.noise import check_repository

    try:
        check_repository(
            store,
            settings,
            forges,
            forge_name,
            repo_name,
            issue_number=issue_number,
            installation_id=installation_id,
        )
    except Exception:
        log.exception("noise check of %s:%s failed", forge_name, repo_name)


def reconcile_open_pull_requests(runtime: Runtime) -> Reconciled:
    """Every bot PR the store knows without an outcome is asked about; closed or merged
    ones get their outcome now, so a lost webhook loses nothing."""
    pending = OutcomeStore(runtime.db).pull_requests_without_outcome()
    checked = repaired = 0
    for pr in pending:
        checked += 1
        try:
            record_pull_request_outcome(
                runtime.store,
                runtime.forges,
                forge_name=pr.forge,
                repo_name=pr.repo,
                pr_number=pr.pr_number,
                issue_number=pr.issue_number,
                human=False,
                installation_id=pr.installation_id,
            )
        except JobRefused:
            continue  # still open
        except ForgeError as exc:
            log.warning("reconcile %s:%s!%s: %s", pr.forge, pr.repo, pr.pr_number, exc)
            continue
        repaired += 1
        _check_noise(
            runtime.store,
            runtime.settings,
            runtime.forges,
            pr.forge,
            pr.repo,
            pr.issue_number,
            pr.installation_id,
        )
    return Reconciled(checked, repaired)
