"""Celery tasks: thin wrappers that pass a job id to worker.jobs.run_job, one per job
kind of the table (bot/store/kinds.py), and the periodic sweep and reconcile.

Each task is idempotent (the store's claim decides whether a delivery of the
message runs anything), acknowledged late, and time-limited explicitly. Tasks never
retry themselves: a job that must wait goes back to the store, and the sweep alone
sends it again (one owner of re-sending, so a job is never several task chains).
"""

from __future__ import annotations

import logging
from typing import Any

from celery import Task, shared_task

import worker.pipelines  # noqa: F401  (registers the pipelines)
from bot.store.kinds import Kind
from worker.celery_app import runtime_for
from worker.jobs import run_job

log = logging.getLogger(__name__)

# Short jobs (comments, bookkeeping) get short limits; agent jobs use the app-wide limit.
SHORT_SOFT_LIMIT_S = 240
SHORT_HARD_LIMIT_S = 300


def _run(task: Task, job_id: str, seq: int | None) -> str:
    outcome = run_job(runtime_for(task.app), job_id, seq)
    if outcome == "deferred":
        log.info("job %s deferred; the sweep sends it again when due", job_id)
    return outcome


AGENT_TASK: dict[str, Any] = {
    "bind": True,
    "acks_late": True,
    "reject_on_worker_lost": True,
    "max_retries": 0,
}
SHORT_TASK: dict[str, Any] = {
    **AGENT_TASK,
    "soft_time_limit": SHORT_SOFT_LIMIT_S,
    "time_limit": SHORT_HARD_LIMIT_S,
}


def _job_task(kind: Kind) -> Any:
    """The Celery task that runs jobs of ``kind``: agent kinds take the app-wide time
    limit, the others the short one."""
    spec = kind.spec

    def run(self: Task, job_id: str, seq: int | None = None) -> str:
        return _run(self, job_id, seq)

    # Celery names the task's class after its function; one per kind reads better in logs.
    run.__name__ = run.__qualname__ = spec.task.removeprefix("ribbit.")
    return shared_task(name=spec.task, **(AGENT_TASK if spec.runs_agent else SHORT_TASK))(run)


# One task per job kind, under the name bot/queue.py sends it to.
JOB_TASKS: dict[str, Any] = {kind.spec.name: _job_task(kind) for kind in Kind}


@shared_task(name="ribbit.sweep", bind=True, soft_time_limit=50, time_limit=60)
def sweep(self: Task) -> dict[str, int]:
    """Re-send jobs the broker never got and requeue jobs whose worker died."""
    from worker.maintenance import sweep as do_sweep

    # Celery keeps JSON, not records: the one place the sweep's record becomes its JSON.
    return do_sweep(runtime_for(self.app)).to_json()


@shared_task(name="ribbit.reconcile", bind=True, soft_time_limit=540, time_limit=600)
def reconcile(self: Task) -> dict[str, int]:
    from worker.maintenance import reconcile as do_reconcile

    # Celery keeps JSON, not records: the one place the pass's record becomes its JSON.
    return do_reconcile(runtime_for(self.app)).to_json()
