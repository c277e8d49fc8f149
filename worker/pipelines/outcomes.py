"""Outcomes: what finally happened to each bot PR (and human fixes for issues the bot
tried), and reconciliation for outcomes whose webhook was lost."""

from __future__ import annotations

import difflib
import logging
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import select

from bot.forges import make_forge
from bot.forges.base import ForgeError, PullRequestRef, RepoRef
from bot.store.models import Job, Outcome, utcnow
from worker.jobs import JobContext, JobRefused, pipeline
from worker.runtime import WorkerRuntime

log = logging.getLogger(__name__)


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


def record_pull_request_outcome(
    runtime_store: Any,
    settings: Any,
    *,
    forge_name: str,
    repo_name: str,
    pr_number: int,
    issue_number: int | None,
    human: bool,
    installation_id: int | None,
) -> dict[str, Any]:
    repo = RepoRef(forge_name, repo_name)  # type: ignore[arg-type]
    forge = make_forge(settings, repo.forge, installation_id=installation_id)
    ref = PullRequestRef(repo, pr_number)
    pr = forge.get_pull_request(ref)
    if pr.state == "open":
        raise JobRefused(f"PR {pr_number} is still open; no outcome yet")
    merged_diff = forge.get_pull_request_diff(ref) if pr.state == "merged" else ""
    comments = [
        {"author": c.author, "body": c.body, "path": c.path, "line": c.line}
        for c in forge.list_review_comments(ref)
        if c.author != forge.bot_login
    ]
    reviews = [
        {"author": r.author, "state": r.state, "body": r.body}
        for r in forge.list_reviews(ref)
        if r.author != forge.bot_login
    ]
    with runtime_store.db.session() as session:
        bot_jobs = session.scalars(
            select(Job)
            .where(
                Job.forge == forge_name,
                Job.repo == repo_name,
                Job.pr_number == pr_number,
                Job.kind.in_(("solve", "revise")),
                Job.state == "succeeded",
            )
            .order_by(Job.finished_at)
        ).all()
        job_id = bot_jobs[-1].id if bot_jobs else None
        bot_diff = (bot_jobs[-1].solve_record.diff or "") if bot_jobs else ""
        revisions = sum(1 for j in bot_jobs if j.kind == "revise")
        created = _aware(pr.created_at)
        decided = _aware(pr.merged_at if pr.state == "merged" else pr.closed_at) or utcnow()
        row = session.scalar(
            select(Outcome).where(
                Outcome.forge == forge_name,
                Outcome.repo == repo_name,
                Outcome.pr_number == pr_number,
            )
        )
        if row is None:
            row = Outcome(forge=forge_name, repo=repo_name, pr_number=pr_number)
            session.add(row)
        row.issue_number = issue_number
        row.job_id = job_id
        row.human_authored = human
        row.state = "merged" if pr.state == "merged" else "closed"
        row.actor = pr.merged_by if pr.state == "merged" else None
        row.decided_at = decided
        row.time_to_merge_s = (
            (decided - created).total_seconds() if pr.state == "merged" and created else None
        )
        row.revisions = revisions
        row.review_comments = {"comments": comments, "reviews": reviews}
        row.bot_diff = bot_diff or None
        row.merged_diff = merged_diff or None
        row.diff_similarity = (
            diff_similarity(bot_diff, merged_diff) if bot_diff and pr.state == "merged" else None
        )
        return {
            "pr": pr_number,
            "state": row.state,
            "revisions": revisions,
            "diff_similarity": row.diff_similarity,
        }


@pipeline("outcome")
def record_outcome(ctx: JobContext) -> dict[str, Any] | None:
    job = ctx.job
    if job.pr_number is None:
        raise JobRefused("an outcome job needs a pull request number")
    human = job.instructions == "human"
    result = record_pull_request_outcome(
        ctx.store,
        ctx.settings,
        forge_name=job.forge,
        repo_name=job.repo,
        pr_number=job.pr_number,
        issue_number=job.issue_number,
        human=human,
        installation_id=job.installation_id,
    )
    if not human:
        _check_noise(
            ctx.store, ctx.settings, job.forge, job.repo, job.issue_number, job.installation_id
        )
    return result


def _check_noise(
    store: Any,
    settings: Any,
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
            forge_name,
            repo_name,
            issue_number=issue_number,
            installation_id=installation_id,
        )
    except Exception:
        log.exception("noise check of %s:%s failed", forge_name, repo_name)


def reconcile_open_pull_requests(runtime: WorkerRuntime) -> dict[str, int]:
    """Every bot PR the store knows without an outcome is asked about; closed or merged
    ones get their outcome now, so a lost webhook loses nothing."""
    with runtime.db.session() as session:
        known = {(o.forge, o.repo, o.pr_number) for o in session.scalars(select(Outcome))}
        candidates: dict[tuple[str, str, int], tuple[int | None, int | None]] = {}
        for job in session.scalars(
            select(Job).where(Job.pr_number.is_not(None), Job.kind.in_(("solve", "revise")))
        ):
            assert job.pr_number is not None  # selected on that
            key = (job.forge, job.repo, job.pr_number)
            if key not in known:
                candidates[key] = (job.issue_number, job.installation_id)
    checked = repaired = 0
    for (forge_name, repo_name, pr_number), (issue, installation) in sorted(candidates.items()):
        checked += 1
        try:
            record_pull_request_outcome(
                runtime.store,
                runtime.settings,
                forge_name=forge_name,
                repo_name=repo_name,
                pr_number=pr_number,
                issue_number=issue,
                human=False,
                installation_id=installation,
            )
        except JobRefused:
            continue  # still open
        except ForgeError as exc:
            log.warning("reconcile %s:%s!%s: %s", forge_name, repo_name, pr_number, exc)
            continue
        repaired += 1
        _check_noise(runtime.store, runtime.settings, forge_name, repo_name, issue, installation)
    return {"checked": checked, "repaired": repaired}
