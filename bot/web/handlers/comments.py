"""`/ribbit <command>` in a comment on an issue or on one of the bot's PRs/MRs.

Whether the commenter may command the bot (write access) is checked by the
worker against the forge before anything runs; intake only records intent. Nothing
an outsider writes costs anything: a command from someone the forge already marks as
no collaborator makes no job (it is only counted, ``Context.ignore_outsider``), and
every command that could start agent work becomes a ``command`` job, which counts
against no budget, so the worker checks permission (and then the budget) before a
solve or revise job exists.
"""

from __future__ import annotations

from typing import Any

from bot.admission import refusal_reason
from bot.store.jobs import JobSpec
from bot.store.payloads import CommandOrder, UnknownWord
from bot.web.context import Context
from bot.web.events import CommentCreated
from bot.web.routing import Registry
from bot.web.slash_commands import parse_command

registry = Registry()


def _issue_for_pr(ctx: Context, event: CommentCreated, pr_number: int) -> int | None:
    """The issue a bot PR works on, from the job that opened it; None if not ours."""
    return ctx.store.issue_of_pull_request(ctx.session, event.forge, event.repo, pr_number)


@registry.on("comment.created")
def run_command(ctx: Context) -> None:
    event = ctx.event
    assert isinstance(event, CommentCreated)
    if ctx.is_bot:
        return ctx.ignore("comment by the bot itself")
    command = parse_command(event.body, ctx.settings.command_prefix)
    if command is None:
        return ctx.ignore("comment has no /ribbit command")
    if event.outsider:
        return ctx.ignore_outsider(
            "command", f"{event.actor.login} is not a collaborator; commands need write access"
        )
    issue = event.issue_number
    if event.pr_number is not None:
        issue = _issue_for_pr(ctx, event, event.pr_number)
        if issue is None:
            return ctx.ignore(f"PR/MR {event.pr_number} was not opened by Ribbit")
    assert issue is not None
    spec = _job_fields(event, issue)
    if command.name in {"explain", "help"}:
        # Help names the word it did not know; explain needs nothing more.
        word = UnknownWord(command.unknown) if command.name == "help" and command.unknown else None
        ctx.create_job(JobSpec(kind=command.name, payload=word, **spec))
        return None
    active = ctx.store.active_for_issue(ctx.session, event.forge, event.repo, issue)
    if command.name == "stop":
        if active is None:
            return ctx.ignore("nothing to stop: no queued or running job for this issue")
        # Cancelling someone's job needs write access, which only the worker can check
        # against the forge: intake records the command, the worker carries it out.
        ctx.create_job(
            JobSpec(
                kind="command",
                payload=CommandOrder("stop", active.id),
                **spec,
            )
        )
        return None
    # retry and revise start agent work: admission applies.
    reason = refusal_reason(ctx.settings.admission, ctx.store, ctx.session, event.forge, event.repo)
    if reason:
        return ctx.refuse(reason)
    kind = "revise" if command.name == "revise" else "solve"
    if kind == "revise" and event.pr_number is None:
        return ctx.ignore("/ribbit revise works on the bot's pull request, not the issue")
    # The worker checks write access, then admission again, then starts the job.
    ctx.create_job(
        JobSpec(
            kind="command",
            payload=CommandOrder(
                "revise" if kind == "revise" else "retry",  # stop, help, explain returned above
                active.id if active is not None else None,
                command.text,
            ),
            **spec,
        )
    )
    return None


def _job_fields(event: CommentCreated, issue: int) -> dict[str, Any]:
    """The JobSpec fields every job a command starts shares."""
    return dict(
        forge=event.forge,
        repo=event.repo,
        issue_number=issue,
        issue_title=event.title or None,
        pr_number=event.pr_number,
        actor=event.actor.login,
        delivery_id=event.delivery_id,
        installation_id=event.installation_id,
    )
