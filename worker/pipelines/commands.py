"""Commands that act on another job (`/ribbit stop`, and `retry`/`revise` while a job is
active): carried out only after the commenter's write access is checked on the forge."""

from __future__ import annotations

import json
from typing import Any

from bot.intake import Intake
from bot.queue import CeleryDispatcher, client_celery
from bot.store.jobs import JobSpec
from bot.store.models import Job
from worker.jobs import JobContext, JobRefused, pipeline
from worker.pipelines.replies import check_actor, reply_target


@pipeline("command")
def run_command(ctx: JobContext) -> dict[str, Any] | None:
    job = ctx.job
    try:
        data = json.loads(job.instructions or "")
        name, target_id = data["command"], data["target"]
    except (ValueError, KeyError, TypeError):
        raise JobRefused("malformed command job") from None
    forge, where = reply_target(ctx)
    try:
        check_actor(ctx, forge)
    except JobRefused:
        forge.post_comment(where, f"@{job.actor}: only collaborators with write access can "
                                  f"use `/ribbit {name}`.")
        raise
    store = ctx.store
    with store.db.session() as session:
        target = session.get(Job, target_id)
        still_active = target is not None and target.state in ("queued", "running")
        if still_active:
            assert target is not None
            reason = (f"stopped by {job.actor}" if name == "stop"
                      else f"superseded by /ribbit {name} from {job.actor}")
            store.cancel(session, target, reason)
        new_id = None
        if name in {"retry", "revise"}:
            new = store.create(session, JobSpec(
                kind="revise" if name == "revise" else "solve", forge=job.forge, repo=job.repo,
                issue_number=job.issue_number, pr_number=job.pr_number, actor=job.actor,
                delivery_id=job.delivery_id, installation_id=job.installation_id,
                instructions=data.get("text") or None, parent_id=None))
            if new is None:
                raise JobRefused("another job for this issue started meanwhile")
            new_id = new.id
            if target is not None and still_active:
                target.superseded_by = new_id
    if new_id is not None:
        Intake(ctx.settings, store, CeleryDispatcher(client_celery(ctx.settings))).dispatch(
            [new_id])
    if name == "stop":
        text = (f"⏹️ Stopped job `{target_id[:12]}` as @{job.actor} asked." if still_active
                else "Nothing to stop: that job had already ended.")
        forge.post_comment(where, text)
    return {"command": name, "cancelled": target_id if still_active else None,
            "started": new_id}
