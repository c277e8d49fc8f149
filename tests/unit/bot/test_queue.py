"""The sending Celery app never takes over the worker's tasks."""

from __future__ import annotations

import threading
from typing import Any

from celery import current_app

from bot.queue import client_celery
from worker.celery_app import create_celery


def test_a_sender_built_on_a_worker_thread_leaves_its_tasks_on_the_worker_app(
    settings: Any,
) -> None:
    # A /ribbit retry (and the sweep) build a sender on a pool thread; the thread's next
    # task must still resolve to the worker's app, which carries the worker's settings.
    from worker import tasks

    worker_app = create_celery(settings)
    seen: list[Any] = []

    def pool_thread() -> None:
        worker_app.set_current()
        client_celery(settings)
        seen.append((current_app._get_current_object(), tasks.JOB_TASKS["solve"].app))

    thread = threading.Thread(target=pool_thread)
    thread.start()
    thread.join()
    [(current, task_app)] = seen
    assert current is worker_app
    assert task_app is worker_app
    assert task_app.ribbit_settings is settings
