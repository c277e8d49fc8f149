"""Outbound notifications: tell a Slack-compatible webhook when something goes wrong.

check_and_notify() asks the stores about each condition and posts ``{"text": ...}`` once
per condition: the condition's key is inserted into notifications_sent
(bot/store/notifications.py) in the same transaction that posts, and the transaction is
kept only if the post succeeded, so a receiver that is down gets the message on a later
check instead of never.
Conditions and their keys (the key is what makes "once" precise):
- many failures in a repository: once per repository per window (windows aligned to
  the epoch, so two checks in one window agree on it);
- daily budget spent: once per repository per UTC day;
- worker down: once per running job whose heartbeat stopped;
- a worker silent (bot.worker_heartbeats; with or without a job): once per incident, the
  incident named by its last heartbeat, and once more when that worker beats again;
- model promoted: once per promotion.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import partial

import requests

from bot import worker_heartbeats
from bot.model_versions import ModelVersions
from bot.settings import Settings
from bot.store.db import Database
from bot.store.jobs import JobStore
from bot.store.notifications import NotificationStore
from bot.store.tables import utcnow

log = logging.getLogger(__name__)
POST_TIMEOUT_S = 10


@dataclass(frozen=True)
class Notice:
    key: str
    text: str


def _failing_repos(store: JobStore, settings: Settings, now: datetime) -> list[Notice]:
    window = timedelta(minutes=settings.notify.failure_window_minutes)
    bucket = int(now.timestamp() // window.total_seconds())
    minutes = settings.notify.failure_window_minutes
    return [
        Notice(
            f"failing:{r.forge}:{r.repo}:{bucket}",
            f"Ribbit: {r.jobs} jobs failed on {r.forge}:{r.repo} in the last {minutes} min",
        )
        for r in store.failed_by_repo(now - window)
        if r.jobs >= settings.notify.failure_threshold
    ]


def _budgets_spent(store: JobStore, settings: Settings, now: datetime) -> list[Notice]:
    budget = settings.admission.daily_jobs_per_repo
    day = now.date().isoformat()
    start = datetime(now.year, now.month, now.day, tzinfo=now.tzinfo)
    return [
        Notice(
            f"budget:{r.forge}:{r.repo}:{day}",
            f"Ribbit: the daily budget of {budget} jobs for {r.forge}:{r.repo} is spent ({day})",
        )
        for r in store.agent_jobs_by_repo(start)
        if budget > 0 and r.jobs >= budget
    ]


def _silent_workers(store: JobStore, settings: Settings) -> list[Notice]:
    silence = timedelta(minutes=settings.notify.worker_silence_minutes)
    return [
        Notice(
            f"worker-down:{job.id}",
            f"Ribbit: no heartbeat for {settings.notify.worker_silence_minutes} min from the "
            f"worker running job {job.id} ({job.forge}:{job.repo}); is the worker down?",
        )
        for job in store.stale_running(silence)
    ]


LOST, BACK = "worker-lost:", "worker-back:"


def _worker_incidents(db: Database, settings: Settings, now: datetime) -> list[Notice]:
    down_after = timedelta(seconds=settings.notify.worker_down_after_s)
    workers = {w.name: w for w in worker_heartbeats.seen(db)}
    # The last heartbeat names the incident: however many checks see the same silence,
    # it is one key, so one message; a worker that dies again later is a new incident.
    notices = [
        Notice(
            f"{LOST}{w.name}:{int(w.last_seen.timestamp())}",
            f"Ribbit: worker {w.name} stopped heartbeating (last seen "
            f"{w.last_seen:%Y-%m-%d %H:%M:%S} UTC, silent for over "
            f"{settings.notify.worker_down_after_s:g} s); is it down?",
        )
        for w in workers.values()
        if now - w.last_seen > down_after
    ]
    keys = NotificationStore(db).sent_keys(LOST, BACK)
    for key in sorted(k for k in keys if k.startswith(LOST)):
        name, _, stamp = key.removeprefix(LOST).rpartition(":")
        back = workers.get(name)
        if (
            f"{BACK}{name}:{stamp}" not in keys
            and back is not None
            and now - back.last_seen <= down_after
            and back.last_seen.timestamp() > int(stamp) + 1
        ):
            notices.append(
                Notice(
                    f"{BACK}{name}:{stamp}",
                    f"Ribbit: worker {name} is back (heartbeating again since "
                    f"{back.started_at:%Y-%m-%d %H:%M:%S} UTC)",
                )
            )
    return notices


def _promotions(versions: ModelVersions | None) -> list[Notice]:
    if versions is None:  # web-only install: no model registry here
        return []
    current = versions.serving()
    if current is None or current.promoted_at is None:
        return []
    when = current.promoted_at.isoformat()
    return [Notice(f"promoted:{current.name}:{when}", f"Ribbit: model {current.name} promoted")]


def pending_notices(
    db: Database, store: JobStore, settings: Settings, versions: ModelVersions | None = None
) -> list[Notice]:
    now = utcnow()
    return (
        _failing_repos(store, settings, now)
        + _budgets_spent(store, settings, now)
        + _silent_workers(store, settings)
        + _worker_incidents(db, settings, now)
        + _promotions(versions)
    )


def post(url: str, text: str) -> None:
    response = requests.post(url, json={"text": text}, timeout=POST_TIMEOUT_S)
    response.raise_for_status()


def check_and_notify(
    db: Database, store: JobStore, settings: Settings, versions: ModelVersions | None = None
) -> list[Notice]:
    """Post every condition not announced before; return what was sent. ``versions``: the
    model registry, for promotion notices (none where the trainer is not installed)."""
    if settings.notify.webhook_url is None:
        return []
    url = settings.notify.webhook_url.get_secret_value()
    sent: list[Notice] = []
    notifications = NotificationStore(db)
    for notice in pending_notices(db, store, settings, versions):
        try:
            send = partial(post, url, notice.text)
            if not notifications.send_once(notice.key, notice.text, send):
                continue
        except requests.RequestException as exc:
            log.warning("notification %s not delivered, will retry: %s", notice.key, exc)
            continue
        sent.append(notice)
    return sent


def start_watch(
    db: Database, store: JobStore, settings: Settings, versions: ModelVersions | None = None
) -> Callable[[], None] | None:
    """Check every Settings.notify.check_interval_s in a daemon thread of the web process,
    which lives when the workers (and the sweep they run) do not; returns its stop. None:
    no webhook, or checks left to `ribbit notify` alone. Several web processes may each
    run one: a condition's key lets only one of them post it."""
    every = settings.notify.check_interval_s
    if settings.notify.webhook_url is None or every <= 0:
        return None
    stop = threading.Event()

    def loop() -> None:
        while not stop.wait(every):
            try:
                check_and_notify(db, store, settings, versions)
            except Exception:  # the database away, a bug: the next check must still run
                log.exception("notification check failed")

    thread = threading.Thread(target=loop, name="ribbit-notify", daemon=True)
    thread.start()

    def halt() -> None:
        stop.set()
        thread.join(timeout=every + POST_TIMEOUT_S + 5)

    return halt
