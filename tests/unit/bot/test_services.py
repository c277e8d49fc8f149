"""What Services.build wires for a web process, on a real SQLite database in a temporary
folder: one send path (the intake's queue is the services' queue, on the dispatcher
passed in), the optional trainer seams, and a close that hands the jobs still waiting
to the broker before it lets go of the database."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from flask import Flask

from bot.queue import CeleryDispatcher
from bot.store.jobs import JobSpec
from bot.store.tables import Job
from bot.web.services import Services, services
from tests.fakes import RecordingDispatcher
from worker.settings import WorkerSettings


@pytest.fixture
def svc(settings: WorkerSettings, dispatcher: RecordingDispatcher) -> Iterator[Services]:
    built = Services.build(settings, dispatcher)
    yield built
    built.close()


def queued_job(svc: Services, issue: int = 1) -> Job:
    spec = JobSpec(kind="solve", forge="github", repo="acme/app", issue_number=issue)
    with svc.db.session() as session:
        job = svc.store.create(session, spec)
        assert job is not None
    return job


def test_the_intake_and_the_dashboard_share_one_queue_on_the_given_dispatcher(
    svc: Services, dispatcher: RecordingDispatcher
) -> None:
    assert svc.queue is svc.intake.queue
    assert svc.queue.dispatcher is dispatcher
    assert svc.intake.store is svc.store and svc.queue.store is svc.store
    job = queued_job(svc)
    svc.queue.dispatch([job.id])
    assert dispatcher.sent == [job.id]


def test_without_a_dispatcher_jobs_go_to_celery_on_the_configured_broker(
    settings: WorkerSettings,
) -> None:
    built = Services.build(settings)
    try:
        assert isinstance(built.queue.dispatcher, CeleryDispatcher)
    finally:
        built.close()


def test_without_the_trainer_promotion_and_validation_are_unavailable(svc: Services) -> None:
    assert svc.model_versions is None and svc.env_validation is None


def test_the_trainer_seams_are_built_on_the_services_database_and_settings(
    settings: WorkerSettings, dispatcher: RecordingDispatcher
) -> None:
    calls: list[tuple[str, Any, Any]] = []
    versions, validator = object(), object()

    def model_versions(db: Any, s: Any) -> Any:
        calls.append(("versions", db, s))
        return versions

    def env_validator(db: Any, s: Any) -> Any:
        calls.append(("validator", db, s))
        return validator

    built = Services.build(settings, dispatcher, model_versions, env_validator)
    try:
        assert built.model_versions is versions
        assert built.env_validation is not None
        assert built.env_validation.validator is validator
        assert built.env_validation.db is built.db
        assert calls == [
            ("versions", built.db, settings),
            ("validator", built.db, settings),
        ]
    finally:
        built.close()


class OrderedDispatcher:
    """Writes each send into a log shared with the database's dispose."""

    def __init__(self, log: list[str]) -> None:
        self.log = log

    def dispatch(self, job: Job) -> None:
        self.log.append(f"sent {job.id}")


def test_close_sends_the_jobs_still_waiting_before_disposing_of_the_database(
    settings: WorkerSettings, monkeypatch: pytest.MonkeyPatch
) -> None:
    log: list[str] = []
    built = Services.build(settings, OrderedDispatcher(log))
    real_dispose = built.db.dispose

    def dispose() -> None:
        log.append("disposed")
        real_dispose()

    monkeypatch.setattr(built.db, "dispose", dispose)
    jobs = [queued_job(built, issue) for issue in (1, 2)]
    # As a webhook leaves them: committed, handed to the sender, which lingers for more.
    built.intake.sender.submit(jobs)
    built.close()
    assert log == [f"sent {jobs[0].id}", f"sent {jobs[1].id}", "disposed"]
    # Marked sent too, so the sweep will not send them a second time.
    assert [built.store.get(job.id).dispatched for job in jobs] == [True, True]
    built.db.dispose()


def test_init_app_makes_the_services_those_of_the_app(svc: Services) -> None:
    app = Flask(__name__)
    svc.init_app(app)
    with app.app_context():
        assert services() is svc
