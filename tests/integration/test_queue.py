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

from tests.support import GITHUB_SECRET, github_headers, load_payload

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
    from worker.settings import load_worker_settings

    broker = request.getfixturevalue("redis_url") if request.param == "redis" else None
    return load_worker_settings(
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
    from bot.web import create_app
    from tests.fakes import FakeResult
    from worker import jobs as jobs_mod

    ran: list[str] = []

    def fake_solve(ctx: Any) -> FakeResult:
        ran.append(ctx.job.id)
        return FakeResult({"note": "pipeline ran in the worker"})

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
    app.extensions["ribbit"].intake.flush()  # sent after the answer, by the sender thread
    assert store.get(job_id).dispatched
    job = wait_for(lambda: (j := store.get(job_id)).state == "succeeded" and j)
    assert ran == [job_id]
    assert job.result == {"note": "pipeline ran in the worker"}
    app.extensions["ribbit"].close()


def test_broker_down_then_sweep_delivers(
    broker_settings: Any, running_worker: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from bot.web import create_app
    from tests.fakes import FakeResult, RecordingDispatcher
    from worker import jobs as jobs_mod
    from worker.maintenance import sweep

    monkeypatch.setitem(jobs_mod.PIPELINES, "solve", lambda ctx: FakeResult({"ok": True}))
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
    app.extensions["ribbit"].intake.flush()
    assert not store.get(job_id).dispatched
    assert sweep(_runtime(running_worker)).dispatched == 1
    wait_for(lambda: store.get(job_id).state == "succeeded")
    app.extensions["ribbit"].close()


def _runtime(app: Any) -> Any:
    from worker.celery_app import runtime_for

    return runtime_for(app)


def test_deferred_job_is_re_sent_once_by_the_sweep_alone(
    broker_settings: Any, running_worker: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A forge outage defers the job. It used to be re-sent twice: by its task's own retry
    and by the sweep (which saw it queued and undispatched), so chains multiplied."""
    from celery.signals import task_prerun, task_retry
    from sqlalchemy import update

    from bot.forges.base import ForgeUnavailable
    from bot.store.tables import Job, utcnow
    from bot.web import create_app
    from tests.fakes import FakeResult
    from worker import jobs as jobs_mod
    from worker.maintenance import sweep

    calls: list[str] = []

    def outage_then_fine(ctx: Any) -> Any:
        calls.append(ctx.job.id)
        if len(calls) == 1:
            raise ForgeUnavailable("rate limited", retry_after=3600)
        return FakeResult({"ok": True})

    runs: list[Any] = []
    retries: list[Any] = []

    def on_prerun(sender: Any = None, kwargs: Any = None, **_: Any) -> None:
        runs.append(dict(kwargs or {}))

    def on_retry(**kw: Any) -> None:
        retries.append(kw)

    task_prerun.connect(on_prerun, weak=False)
    task_retry.connect(on_retry, weak=False)
    try:
        monkeypatch.setitem(jobs_mod.PIPELINES, "solve", outage_then_fine)
        app = create_app(broker_settings)
        payload = load_payload("github", "issues.labeled")
        payload["label"]["name"] = "ribbit"
        body = json.dumps(payload).encode()
        job_id = (
            app.test_client()
            .post("/webhooks/github", data=body, headers=github_headers(body, "issues", "int-3"))
            .get_json()["job_id"]
        )
        store = app.extensions["ribbit"].store
        wait_for(lambda: (j := store.get(job_id)).state == "queued" and j.not_before)
        runtime = _runtime(running_worker)
        # Not due: nothing re-sends it, neither the sweep nor a retry of the task.
        assert sweep(runtime).dispatched == 0
        assert retries == []
        with store.db.session() as s:  # the outage's wait is over
            s.execute(update(Job).where(Job.id == job_id).values(not_before=utcnow()))
        assert sweep(runtime).dispatched == 1
        assert sweep(runtime).dispatched == 0
        wait_for(lambda: store.get(job_id).state == "succeeded")
        assert calls == [job_id, job_id]
        assert retries == []
        seqs = [r["seq"] for r in runs if r.get("job_id") == job_id]
        assert seqs == [1, store.get(job_id).dispatch_seq]
        app.extensions["ribbit"].db.dispose()
    finally:
        task_prerun.disconnect(on_prerun)
        task_retry.disconnect(on_retry)
