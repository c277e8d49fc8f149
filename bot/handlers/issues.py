"""A label on an issue asks for a fix."""

from __future__ import annotations

from bot.admission import refusal_reason
from bot.context import Context
from bot.events import IssueLabeled
from bot.routing import Registry
from bot.store.jobs import JobSpec

registry = Registry()


@registry.on("issues.labeled")
def enqueue_solve(ctx: Context) -> None:
    event = ctx.event
    assert isinstance(event, IssueLabeled)
    if ctx.is_bot:
        return ctx.ignore("label added by the bot itself")
    wanted = {ctx.settings.label}
    cached = ctx.store.cached_trigger_label(ctx.session, event.forge, event.repo)
    if cached:
        wanted.add(cached)
    if event.label not in wanted:
        return ctx.ignore(f"label {event.label!r} is not the trigger label")
    reason = refusal_reason(ctx.settings.admission, ctx.store, ctx.session, event.forge, event.repo)
    if reason:
        return ctx.refuse(reason)
    active = ctx.store.active_for_issue(ctx.session, event.forge, event.repo, event.issue_number)
    if active is not None:
        return ctx.ignore(f"issue already has active job {active.id}")
    job = ctx.create_job(
        JobSpec(
            kind="solve",
            forge=event.forge,
            repo=event.repo,
            issue_number=event.issue_number,
            actor=event.actor.login,
            delivery_id=event.delivery_id,
            installation_id=event.installation_id,
        )
    )
    if job is None:  # a concurrent delivery created it between our check and insert
        ctx.ignore("issue already has an active job")
    return None
