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
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import DateTime, String, delete, select
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Mapped, mapped_column

from bot.store.db import Database
from bot.store.models import Base, utcnow

log = logging.getLogger(__name__)


class WorkerHeartbeat(Base):
    __tablename__ = "worker_heartbeats"

    name: Mapped[str] = mapped_column(String(255), primary_key=True)
    started_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    last_seen: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


@dataclass(frozen=True)
class WorkerSeen:
    name: str
    started_at: datetime
    last_seen: datetime


def _aware(value: datetime) -> datetime:
    # SQLite hands back naive datetimes even for timezone=True columns; they were stored UTC.
    return value if value.tzinfo else value.replace(tzinfo=utcnow().tzinfo)


def beat(db: Database, name: str, *, started: bool = False) -> None:
    """Record that ``name`` is alive now; ``started``: it has just (re)started."""
    now = utcnow()
    with db.session() as session:
        row = session.get(WorkerHeartbeat, name)
        if row is None:
            session.add(WorkerHeartbeat(name=name, started_at=now, last_seen=now))
        else:
            row.last_seen = now
            if started:
                row.started_at = now


def forget(db: Database, name: str) -> None:
    """A clean shutdown: the worker is gone on purpose."""
    with db.session() as session:
        session.execute(delete(WorkerHeartbeat).where(WorkerHeartbeat.name == name))


def seen(db: Database) -> list[WorkerSeen]:
    with db.session() as session:
        rows = session.scalars(select(WorkerHeartbeat).order_by(WorkerHeartbeat.name)).all()
        return [WorkerSeen(r.name, _aware(r.started_at), _aware(r.last_seen)) for r in rows]


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
