"""The whole path: signed webhook -> store -> real Celery worker on a real broker -> state.

Runs against Redis (the production broker) and against the embedded SQLite
transport (the zero-config default), with the real worker in a thread.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.conftest import GITHUB_SECRET, github_headers, load_payload

pytestmark = pytest.mark.integration


def wait_for(predicate: Any, timeout: float = 30.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError("condition not met in time")


@pytest.fixture(params=["redis", "embedded"])
def broker_settings(request: pytest.FixtureRequest, tmp_path: Any) -> Any:
    from bot.settings import load_settings

    broker = request.getfixturevalue("redis_url") if request.param == "redis" else None
    return load_settings(
        data_dir=tmp_path / "data", broker_url=broker, github={"webhook_secret": GITHUB_SECRET}
    )


@pytest.fixture
def running_worker(broker_settings: Any) -> Iterator[Any]:
    from celery.contrib.testing.worker import start_worker

    from worker.celery_app import create_celery

    app = create_celery(broker_settings)
    with start_worker(
        app,
        pool="threads",
        concurrency=2,
        perform_ping_check=False,
        loglevel="WARNING",
        shutdown_timeout=20,
    ):
        yield app
    _runtime(app).db.dispose()


def test_webhook_to_worker_moves_the_job(
    broker_settings: Any, running_worker: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from bot import create_app
    from worker import jobs as jobs_mod

    ran: list[str] = []

    def fake_solve(ctx: Any) -> dict[str, Any]:
        ran.append(ctx.job.id)
        return {"note": "pipeline ran in the worker"}

    # The lifecycle is under test here, not the solve pipeline (tested end to end elsewhere).
    monkeypatch.setitem(jobs_mod.PIPELINES, "solve", fake_solve)
    app = create_app(broker_settings)  # real CeleryDispatcher to the same broker
    payload = load_payload("github", "issues.labeled")
    payload["label"]["name"] = "ribbit"
    body = json.dumps(payload).encode()
    resp = app.test_client().post(
        "/webhooks/github", data=body, headers=github_headers(body, "issues", "int-1")
    )
    assert resp.status_code == 202, resp.get_json()
    job_id = resp.get_json()["job_id"]
    store = app.extensions["ribbit"].store
    assert store.get(job_id).dispatched
    job = wait_for(lambda: (j := store.get(job_id)).state == "succeeded" and j)
    assert ran == [job_id]
    assert job.result == {"note": "pipeline ran in the worker"}
    app.extensions["ribbit"].db.dispose()


def test_broker_down_then_sweep_delivers(
    broker_settings: Any, running_worker: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from bot import create_app
    from tests.fakes import RecordingDispatcher
    from worker import jobs as jobs_mod
    from worker.maintenance import sweep

    monkeypatch.setitem(jobs_mod.PIPELINES, "solve", lambda ctx: {"ok": True})
    dead = RecordingDispatcher()
    dead.fail = True
    app = create_app(broker_settings, dispatcher=dead)
    payload = load_payload("github", "issues.labeled")
    payload["label"]["name"] = "ribbit"
    body = json.dumps(payload).encode()
    job_id = (
        app.test_client()
        .post("/webhooks/github", data=body, headers=github_headers(body, "issues", "int-2"))
        .get_json()["job_id"]
    )
    store = app.extensions["ribbit"].store
    assert not store.get(job_id).dispatched
    assert sweep(_runtime(running_worker))["dispatched"] == 1
    wait_for(lambda: store.get(job_id).state == "succeeded")
    app.extensions["ribbit"].db.dispose()


def _runtime(app: Any) -> Any:
    from worker.celery_app import runtime_for

    return runtime_for(app)
