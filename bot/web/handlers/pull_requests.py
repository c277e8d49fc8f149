"""Closed or merged bot PRs become outcomes; 'changes requested' reviews ask for revisions,
when the reviewer may have write access (the worker checks; an outsider's review is only
counted)."""

from __future__ import annotations

from typing import Any

from bot.forges.branches import BRANCH_PREFIX
from bot.forges.sanitize import closed_issue_numbers
from bot.store.jobs import JobSpec
from bot.store.payloads import OutcomeOf, PersonAsks
from bot.store.tables import Job
from bot.web.context import Context
from bot.web.events import PullRequestClosed, ReviewSubmitted
from bot.web.normalize import MAX_NUMBER
from bot.web.routing import Registry

registry = Registry()


def _bot_job_for_pr(ctx: Context, forge: str, repo: str, pr: int) -> Job | None:
    return ctx.store.latest_on_pull_request(ctx.session, forge, repo, pr)


@registry.on("pull_request.closed")
def record_outcome(ctx: Context) -> None:
    event = ctx.event
    assert isinstance(event, PullRequestClosed)
    job = _bot_job_for_pr(ctx, event.forge, event.repo, event.pr_number)
    spec: dict[str, Any] = dict(
        forge=event.forge,
        repo=event.repo,
        pr_number=event.pr_number,
        actor=event.merged_by or event.actor.login,
        delivery_id=event.delivery_id,
        installation_id=event.installation_id,
    )
    if job is not None or event.head_branch.startswith(BRANCH_PREFIX):
        ctx.create_job(
            JobSpec(
                kind="outcome",
                issue_number=job.issue_number if job else None,
                parent_id=job.id if job else None,
                payload=OutcomeOf("bot"),
                **spec,
            )
        )
        return None
    if not event.merged:
        return ctx.ignore("a human PR closed without merge")
    # A human fix for an issue the bot worked on: the fix the bot should have found.
    # A number past the column's range names no issue (and must not reach the query).
    numbers = {int(n) for n in closed_issue_numbers(event.body) if len(n) <= 10}
    for number in sorted(n for n in numbers if 1 <= n <= MAX_NUMBER):
        if ctx.store.agent_worked_on(ctx.session, event.forge, event.repo, number):
            ctx.create_job(
                JobSpec(kind="outcome", issue_number=number, payload=OutcomeOf("human"), **spec)
            )
    if not ctx.jobs:
        ctx.ignore("a human PR that fixes no issue the bot worked on")
    return None


@registry.on("pull_request_review.submitted")
def revise_on_changes_requested(ctx: Context) -> None:
    event = ctx.event
    assert isinstance(event, ReviewSubmitted)
    if ctx.is_bot:
        return ctx.ignore("review by the bot itself")
    if event.state != "changes_requested":
        return ctx.ignore(f"review state {event.state}")
    if event.outsider:
        # Decided here, where GitHub says so: no job, so nothing reaches the issue's status
        # comment. A reviewer the payload does not rule out (a collaborator without write
        # access) gets a job the worker refuses without a word on the issue.
        return ctx.ignore_outsider(
            "review", f"{event.actor.login} is not a collaborator; reviews need write access"
        )
    job = _bot_job_for_pr(ctx, event.forge, event.repo, event.pr_number)
    if job is None or job.issue_number is None:
        return ctx.ignore(f"PR {event.pr_number} was not opened by Ribbit")
    if ctx.store.active_for_issue(ctx.session, event.forge, event.repo, job.issue_number):
        return ctx.ignore("a job for this issue is already active")
    # Whether .ribbit.yml wants revisions on reviews is checked by the worker, which reads it.
    ctx.create_job(
        JobSpec(
            kind="revise",
            forge=event.forge,
            repo=event.repo,
            issue_number=job.issue_number,
            pr_number=event.pr_number,
            actor=event.actor.login,
            delivery_id=event.delivery_id,
            installation_id=event.installation_id,
            payload=PersonAsks(event.body) if event.body else None,
            parent_id=job.id,
        )
    )
    return None
