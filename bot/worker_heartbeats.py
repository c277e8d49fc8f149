"""Each worker's own heartbeat, apart from its jobs' heartbeats: a worker with no job
must be missed too when it dies.

A worker's main process refreshes its row every Settings.notify.worker_heartbeat_s
(worker.celery_app starts the thread when the worker is ready) and deletes it on a clean
shutdown, so a worker scaled down or redeployed is not an incident; one killed (SIGKILL,
a lost node, the OOM killer) leaves its row to age. bot.notify reads the rows: the web
process is what notices, since the sweep runs on the workers that may all be gone.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from sqlalchemy.exc import SQLAlchemyError

from bot.store.db import Database
from bot.store.heartbeats import HeartbeatStore, WorkerSeen
from bot.store.heartbeats import WorkerHeartbeat as WorkerHeartbeat  # the table, named here too

log = logging.getLogger(__name__)


def beat(db: Database, name: str, *, started: bool = False) -> None:
    """Record that ``name`` is alive now; ``started``: it has just (re)started."""
    HeartbeatStore(db).beat(name, started=started)


def forget(db: Database, name: str) -> None:
    """A clean shutdown: the worker is gone on purpose."""
    HeartbeatStore(db).forget(name)


def seen(db: Database) -> list[WorkerSeen]:
    return HeartbeatStore(db).seen()


def start_beating(db: Database, name: str, every_s: float) -> Callable[[], None]:
    """Beat now and then every ``every_s`` in a daemon thread; returns the clean stop
    (which also forgets the worker)."""
    stop = threading.Event()
    beat(db, name, started=True)

    def loop() -> None:
        while not stop.wait(every_s):
            try:
                beat(db, name)
            except SQLAlchemyError as exc:  # the database is away: the next beat may land
                log.warning("worker heartbeat not recorded: %s", exc)

    thread = threading.Thread(target=loop, name="ribbit-worker-heartbeat", daemon=True)
    thread.start()

    def halt() -> None:
        stop.set()
        thread.join(timeout=every_s + 5)
        try:
            forget(db, name)
        except SQLAlchemyError as exc:
            log.warning("worker heartbeat row not removed: %s", exc)

    return halt
