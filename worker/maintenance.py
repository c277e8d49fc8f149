"""Periodic repairs (Celery beat): nothing accepted is ever left behind."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

from bot.queue import JobQueue
from bot.runtime import Runtime
from bot.store.jobs import InvalidTransition
from worker.jobs import MAX_REQUEUES, STALE_AFTER

if TYPE_CHECKING:
    from worker.pipelines.outcomes import Reconciled

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Swept:
    """What a sweep did: jobs requeued after a lost worker, jobs failed for losing too
    many, jobs sent to the broker."""

    requeued: int
    failed: int
    dispatched: int

    def to_json(self) -> dict[str, int]:
        return {"requeued": self.requeued, "failed": self.failed, "dispatched": self.dispatched}


def sweep(runtime: Runtime, *, queue: JobQueue | None = None) -> Swept:
    """Requeue jobs whose worker died (at most MAX_REQUEUES times each) and send every job
    that is due: the only place jobs are re-sent."""
    store = runtime.store
    requeued = failed = 0
    for job in store.stale_running(STALE_AFTER * 2):
        try:
            if job.requeues >= MAX_REQUEUES:
                store.transition(
                    job.id,
                    "failed",
                    stage=None,
                    reason=f"its worker was lost {job.requeues + 1} times; not retried again",
                )
                failed += 1
                continue
            store.transition(
                job.id, "queued", reason="worker lost; requeued", requeues=job.requeues + 1
            )
            requeued += 1
        except InvalidTransition:  # it finished or moved meanwhile
            continue
    queue = queue or JobQueue.to_celery(runtime.settings, store)
    sent = queue.dispatch_pending()
    if requeued or sent or failed:
        log.info("sweep: requeued %d, failed %d, dispatched %d", requeued, failed, sent)
    return Swept(requeued=requeued, failed=failed, dispatched=sent)


def reconcile(runtime: Runtime) -> Reconciled:
    """Repair outcomes missed while webhooks were lost (filled in by the review loop)."""
    from worker.pipelines.outcomes import reconcile_open_pull_requests

    return reconcile_open_pull_requests(runtime)
