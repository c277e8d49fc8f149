"""`/ribbit stop|retry|revise`: carried out only after the commenter's write access is
checked on the forge, and for retry/revise only within the repository's admission (the
daily budget), which is checked again here because only now is the commenter known to
be allowed. Someone without write access gets at most one reply per issue."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bot.admission import refusal_reason
from bot.queue import JobQueue
from bot.store.jobs import JobSpec
from bot.store.payloads import CommandOrder, PayloadError, PersonAsks
from worker.jobs import JobContext, JobRefused, pipeline
from worker.pipelines.replies import WRITE_ACCESS_REFUSAL, check_actor, reply_target

TOLD_BY_ANOTHER = "another command of theirs answers them"


@dataclass(frozen=True)
class CommandDone:
    """A command job's result: which command ran, the job it cancelled (a stop, or the
    job a retry or revise superseded) and the job a retry or revise started."""

    command: str
    cancelled: str | None
    started: str | None

    def to_json(self) -> dict[str, Any]:
        return {"command": self.command, "cancelled": self.cancelled, "started": self.started}


@pipeline("command")
def run_command(ctx: JobContext) -> CommandDone:
    job = ctx.job
    try:
        order = job.payload
    except PayloadError as exc:
        raise JobRefused(str(exc)) from None
    if not isinstance(order, CommandOrder):
        raise JobRefused("malformed command job")
    name, target_id = order.name, order.target
    forge, where = reply_target(ctx)
    try:
        check_actor(ctx, forge)
    except JobRefused as refusal:
        if _already_told(ctx):
            # Refused in silence, and recorded so: a reason that read like a told refusal
            # would make the earlier command still queued (the one that tells) count this
            # one as having told, and stay silent too.
            raise JobRefused(f"{refusal}; {TOLD_BY_ANOTHER}") from None
        forge.post_comment(
            where,
            f"@{job.actor}: only collaborators with write access can use `/ribbit {name}`.",
        )
        raise
    store = ctx.store
    with store.db.session() as session:
        if name in {"retry", "revise"}:
            refused = refusal_reason(ctx.settings.admission, store, session, job.forge, job.repo)
            if refused:
                forge.post_comment(where, f"Not started: {refused}.")
                raise JobRefused(refused)
        target = store.get_in(session, target_id) if target_id else None
        still_active = target is not None and target.state in ("queued", "running")
        if still_active:
            assert target is not None
            reason = (
                f"stopped by {job.actor}"
                if name == "stop"
                else f"superseded by /ribbit {name} from {job.actor}"
            )
            store.cancel(session, target, reason)
        new_id = None
        if name in {"retry", "revise"}:
            new = store.create(session, _ordered_job(job, name, order.text))
            if new is None:
                raise JobRefused("another job for this issue started meanwhile")
            new_id = new.id
            if target is not None and still_active:
                target.superseded_by = new_id
    if new_id is not None:
        # Sent now for a prompt start; the sweep would send it if this fails.
        JobQueue.to_celery(ctx.settings, store).dispatch([new_id])
    if name == "stop":
        text = (
            f"⏹️ Stopped job `{(target_id or '')[:12]}` as @{job.actor} asked."
            if still_active
            else "Nothing to stop: that job had already ended."
        )
        forge.post_comment(where, text)
    return CommandDone(name, target_id if still_active else None, new_id)


def _ordered_job(job: Any, name: str, text: str) -> JobSpec:
    """The job a /ribbit retry or revise starts: the command job's issue (its title as
    intake kept it too), asker and installation, with the text that followed the command."""
    return JobSpec(
        kind="revise" if name == "revise" else "solve",
        forge=job.forge,
        repo=job.repo,
        issue_number=job.issue_number,
        issue_title=job.issue_title,
        pr_number=job.pr_number,
        actor=job.actor,
        delivery_id=job.delivery_id,
        installation_id=job.installation_id,
        payload=PersonAsks(text) if text else None,
        parent_id=None,
    )


def _already_told(ctx: JobContext) -> bool:
    """Whether another command job of this actor on this issue tells them instead: one that
    was refused and told them (its reason ends with the refusal itself, not with
    TOLD_BY_ANOTHER), or an earlier one still queued or running (which will).
    Only the earliest of several commands sent at once replies, however many workers run
    them together: a check for refused jobs alone let each of them reply."""
    return ctx.store.command_told_elsewhere(ctx.job, refused_reason=WRITE_ACCESS_REFUSAL)
