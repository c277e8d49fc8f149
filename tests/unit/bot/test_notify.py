"""Notifications against a real HTTP receiver on 127.0.0.1: each condition is posted as
Slack-compatible JSON exactly once, and a receiver that was down gets it on the next check."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import update

from bot.notify import check_and_notify
from bot.settings import load_settings
from bot.store.db import Database
from bot.store.jobs import JobSpec, JobStore
from bot.store.tables import Job, utcnow
from tests.plugins.notify import NotifyReceiver


@pytest.fixture
def store(tmp_path: Path) -> Iterator[JobStore]:
    db = Database(f"sqlite:///{tmp_path / 'ribbit.db'}")
    db.migrate()
    yield JobStore(db)
    db.dispose()


def settings_for(url: str, tmp_path: Any, **admission: Any) -> Any:
    return load_settings(
        data_dir=tmp_path / "data",
        notify={"webhook_url": url, "failure_threshold": 3, "failure_window_minutes": 60},
        admission=admission or {},
    )


def add_jobs(store: JobStore, repo: str, n: int, state: str = "failed") -> list[str]:
    ids: list[str] = []
    for i in range(n):
        spec = JobSpec(kind="solve", forge="github", repo=repo, issue_number=100 + i)
        with store.db.session() as session:
            job = store.create(session, spec)
            assert job is not None
            ids.append(job.id)
        if state == "failed":
            store.transition(job.id, "failed", reason="tests failed")
    return ids


def test_repeated_failures_notify_once(
    notify_receiver: tuple[str, NotifyReceiver], store: JobStore, tmp_path: Any
) -> None:
    url, got = notify_receiver
    settings = settings_for(url, tmp_path)
    add_jobs(store, "acme/ok", 2)  # below the threshold
    add_jobs(store, "acme/broken", 3)
    check_and_notify(store.db, store, settings)
    check_and_notify(store.db, store, settings)
    assert got.texts == ["Ribbit: 3 jobs failed on github:acme/broken in the last 60 min"]
    assert all(set(b) == {"text"} for b in got.bodies)


def test_budget_spent_notifies_once_per_day(
    notify_receiver: tuple[str, NotifyReceiver], store: JobStore, tmp_path: Any
) -> None:
    url, got = notify_receiver
    settings = settings_for(url, tmp_path, daily_jobs_per_repo=2)
    add_jobs(store, "acme/busy", 2, state="queued")
    check_and_notify(store.db, store, settings)
    check_and_notify(store.db, store, settings)
    [text] = got.texts
    assert "daily budget of 2 jobs for github:acme/busy is spent" in text


def test_worker_without_heartbeat_notifies_once(
    notify_receiver: tuple[str, NotifyReceiver], store: JobStore, tmp_path: Any
) -> None:
    url, got = notify_receiver
    settings = settings_for(url, tmp_path)
    [job_id] = add_jobs(store, "acme/app", 1, state="queued")
    store.transition(job_id, "running")
    assert check_and_notify(store.db, store, settings) == []
    # The worker's last heartbeat was 20 minutes ago (set, not waited for).
    with store.db.session() as session:
        session.execute(
            update(Job).where(Job.id == job_id).values(updated_at=utcnow() - timedelta(minutes=20))
        )
    check_and_notify(store.db, store, settings)
    check_and_notify(store.db, store, settings)
    [text] = got.texts
    assert job_id in text and "worker down" in text


def test_model_promotion_notifies_once_per_promotion(
    notify_receiver: tuple[str, NotifyReceiver], store: JobStore, tmp_path: Any
) -> None:
    from trainer.registry import promote, register, registry_versions

    url, got = notify_receiver
    settings = settings_for(url, tmp_path)
    versions = registry_versions(store.db, settings)
    register(store.db, "ft-1", base_model="base", adapter_path=None, heldout_pass_rate=0.5)
    promote(store.db, "ft-1", force=True)  # the promotion rule is not what this tests
    check_and_notify(store.db, store, settings, versions)
    check_and_notify(store.db, store, settings, versions)
    assert got.texts == ["Ribbit: model ft-1 promoted"]


def test_receiver_down_gets_the_notice_on_the_next_check(
    notify_receiver: tuple[str, NotifyReceiver], store: JobStore, tmp_path: Any
) -> None:
    url, got = notify_receiver
    settings = settings_for(url, tmp_path)
    add_jobs(store, "acme/broken", 3)
    got.status = 503
    assert check_and_notify(store.db, store, settings) == []
    got.status = 200
    assert len(check_and_notify(store.db, store, settings)) == 1
    assert len(got.texts) == 1


def test_no_webhook_configured_sends_nothing(store: JobStore, tmp_path: Any) -> None:
    add_jobs(store, "acme/broken", 5)
    assert check_and_notify(store.db, store, load_settings(data_dir=tmp_path / "d")) == []


def test_cli_notify_posts_and_then_has_nothing_new(
    notify_receiver: tuple[str, NotifyReceiver], tmp_path: Any, monkeypatch: Any
) -> None:
    from click.testing import CliRunner

    from bot.cli import main

    url, got = notify_receiver
    monkeypatch.setenv("RIBBIT_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("RIBBIT_NOTIFY__WEBHOOK_URL", url)
    monkeypatch.setenv("RIBBIT_NOTIFY__FAILURE_THRESHOLD", "1")
    db = Database(load_settings(data_dir=tmp_path / "data").effective_database_url)
    db.migrate()
    add_jobs(JobStore(db), "acme/broken", 1)
    db.dispose()
    first = CliRunner().invoke(main, ["notify"])
    assert first.exit_code == 0, first.output
    assert "sent: Ribbit: 1 jobs failed on github:acme/broken" in first.output
    second = CliRunner().invoke(main, ["notify"])
    assert second.output.strip() == "nothing new to notify"
    assert len(got.bodies) == 1
