"""Intake is one transaction: the delivery record and its jobs commit together or not at
all, on SQLite (the embedded default) and PostgreSQL, so a failed intake leaves nothing
that would make the forge's redelivery look like a duplicate."""

from __future__ import annotations

import json
from typing import Any

import pytest
from sqlalchemy import create_engine, text

from tests.conftest import GITHUB_SECRET, github_headers, load_payload

pytestmark = pytest.mark.integration


@pytest.fixture(params=["sqlite", "postgres"])
def db_settings(request: pytest.FixtureRequest, tmp_path: Any) -> Any:
    from bot.settings import load_settings

    url = None
    if request.param == "postgres":
        url = request.getfixturevalue("postgres_url")
        engine = create_engine(url)
        with engine.begin() as conn:
            conn.execute(text("DROP SCHEMA public CASCADE; CREATE SCHEMA public"))
        engine.dispose()
    return load_settings(
        data_dir=tmp_path / "data", database_url=url, github={"webhook_secret": GITHUB_SECRET}
    )


def _labelled() -> bytes:
    payload = load_payload("github", "issues.labeled")
    payload["label"]["name"] = "ribbit"
    return json.dumps(payload).encode()


def test_failed_intake_leaves_no_delivery_and_redelivery_creates_the_job(
    db_settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from bot import create_app
    from bot.store.models import Delivery, Job
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
        assert s.query(Delivery).count() == 0  # the savepoint did not commit on its own
        assert s.query(Job).count() == 0
    monkeypatch.setattr(store, "create", real_create)
    again = app.test_client().post("/webhooks/github", data=body, headers=headers)
    assert again.status_code == 202 and again.get_json()["status"] == "accepted"
    assert dispatcher.sent == [again.get_json()["job_id"]]
    app.extensions["ribbit"].db.dispose()
