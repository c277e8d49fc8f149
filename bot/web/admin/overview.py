"""The health page's facts: queue depth, workers and what they run, the model in use.

Workers are asked through Celery's remote control with a short timeout, so a dead broker
or a silent worker costs the page at most that long and shows as "no workers answered".
"""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import asdict, dataclass, field
from datetime import timedelta
from typing import Any

from sqlalchemy.exc import SQLAlchemyError

from bot import worker_heartbeats
from bot.queue import client_celery
from bot.store.tables import utcnow
from bot.web.services import Services

log = logging.getLogger(__name__)
INSPECT_TIMEOUT_S = 1.0


@dataclass(frozen=True)
class WorkerState:
    name: str
    job_ids: list[str]


@dataclass(frozen=True)
class Heartbeat:
    """A worker's own heartbeat row (bot.worker_heartbeats): seen even where the broker
    cannot be asked (the embedded one), and kept after the worker died, marked silent."""

    name: str
    last_seen: str
    silent: bool


@dataclass(frozen=True)
class EmbeddedProcess:
    """`ribbit serve`'s embedded worker or beat (bot.supervisor): its pid and the countdown
    to its restart are left out, so the page refetches only when its state changes."""

    name: str
    state: str
    restarts: int
    last_exit: int | None


@dataclass(frozen=True)
class HealthSnapshot:
    queued: int
    held: int
    running: int
    paused: list[str]
    workers: list[WorkerState] | None  # None: the broker could not be asked
    model_version: str
    errors: list[str] = field(default_factory=list)
    heartbeats: list[Heartbeat] = field(default_factory=list)
    embedded: list[EmbeddedProcess] | None = None  # None: this web process runs none

    def version(self) -> str:
        """Changes whenever the rendered facts and workers would."""
        return hashlib.sha256(json.dumps(asdict(self)).encode()).hexdigest()[:16]


def _job_ids(tasks: list[dict[str, Any]]) -> list[str]:
    ids: list[str] = []
    for task in tasks:
        args = task.get("args") or []
        if isinstance(args, list | tuple) and args and isinstance(args[0], str):
            ids.append(args[0])
    return ids


def inspect_workers(svc: Services) -> list[WorkerState]:
    app = client_celery(svc.settings)
    active = app.control.inspect(timeout=INSPECT_TIMEOUT_S).active() or {}
    return [WorkerState(name, _job_ids(tasks or [])) for name, tasks in sorted(active.items())]


def _model_version(svc: Services) -> str:
    # `ribbit serve` builds WorkerSettings, which name the model; bot's Settings alone do not.
    configured = svc.settings.configured_model or "unknown model"
    if svc.model_versions is None:
        return f"{configured} (configured; no model registry in this process)"
    try:
        promoted = svc.model_versions.serving()
    except SQLAlchemyError:  # the trainer's tables not there yet: workers use the base too
        promoted = None
    return promoted.name if promoted is not None else f"{configured} (base)"


def _embedded(svc: Services) -> list[EmbeddedProcess] | None:
    if svc.embedded is None:
        return None
    return [
        EmbeddedProcess(s.name, s.state, s.restarts, s.last_exit) for s in svc.embedded.status()
    ]


def health_snapshot(svc: Services) -> HealthSnapshot:
    errors: list[str] = []
    counts = svc.store.active_counts()
    workers: list[WorkerState] | None
    try:
        workers = inspect_workers(svc)
    except Exception as exc:  # broker down: the page must still render
        log.warning("worker inspect failed: %s", exc)
        errors.append(f"could not ask the workers: {type(exc).__name__}")
        workers = None
    silence = timedelta(seconds=svc.settings.notify.worker_down_after_s)
    now = utcnow()
    heartbeats = [
        # Whole seconds: the page refetches only when a worker starts, stops or falls silent.
        Heartbeat(w.name, f"{w.last_seen:%Y-%m-%d %H:%M} UTC", now - w.last_seen > silence)
        for w in worker_heartbeats.seen(svc.db)
    ]
    return HealthSnapshot(
        queued=counts.queued,
        held=counts.held,
        running=counts.running,
        paused=svc.store.paused_scopes(),
        workers=workers,
        model_version=_model_version(svc),
        errors=errors,
        heartbeats=heartbeats,
        embedded=_embedded(svc),
    )
