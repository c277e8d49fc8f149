"""A label on an issue asks for a fix."""

from __future__ import annotations

from bot.admission import budget_refusal
from bot.store.jobs import JobSpec
from bot.web.context import Context
from bot.web.events import IssueLabeled
from bot.web.routing import Registry

registry = Registry()


@registry.on("issues.labeled")
def enqueue_solve(ctx: Context) -> None:
    event = ctx.event
    assert isinstance(event, IssueLabeled)
    if ctx.is_bot:
        return ctx.ignore("label added by the bot itself")
    view = ctx.view
    if event.label not in {ctx.settings.label, view.trigger_label}:
        return ctx.ignore(f"label {event.label!r} is not the trigger label")
    reason = budget_refusal(ctx.settings.admission, event.forge, event.repo, view.agent_jobs_today)
    if reason:
        return ctx.refuse(reason)
    if view.active_job_id is not None:
        return ctx.ignore(f"issue already has active job {view.active_job_id}")
    job = ctx.create_job(
        JobSpec(
            kind="solve",
            forge=event.forge,
            repo=event.repo,
            issue_number=event.issue_number,
            issue_title=event.title or None,
            actor=event.actor.login,
            delivery_id=event.delivery_id,
            installation_id=event.installation_id,
        )
    )
    if job is None:  # a concurrent delivery created it between our check and insert
        ctx.ignore("issue already has an active job")
    return None
