"""Handing jobs to the worker fleet by task name, so bot/ never imports worker/."""

from __future__ import annotations

from typing import Protocol

from celery import Celery

from bot.settings import Settings
from bot.store.models import Job

# One Celery task per job kind; worker/tasks.py defines them under these names.
TASK_FOR_KIND: dict[str, str] = {
    "solve": "ribbit.solve",
    "revise": "ribbit.revise",
    "explain": "ribbit.explain",
    "help": "ribbit.help",
    "command": "ribbit.command",
    "outcome": "ribbit.record_outcome",
}
QUEUE = "ribbit"


class Dispatcher(Protocol):
    def dispatch(self, job: Job) -> None: ...


def broker_transport_options(settings: Settings) -> dict[str, object]:
    # With acks_late an unacknowledged Redis message comes back after the visibility
    # timeout; it must outlast the longest job or a healthy long job would run twice. The
    # embedded SQLAlchemy transport passes its options to create_engine, so it gets none.
    if settings.uses_embedded_broker:
        return {}
    return {"visibility_timeout": settings.effective_job_time_limit_s + 600}


def prepare_broker(settings: Settings) -> None:
    """The embedded broker is a SQLite file in the data dir, which must exist first."""
    if settings.uses_embedded_broker:
        settings.data_dir.mkdir(parents=True, exist_ok=True)


def client_celery(settings: Settings) -> Celery:
    """A Celery app used only to send (the web process runs no tasks)."""
    prepare_broker(settings)
    app = Celery("ribbit-web", broker=settings.effective_broker_url)
    app.conf.update(
        task_default_queue=QUEUE,
        broker_transport_options=broker_transport_options(settings),
        broker_connection_timeout=3,
        broker_connection_retry_on_startup=False,
        task_ignore_result=True,
    )
    return app


class CeleryDispatcher:
    def __init__(self, app: Celery) -> None:
        self.app = app

    def dispatch(self, job: Job) -> None:
        # No send retries here: a failed send leaves the job undispatched in the store,
        # and dispatch_pending re-sends it, so the webhook answer never waits on a dead broker.
        self.app.send_task(
            TASK_FOR_KIND[job.kind],
            kwargs={"job_id": job.id, "seq": job.dispatch_seq},
            queue=QUEUE,
            retry=False,
        )
