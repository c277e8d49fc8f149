"""Periodic repairs (Celery beat): nothing accepted is ever left behind."""

from __future__ import annotations

import logging

from bot.intake import Intake
from bot.queue import CeleryDispatcher, client_celery
from bot.store.jobs import InvalidTransition
from worker.jobs import STALE_AFTER
from worker.runtime import WorkerRuntime

log = logging.getLogger(__name__)


def sweep(runtime: WorkerRuntime) -> dict[str, int]:
    store = runtime.store
    requeued = 0
    for job in store.stale_running(STALE_AFTER * 2):
        try:
            store.transition(job.id, "queued", reason="worker lost; requeued")
            requeued += 1
        except InvalidTransition:  # it finished or moved meanwhile
            continue
    intake = Intake(runtime.settings, store, CeleryDispatcher(client_celery(runtime.settings)))
    sent = intake.dispatch_pending()
    if requeued or sent:
        log.info("sweep: requeued %d, dispatched %d", requeued, sent)
    return {"requeued": requeued, "dispatched": sent}


def reconcile(runtime: WorkerRuntime) -> dict[str, int]:
    """Repair outcomes missed while webhooks were lost (filled in by the review loop)."""
    from worker.pipelines.outcomes import reconcile_open_pull_requests

    return reconcile_open_pull_requests(runtime)
