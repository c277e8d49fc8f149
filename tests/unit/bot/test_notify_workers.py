"""A worker that stops heartbeating (job or no job) is announced once per incident, and
once more when it beats again; a worker stopped cleanly is no incident. Against a real
HTTP receiver; heartbeats are aged in the store, never waited for."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import update

from bot import worker_heartbeats
from bot.notify import check_and_notify, start_watch
from bot.settings import load_settings
from bot.store.db import Database
from bot.store.jobs import JobStore
from bot.store.tables import utcnow
from bot.worker_heartbeats import WorkerHeartbeat
from tests.plugins.notify import NotifyReceiver

W = "celery@node-1"


@pytest.fixture
def store(tmp_path: Path) -> Iterator[JobStore]:
    db = Database(f"sqlite:///{tmp_path / 'ribbit.db'}")
    db.migrate()
    yield JobStore(db)
    db.dispose()


def _settings(url: str, tmp_path: Any, **notify: Any) -> Any:
    return load_settings(
        data_dir=tmp_path / "data",
        notify={"webhook_url": url, "worker_down_after_s": 60, **notify},
    )


def _age(db: Database, name: str, seconds: float) -> None:
    with db.session() as session:
        session.execute(
            update(WorkerHeartbeat)
            .where(WorkerHeartbeat.name == name)
            .values(last_seen=utcnow() - timedelta(seconds=seconds))
        )


def test_a_silent_worker_is_announced_once_and_its_return_once(
    notify_receiver: tuple[str, NotifyReceiver], store: JobStore, tmp_path: Any
) -> None:
    url, got = notify_receiver
    settings = _settings(url, tmp_path)
    db = store.db
    worker_heartbeats.beat(db, W, started=True)
    worker_heartbeats.beat(db, "celery@node-2", started=True)
    assert check_and_notify(db, store, settings) == []  # both fresh

    _age(db, W, 61)
    sent = check_and_notify(db, store, settings)
    assert [n.key.split(":")[0] for n in sent] == ["worker-lost"]
    assert W in got.bodies[0]["text"] and "stopped heartbeating" in got.bodies[0]["text"]
    assert check_and_notify(db, store, settings) == []  # the same incident: said once

    worker_heartbeats.beat(db, W, started=True)  # the worker restarted
    back = check_and_notify(db, store, settings)
    assert len(back) == 1 and back[0].key.startswith(f"worker-back:{W}:")
    assert got.bodies[-1]["text"].startswith(f"Ribbit: worker {W} is back")
    assert check_and_notify(db, store, settings) == []
    assert len(got.bodies) == 2

    _age(db, W, 120)  # it dies again: a new incident
    again = check_and_notify(db, store, settings)
    assert len(again) == 1 and again[0].key.startswith(f"worker-lost:{W}:")
    assert again[0].key != sent[0].key


def test_a_worker_stopped_cleanly_is_no_incident(
    notify_receiver: tuple[str, NotifyReceiver], store: JobStore, tmp_path: Any
) -> None:
    url, got = notify_receiver
    settings = _settings(url, tmp_path)
    halt = worker_heartbeats.start_beating(store.db, W, every_s=3600)
    assert [w.name for w in worker_heartbeats.seen(store.db)] == [W]
    halt()
    assert worker_heartbeats.seen(store.db) == []
    assert check_and_notify(store.db, store, settings) == [] and got.bodies == []


def test_a_receiver_down_gets_the_incident_on_a_later_check(
    notify_receiver: tuple[str, NotifyReceiver], store: JobStore, tmp_path: Any
) -> None:
    url, got = notify_receiver
    settings = _settings(url, tmp_path)
    worker_heartbeats.beat(store.db, W, started=True)
    _age(store.db, W, 61)
    got.status = 503
    assert check_and_notify(store.db, store, settings) == []
    got.status = 200
    assert len(check_and_notify(store.db, store, settings)) == 1
    assert len(got.bodies) == 1


def test_the_watch_runs_only_with_a_webhook_and_an_interval(store: JobStore, tmp_path: Any) -> None:
    none = load_settings(data_dir=tmp_path / "data")
    assert start_watch(store.db, store, none) is None
    off = _settings("http://127.0.0.1:9/hook", tmp_path, check_interval_s=0)
    assert start_watch(store.db, store, off) is None
    on = _settings("http://127.0.0.1:9/hook", tmp_path, check_interval_s=3600)
    halt = start_watch(store.db, store, on)
    assert halt is not None
    halt()
