"""What a solve or revise job says while it waits for a worker slot: the issue's status
comment shows its place in the queue (registered as the job kinds' waiting hook)."""

from __future__ import annotations

from bot.forges.base import IssueRef
from bot.runtime import Runtime
from bot.store.tables import Job
from worker.jobs import WAITING_HOOKS
from worker.settings import WorkerSettings
from worker.status import Status, StatusComment


def tell_queue_position(runtime: Runtime[WorkerSettings], job: Job, position: int) -> None:
    """The issue's status comment says the job is queued, and where. A revision's only
    once its asker is known to have write access: a review from anyone else (which intake
    could not tell apart) must not make the issue speak (see solve.py's check_permission)."""
    repo = job.repo_ref
    assert job.issue_number is not None
    forge = runtime.forges(repo.forge, installation_id=job.installation_id)
    if job.kind == "revise" and not (job.actor and forge.has_write_access(repo, job.actor)):
        return
    status = StatusComment.for_job(
        runtime.settings,
        forge,
        IssueRef(repo, job.issue_number),
        runtime.store,
        job.id,
        job.status_comment_id,
    )
    ahead = "next in line" if position <= 1 else f"position {position} in the queue"
    status.show(Status("queued", f"Waiting for a free worker slot ({ahead})."))


WAITING_HOOKS["solve"] = tell_queue_position
WAITING_HOOKS["revise"] = tell_queue_position
