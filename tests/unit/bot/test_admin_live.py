"""The jobs list's and health page's polling endpoints: a version that moves exactly when
the rendered fragment would, the fragment itself, and no answer without a session."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from flask import Flask

from bot.settings import load_settings
from bot.web import create_app
from bot.web.admin import overview as health_mod
from tests.fakes import RecordingDispatcher
from tests.plugins.admin import ADMIN_TOKEN, seed_jobs
from tests.support import GITHUB_SECRET

BEARER = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
RUNNING = f"{1:032x}"  # seed_jobs: job i is in STATES[i % 5]; 1 is running


@pytest.fixture
def app(
    tmp_path: Path, dispatcher: RecordingDispatcher, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Flask]:
    workers: list[health_mod.WorkerState] = []
    monkeypatch.setattr(health_mod, "inspect_workers", lambda _svc: list(workers))
    settings = load_settings(
        data_dir=tmp_path / "data",
        admin_token=ADMIN_TOKEN,
        github={"webhook_secret": GITHUB_SECRET},
    )
    app = create_app(settings, dispatcher=dispatcher)
    app.config["TEST_WORKERS"] = workers  # what the fake inspect reports; tests add to it
    seed_jobs(app.extensions["ribbit"].db, 10)
    yield app
    app.extensions["ribbit"].db.dispose()


def test_jobs_version_moves_with_a_state_change_and_respects_the_filter(app: Any) -> None:
    client = app.test_client()
    store = app.extensions["ribbit"].store
    first = client.get("/admin/live/jobs?state=running", headers=BEARER).get_json()
    assert first["total"] == 2
    again = client.get("/admin/live/jobs?state=running", headers=BEARER).get_json()
    assert again == first  # nothing changed: the page refetches nothing

    store.transition(RUNNING, "failed", reason="boom")
    after = client.get("/admin/live/jobs?state=running", headers=BEARER).get_json()
    assert after["total"] == 1 and after["version"] != first["version"]
    rows = client.get("/admin/jobs/rows?state=running", headers=BEARER).get_data(as_text=True)
    assert f'/admin/jobs/{RUNNING}"' not in rows and f'/admin/jobs/{6:032x}"' in rows
    failed = client.get("/admin/jobs/rows?state=failed", headers=BEARER).get_data(as_text=True)
    assert f'/admin/jobs/{RUNNING}"' in failed and "boom" in failed


def test_jobs_page_carries_its_filtered_polling_urls(app: Any) -> None:
    page = app.test_client().get("/admin/?state=failed&repo=acme/repo1", headers=BEARER)
    html = page.get_data(as_text=True)
    query = "page=1&amp;state=failed&amp;repo=acme/repo1"
    assert f'data-live-url="/admin/live/jobs?{query}"' in html
    assert f'data-fragment-url="/admin/jobs/rows?{query}"' in html
    assert "admin_live.js" in html


def test_health_json_and_fragment_follow_queue_and_workers(app: Any) -> None:
    client = app.test_client()
    before = client.get("/admin/live/health", headers=BEARER).get_json()
    assert before["queued"] == 2 and before["workers"] == []
    app.config["TEST_WORKERS"].append(health_mod.WorkerState("celery@w1", [RUNNING]))
    after = client.get("/admin/live/health", headers=BEARER).get_json()
    assert after["workers"] == [{"name": "celery@w1", "job_ids": [RUNNING]}]
    assert after["version"] != before["version"]
    fragment = client.get("/admin/health/live", headers=BEARER).get_data(as_text=True)
    assert "celery@w1" in fragment and 'id="queue-depth">2<' in fragment


def test_health_shows_the_embedded_processes_and_moves_when_one_restarts(app: Any) -> None:
    from bot.supervisor import ChildStatus

    client = app.test_client()
    assert client.get("/admin/live/health", headers=BEARER).get_json()["embedded"] is None
    statuses = [ChildStatus("worker", "running", 10, 0, None)]

    class Embedded:
        def status(self) -> list[ChildStatus]:
            return list(statuses)

    app.extensions["ribbit"].watch_embedded(Embedded())
    before = client.get("/admin/live/health", headers=BEARER).get_json()
    assert before["embedded"] == [
        {"name": "worker", "state": "running", "restarts": 0, "last_exit": None}
    ]
    statuses[0] = ChildStatus("worker", "restarting", None, 0, -9)
    after = client.get("/admin/live/health", headers=BEARER).get_json()
    assert after["version"] != before["version"]
    fragment = client.get("/admin/health/live", headers=BEARER).get_data(as_text=True)
    assert 'data-process="worker"' in fragment
    assert "restarting" in fragment and "killed by signal 9" in fragment


@pytest.mark.parametrize("path", ["/admin/live/jobs", "/admin/jobs/rows", "/admin/live/health"])
def test_live_endpoints_need_the_admin(app: Any, path: str) -> None:
    resp = app.test_client().get(path, headers={"Accept": "application/json"})
    assert resp.status_code == 401
    wrong = app.test_client().get(path, headers={"Authorization": "Bearer nope"})
    assert wrong.status_code == 401


def test_health_shows_worker_heartbeats_and_a_silent_one(app: Any) -> None:
    from datetime import timedelta

    from sqlalchemy import update

    from bot import worker_heartbeats
    from bot.store.tables import utcnow
    from bot.worker_heartbeats import WorkerHeartbeat

    db = app.extensions["ribbit"].db
    client = app.test_client()
    worker_heartbeats.beat(db, "celery@alive", started=True)
    worker_heartbeats.beat(db, "celery@dead", started=True)
    fresh = client.get("/admin/live/health", headers=BEARER).get_json()
    assert [(h["name"], h["silent"]) for h in fresh["heartbeats"]] == [
        ("celery@alive", False),
        ("celery@dead", False),
    ]
    with db.session() as session:
        session.execute(
            update(WorkerHeartbeat)
            .where(WorkerHeartbeat.name == "celery@dead")
            .values(last_seen=utcnow() - timedelta(hours=1))
        )
    after = client.get("/admin/live/health", headers=BEARER).get_json()
    assert [h["silent"] for h in after["heartbeats"]] == [False, True]
    assert after["version"] != fresh["version"]
    fragment = client.get("/admin/health/live", headers=BEARER).get_data(as_text=True)
    assert "celery@dead" in fragment and ">silent<" in fragment
