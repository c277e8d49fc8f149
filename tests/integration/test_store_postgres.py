"""The store on PostgreSQL (the deploy database): migrations, the webhook path, the
one-active-job constraint and serialised claims, the same code as on SQLite."""

from __future__ import annotations

import json
import threading
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import create_engine, text

from tests.support import GITHUB_SECRET, HeldLead, github_headers, load_payload

pytestmark = pytest.mark.integration


@pytest.fixture
def pg_settings(postgres_url: str, tmp_path: Any) -> Any:
    from worker.settings import load_worker_settings

    engine = create_engine(postgres_url)
    with engine.begin() as conn:  # a clean schema per test
        conn.execute(text("DROP SCHEMA public CASCADE; CREATE SCHEMA public"))
    engine.dispose()
    return load_worker_settings(
        data_dir=tmp_path, database_url=postgres_url, github={"webhook_secret": GITHUB_SECRET}
    )


@pytest.fixture
def pg_upgraded(pg_settings: Any) -> Any:
    """The clean schema brought to head, as `ribbit db upgrade` does before a deployment
    starts: on PostgreSQL no other process migrates."""
    from bot.runtime import upgrade_database

    upgrade_database(pg_settings)
    return pg_settings


def test_processes_refuse_a_schema_behind_theirs_on_postgres(pg_settings: Any) -> None:
    """No auto-upgrade on PostgreSQL by default: the web app and a worker's runtime stop,
    saying what to run, and leave the database as they found it."""
    from bot.runtime import Runtime, SchemaNotCurrent, upgrade_database
    from bot.store.db import head_revision
    from bot.web import create_app
    from tests.fakes import RecordingDispatcher

    assert pg_settings.effective_database_auto_upgrade is False
    with pytest.raises(SchemaNotCurrent, match=r"has no schema yet.*run `ribbit db upgrade`"):
        create_app(pg_settings, dispatcher=RecordingDispatcher())
    with pytest.raises(SchemaNotCurrent, match=r"postgresql\+psycopg://ribbit@127\.0\.0\.1"):
        Runtime.open(pg_settings)
    engine = create_engine(pg_settings.database_url)
    with engine.connect() as conn:
        assert conn.execute(text("SELECT to_regclass('public.alembic_version')")).scalar() is None
    engine.dispose()
    assert upgrade_database(pg_settings) == head_revision()
    Runtime.open(pg_settings).close()


def test_webhook_path_on_postgres(pg_upgraded: Any) -> None:
    from bot.web import create_app
    from tests.fakes import RecordingDispatcher

    dispatcher = RecordingDispatcher()
    app = create_app(pg_upgraded, dispatcher=dispatcher)
    client = app.test_client()
    payload = load_payload("github", "issues.labeled")
    payload["label"]["name"] = "ribbit"
    body = json.dumps(payload).encode()
    first = client.post(
        "/webhooks/github", data=body, headers=github_headers(body, "issues", "pg-1")
    )
    again = client.post(
        "/webhooks/github", data=body, headers=github_headers(body, "issues", "pg-1")
    )
    payload["issue"]["updated_at"] = "2030-01-01T00:00:00Z"  # a new event, not a replay
    body2 = json.dumps(payload).encode()
    other = client.post(
        "/webhooks/github", data=body2, headers=github_headers(body2, "issues", "pg-2")
    )
    replay = client.post(
        "/webhooks/github", data=body, headers=github_headers(body, "issues", "pg-3")
    )
    assert replay.status_code == 200 and replay.get_json()["status"] == "duplicate"
    assert first.status_code == 202 and first.get_json()["status"] == "accepted"
    assert again.get_json()["status"] == "duplicate"
    assert other.get_json()["status"] == "ignored"  # the issue already has an active job
    store = app.extensions["ribbit"].store
    app.extensions["ribbit"].intake.flush()
    assert [j.id for j in store.list()] == [first.get_json()["job_id"]] == dispatcher.sent
    assert client.get("/healthz").get_json()["checks"]["database"]["ok"]
    app.extensions["ribbit"].close()


def test_concurrent_claims_hold_the_limit_on_postgres(pg_upgraded: Any) -> None:
    from bot.runtime import Runtime
    from bot.store.jobs import JobSpec, Limits

    rt = Runtime.open(pg_upgraded)
    ids = []
    with rt.db.session() as s:
        for n in range(10):
            job = rt.store.create(
                s, JobSpec(kind="solve", forge="github", repo=f"o/r{n}", issue_number=1)
            )
            assert job is not None
            ids.append(job.id)
    limits = Limits(max_concurrent=3, max_concurrent_per_repo=3)
    outcomes: list[str] = []
    lock = threading.Lock()

    def claim(job_id: str) -> None:
        result = rt.store.claim(job_id, limits, stale_after=timedelta(minutes=1))
        with lock:
            outcomes.append(result)

    threads = [threading.Thread(target=claim, args=(i,)) for i in ids]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert outcomes.count("claimed") == 3
    assert rt.store.count_by_state() == {"running": 3, "queued": 7}
    rt.db.dispose()


def test_migrations_wait_for_each_other(pg_settings: Any) -> None:
    """Processes starting together used to race to create the schema; a migration now
    waits on an advisory lock, so the second finds the first's work done."""
    from bot.store.db import Database

    holder = create_engine(pg_settings.database_url)
    db = Database(pg_settings.database_url)
    errors: list[BaseException] = []

    def migrate() -> None:
        try:
            db.migrate()
        except BaseException as exc:  # surfaced in the test thread below
            errors.append(exc)

    with holder.connect() as conn:
        conn.execute(text("SELECT pg_advisory_lock(727466)"))
        worker = threading.Thread(target=migrate)
        worker.start()
        # Wait for the event (the migration queued on the lock), not for a time.
        while not conn.execute(
            text("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted")
        ).scalar():
            assert worker.is_alive(), errors
        assert conn.execute(text("SELECT to_regclass('public.alembic_version')")).scalar() is None
        conn.execute(text("SELECT pg_advisory_unlock(727466)"))
        conn.commit()
        worker.join()
    assert errors == []
    Database(pg_settings.database_url).migrate()  # a second process: nothing left to do
    with holder.connect() as conn:
        assert conn.execute(text("SELECT version_num FROM alembic_version")).scalar() == "0019"
    holder.dispose()
    db.dispose()


def _kill_other_connections(url: str) -> int:
    """What a PostgreSQL restart or failover does to a live app's pooled connections."""
    engine = create_engine(url)
    try:
        with engine.begin() as conn:
            return len(
                conn.execute(
                    text(
                        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                        "WHERE datname = current_database() AND pid <> pg_backend_pid()"
                    )
                ).all()
            )
    finally:
        engine.dispose()


def test_webhooks_survive_lost_database_connections(pg_upgraded: Any) -> None:
    """The engine does not ping before each transaction: a webhook whose pooled connection
    died is re-run once on a new one, not answered 503, and its job is still sent."""
    from bot.web import create_app
    from tests.fakes import RecordingDispatcher

    dispatcher = RecordingDispatcher()
    app = create_app(pg_upgraded, dispatcher=dispatcher)
    svc = app.extensions["ribbit"]
    client = app.test_client()
    payload = load_payload("github", "issues.labeled")
    payload["label"]["name"] = "ribbit"
    answers = []
    for n in (1, 2, 3):
        payload["issue"]["number"] = n
        body = json.dumps(payload).encode()
        answers.append(
            client.post(
                "/webhooks/github", data=body, headers=github_headers(body, "issues", f"lost-{n}")
            )
        )
        svc.intake.flush()  # the sender's connection is pooled too, and must die with the rest
        if n < 3:
            assert _kill_other_connections(pg_upgraded.effective_database_url) >= 1
    assert [a.status_code for a in answers] == [202, 202, 202]
    assert [a.get_json()["status"] for a in answers] == ["accepted"] * 3
    job_ids = [a.get_json()["job_id"] for a in answers]
    assert sorted(j.id for j in svc.store.list()) == sorted(job_ids)
    assert dispatcher.sent == job_ids
    assert all(j.dispatched for j in svc.store.list())
    svc.close()


def test_webhooks_that_arrive_together_share_a_transaction_on_postgres(pg_upgraded: Any) -> None:
    """Group commit on PostgreSQL: webhooks queued behind a running intake transaction
    commit together, and each is decided as if alone: a later label on an issue sees the
    earlier one's job (in the same transaction) and is ignored, a duplicate delivery keeps
    nothing, and the others keep their jobs."""
    from bot.web import create_app
    from tests.fakes import RecordingDispatcher

    dispatcher = RecordingDispatcher()
    app = create_app(pg_upgraded, dispatcher=dispatcher)
    svc = app.extensions["ribbit"]
    lead = HeldLead(svc.intake.commits)
    payload = load_payload("github", "issues.labeled")
    payload["label"]["name"] = "ribbit"
    deliveries = [("pg-1", 1), ("pg-2", 2), ("pg-1", 1), ("pg-3", 1), ("pg-4", 4)]
    answers: dict[int, dict[str, Any]] = {}

    def deliver(index: int, delivery: str, issue: int) -> None:
        # Distinct bodies (a repeated body is a replay), except for the repeated delivery.
        stamp = f"2030-01-{delivery[-1]}{issue}T00:00:00Z"
        issue_payload = dict(payload["issue"], number=issue, updated_at=stamp)
        body = json.dumps(dict(payload, issue=issue_payload)).encode()
        resp = app.test_client().post(
            "/webhooks/github", data=body, headers=github_headers(body, "issues", delivery)
        )
        answers[index] = resp.get_json()

    threads = [
        threading.Thread(target=deliver, args=(i, d, n)) for i, (d, n) in enumerate(deliveries)
    ]
    for t in threads:
        t.start()
    lead.wait_queued(len(deliveries))
    lead.release()
    for t in threads:
        t.join(30)
    statuses = {i: a["status"] for i, a in answers.items()}
    # Issue 1, three deliveries in whatever order they queued: one job; the repeated
    # delivery id is a duplicate; the other is ignored, the issue having its job from
    # earlier in the same transaction.
    assert sorted(statuses[i] for i in (0, 2, 3)) == ["accepted", "duplicate", "ignored"]
    assert "duplicate" in (statuses[0], statuses[2])
    assert statuses[1] == statuses[4] == "accepted"
    jobs = svc.store.list()
    assert sorted(j.issue_number or 0 for j in jobs) == [1, 2, 4]
    # The four delivery rows kept came from at most two transactions, not four: the batch
    # met the repeated delivery and rolled back; that delivery ran alone (kept if its
    # twin had been ahead of it in the batch, which then became the duplicate), and the
    # rest went in together.
    engine = create_engine(pg_upgraded.effective_database_url)
    with engine.connect() as conn:
        writers = conn.execute(text("SELECT DISTINCT xmin::text FROM deliveries")).all()
    engine.dispose()
    assert len(writers) <= 2
    svc.intake.flush()
    assert sorted(dispatcher.sent) == sorted(j.id for j in jobs)
    svc.close()
