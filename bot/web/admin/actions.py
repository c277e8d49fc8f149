"""What an admin can do from the dashboard, each through the service the CLI uses.

Every function returns an ActionResult; the view layer audits it and shows its message.
Nothing here decides policy of its own: cancelling is JobStore.cancel, pausing is
JobStore.pause/resume plus Intake.dispatch for released jobs (as `ribbit resume` does),
and promotion is the model registry passed in (trainer.registry.RegistryVersions, which
`ribbit model promote` uses too: the adapter is loaded on inference servers first);
re-validating an environment is the trainer's validation passed in likewise
(bot/env_validation.py), run in the background.
"""

from __future__ import annotations

from dataclasses import dataclass

from bot.env_validation import MAX_RUNNING, AlreadyRunning, Busy
from bot.model_versions import ModelVersionError
from bot.store.jobs import InvalidTransition, JobNotFound, JobSpec
from bot.web.services import Services

RETRYABLE_STATES = ("failed", "cancelled")


@dataclass(frozen=True)
class ActionResult:
    ok: bool
    message: str


def cancel_job(svc: Services, job_id: str) -> ActionResult:
    with svc.db.session() as session:
        job = svc.store.get_in(session, job_id)
        if job is None:
            return ActionResult(False, f"no job {job_id}")
        try:
            svc.store.cancel(session, job, "cancelled by an admin from the dashboard")
        except InvalidTransition:
            return ActionResult(False, f"job {job_id} is {job.state}; only active jobs cancel")
    return ActionResult(True, f"cancelled job {job_id}")


def retry_job(svc: Services, job_id: str) -> ActionResult:
    """A new job with the same request (the old one stays as history, as its parent)."""
    try:
        old = svc.store.get(job_id)
    except JobNotFound:
        return ActionResult(False, f"no job {job_id}")
    if old.state not in RETRYABLE_STATES:
        return ActionResult(False, f"job {job_id} is {old.state}; only failed or cancelled retry")
    spec = JobSpec(
        kind=old.kind,  # type: ignore[arg-type]
        forge=old.forge,
        repo=old.repo,
        issue_number=old.issue_number,
        issue_title=old.issue_title,
        pr_number=old.pr_number,
        actor=old.actor,
        installation_id=old.installation_id,
        payload=old.payload,
        parent_id=old.id,
    )
    with svc.db.session() as session:
        held = svc.store.is_paused(session, spec.forge, spec.repo)
        new = svc.store.create(session, spec, held=held)
        if new is None:
            return ActionResult(False, "another job is already active for that issue")
        new_id = new.id
    svc.queue.dispatch([new_id])
    note = " (held: the bot is paused)" if held else ""
    return ActionResult(True, f"job {job_id} retried as {new_id}{note}")


def pause(svc: Services, forge: str | None, repo: str | None) -> ActionResult:
    svc.store.pause(forge=forge, repo=repo)
    return ActionResult(True, f"paused {_scope(forge, repo)}")


def resume(svc: Services, forge: str | None, repo: str | None) -> ActionResult:
    released = svc.store.resume(forge=forge, repo=repo)
    svc.queue.dispatch(released)
    return ActionResult(True, f"resumed {_scope(forge, repo)}; {len(released)} held job(s) sent")


def _scope(forge: str | None, repo: str | None) -> str:
    return "everything" if repo is None else f"{forge or 'github'}:{repo}"


NO_REGISTRY = ActionResult(False, "the model registry is not available in this process")


def promote(svc: Services, version: str) -> ActionResult:
    if svc.model_versions is None:
        return NO_REGISTRY
    try:
        svc.model_versions.promote(version)
    except ModelVersionError as exc:
        return ActionResult(False, str(exc))
    return ActionResult(True, f"promoted {version}")


def rollback(svc: Services) -> ActionResult:
    if svc.model_versions is None:
        return NO_REGISTRY
    try:
        previous = svc.model_versions.rollback()
    except ModelVersionError as exc:
        return ActionResult(False, str(exc))
    return ActionResult(True, f"now serving {previous or 'the base model'}")


def validate_env(svc: Services, instance_id: str, requested_by: str) -> ActionResult:
    """Start the validation; its result lands on the environment's page."""
    if svc.env_validation is None:
        return ActionResult(False, "environment validation is not available in this process")
    try:
        run_id = svc.env_validation.start(instance_id, requested_by)
    except KeyError:
        return ActionResult(False, f"no environment {instance_id}")
    except AlreadyRunning:
        return ActionResult(False, f"a validation of {instance_id} is already running")
    except Busy:
        return ActionResult(False, f"{MAX_RUNNING} validations are running; try again later")
    return ActionResult(True, f"validation {run_id} of {instance_id} started")
