"""Intake is one transaction: the delivery record and its jobs commit together or not at
all, on SQLite (the embedded default) and PostgreSQL, so a failed intake leaves nothing
that would make the forge's redelivery look like a duplicate."""

from __future__ import annotations

import json
from typing import Any

import pytest
from sqlalchemy import create_engine, text

from tests.support import GITHUB_SECRET, github_headers, load_payload

pytestmark = pytest.mark.integration


@pytest.fixture(params=["sqlite", "postgres"])
def db_settings(request: pytest.FixtureRequest, tmp_path: Any) -> Any:
    from bot.runtime import upgrade_database
    from bot.settings import load_settings

    url = None
    if request.param == "postgres":
        url = request.getfixturevalue("postgres_url")
        engine = create_engine(url)
        with engine.begin() as conn:
            conn.execute(text("DROP SCHEMA public CASCADE; CREATE SCHEMA public"))
        engine.dispose()
    settings = load_settings(
        data_dir=tmp_path / "data", database_url=url, github={"webhook_secret": GITHUB_SECRET}
    )
    upgrade_database(settings)  # `ribbit db upgrade`, as a deployment runs it before starting
    return settings


def _labelled() -> bytes:
    payload = load_payload("github", "issues.labeled")
    payload["label"]["name"] = "ribbit"
    return json.dumps(payload).encode()


def test_failed_intake_leaves_no_delivery_and_redelivery_creates_the_job(
    db_settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from bot.store.tables import Delivery, Job
    from bot.web import create_app
    from tests.fakes import RecordingDispatcher

    dispatcher = RecordingDispatcher()
    app = create_app(db_settings, dispatcher=dispatcher)
    app.config["PROPAGATE_EXCEPTIONS"] = False
    store = app.extensions["ribbit"].store
    real_create = store.create

    def create_then_crash(session: Any, spec: Any, **kw: Any) -> Any:
        real_create(session, spec, **kw)
        raise RuntimeError("intake crashed after the job row was written")

    monkeypatch.setattr(store, "create", create_then_crash)
    body = _labelled()
    headers = github_headers(body, "issues", "atomic-1")
    first = app.test_client().post("/webhooks/github", data=body, headers=headers)
    assert first.status_code >= 500
    with store.db.session() as s:
        assert s.query(Delivery).count() == 0
        assert s.query(Job).count() == 0  # the job's savepoint did not commit on its own
        assert s.query(Job).count() == 0
    monkeypatch.setattr(store, "create", real_create)
    again = app.test_client().post("/webhooks/github", data=body, headers=headers)
    assert again.status_code == 202 and again.get_json()["status"] == "accepted"
    app.extensions["ribbit"].intake.flush()
    assert dispatcher.sent == [again.get_json()["job_id"]]
    app.extensions["ribbit"].close()


def test_a_second_active_job_for_an_issue_is_skipped_and_the_transaction_commits(
    db_settings: Any,
) -> None:
    """The active-job key is enforced by an insert that skips (no savepoint, no error): the
    second create answers None, and on PostgreSQL the transaction is not aborted."""
    from bot.store.db import Database
    from bot.store.jobs import JobSpec, JobStore
    from bot.store.tables import Job

    db = Database(db_settings.effective_database_url)
    db.migrate()
    store = JobStore(db)
    spec = JobSpec(kind="solve", forge="github", repo="o/r", issue_number=5)
    try:
        with db.session() as session:
            first = store.create(session, spec)
            assert first is not None
            assert store.create(session, spec) is None
            help_job = store.create(session, JobSpec(kind="help", forge="github", repo="o/r"))
            assert help_job is not None
        with db.session() as session:
            assert sorted(j.kind for j in session.query(Job).all()) == ["help", "solve"]
    finally:
        db.dispose()


def test_concurrent_redeliveries_make_one_job(db_settings: Any) -> None:
    """Eight threads deliver the same signed body at once, under one id and under new ids (a
    replay): exactly one is accepted, every other one is a duplicate, one job exists."""
    import threading

    from bot.web import create_app
    from tests.fakes import RecordingDispatcher

    app = create_app(db_settings, dispatcher=RecordingDispatcher())
    body = _labelled()
    start = threading.Barrier(8)
    answers: list[tuple[int, str]] = []
    lock = threading.Lock()

    def deliver(k: int) -> None:
        client = app.test_client()
        headers = github_headers(body, "issues", f"same-{k % 2}")
        start.wait(30)
        resp = client.post("/webhooks/github", data=body, headers=headers)
        with lock:
            answers.append((resp.status_code, resp.get_json()["status"]))

    threads = [threading.Thread(target=deliver, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    svc = app.extensions["ribbit"]
    try:
        assert sorted(answers) == [(200, "duplicate")] * 7 + [(202, "accepted")]
        assert len(svc.store.list()) == 1
    finally:
        svc.close()
