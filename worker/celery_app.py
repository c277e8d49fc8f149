"""The worker's Celery app. Built from Settings by ``create_celery``; nothing is
configured at import time. ``celery -A worker.celery_app worker`` builds it from the
environment on first use."""

from __future__ import annotations

import logging
import socket
import threading
from datetime import timedelta
from typing import Any

from celery import Celery
from celery.signals import worker_process_shutdown, worker_ready, worker_shutdown

from bot.queue import QUEUE, broker_transport_options, prepare_broker
from bot.runtime import Runtime
from worker.settings import WorkerSettings, load_worker_settings

log = logging.getLogger(__name__)

SWEEP_EVERY = timedelta(seconds=30)
RECONCILE_EVERY = timedelta(minutes=10)


def create_celery(settings: WorkerSettings | None = None) -> Celery:
    settings = settings or load_worker_settings()
    prepare_broker(settings)
    app = Celery("ribbit", broker=settings.effective_broker_url)
    app.conf.update(
        task_default_queue=QUEUE,
        # Jobs are idempotent (a claim in the store guards each run), so late acks are
        # safe: a worker killed mid-job leaves its message to be delivered again.
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        worker_prefetch_multiplier=1,
        task_ignore_result=True,
        # Only training rollouts (trainer/rl/remote.py) store results; the bot's jobs
        # report through the job store.
        result_backend=settings.effective_result_backend,
        result_expires=timedelta(days=1),
        task_time_limit=settings.effective_job_time_limit_s,
        task_soft_time_limit=max(settings.effective_job_time_limit_s - 60, 30),
        broker_transport_options=broker_transport_options(settings),
        broker_connection_retry_on_startup=True,
        worker_hijack_root_logger=False,
        beat_schedule={
            "ribbit-sweep": {"task": "ribbit.sweep", "schedule": SWEEP_EVERY},
            "ribbit-reconcile": {"task": "ribbit.reconcile", "schedule": RECONCILE_EVERY},
        },
        include=["worker.tasks"],
    )
    app.ribbit_settings = settings
    return app


@worker_ready.connect
def _reap_stale_sandboxes(sender: Any = None, **_kwargs: Any) -> None:
    """Sandboxes a crashed worker left behind are removed when a worker starts."""
    app = getattr(sender, "app", None)
    settings: WorkerSettings | None = getattr(app, "ribbit_settings", None)
    if settings is None:
        return
    try:
        from worker.sandbox import reap_stale

        removed = reap_stale(settings.sandbox)
    except Exception:
        log.warning("could not reap stale sandboxes", exc_info=True)
        return
    if removed:
        log.info("removed %d stale sandbox(es)", len(removed))


_heartbeat_stops: list[Any] = []


@worker_ready.connect
def _start_heartbeat(sender: Any = None, **_kwargs: Any) -> None:
    """The worker's own heartbeat row (bot.worker_heartbeats), job or no job."""
    settings: WorkerSettings | None = getattr(getattr(sender, "app", None), "ribbit_settings", None)
    if settings is None:
        return
    from bot import worker_heartbeats
    from bot.runtime import open_database

    name = str(getattr(sender, "hostname", None) or socket.gethostname())
    try:
        # A database of its own, not runtime_for's: in the prefork pool's parent, a Runtime
        # would be inherited, pooled connections and all, by children forked later.
        db = open_database(settings)
        _heartbeat_stops.append(
            worker_heartbeats.start_beating(db, name, settings.notify.worker_heartbeat_s)
        )
    except Exception:
        log.exception("worker heartbeat not started; this worker's death would go unnoticed")


@worker_shutdown.connect
def _stop_heartbeat(**_kwargs: Any) -> None:
    while _heartbeat_stops:
        _heartbeat_stops.pop()()


_exporter_stops: list[Any] = []


@worker_ready.connect
def _start_metrics(sender: Any = None, **_kwargs: Any) -> None:
    """The worker's /metrics, served by the main process for its whole pool."""
    settings: WorkerSettings | None = getattr(getattr(sender, "app", None), "ribbit_settings", None)
    if settings is None or settings.metrics.worker_port is None:
        return
    from worker.metrics import start_exporter

    try:
        stop = start_exporter(settings)
    except OSError:
        log.exception("worker metrics: cannot listen on port %d", settings.metrics.worker_port)
        return
    if stop is not None:
        _exporter_stops.append(stop)


@worker_shutdown.connect
def _stop_metrics(**_kwargs: Any) -> None:
    while _exporter_stops:
        _exporter_stops.pop()()
    from worker.metrics import cleanup

    cleanup()


@worker_process_shutdown.connect
def _pool_process_exited(pid: int | None = None, **_kwargs: Any) -> None:
    from worker.metrics import process_exited

    if pid is not None:
        process_exited(pid)


_RUNTIME_LOCK = threading.Lock()


def runtime_for(app: Celery) -> Runtime[WorkerSettings]:
    """The process's runtime, built on first use (after fork, so each child has its own
    database connections)."""
    existing: Runtime[WorkerSettings] | None = getattr(app, "ribbit_runtime", None)
    if existing is not None:
        return existing
    # A thread pool's first tasks arrive together: one runtime, built once.
    with _RUNTIME_LOCK:
        existing = getattr(app, "ribbit_runtime", None)
        if existing is None:
            settings: WorkerSettings = (
                getattr(app, "ribbit_settings", None) or load_worker_settings()
            )
            existing = Runtime.open(settings)
            app.ribbit_runtime = existing
    return existing


def __getattr__(name: str) -> Any:
    # `celery -A worker.celery_app` looks up `app`/`celery`; build it lazily from the env.
    if name in {"app", "celery"}:
        app = create_celery()
        globals()[name] = app
        return app
    raise AttributeError(name)
