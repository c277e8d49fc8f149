"""The web process hands a batch of jobs to the embedded broker (SQLite) in one
transaction: every job of the batch is in the broker and marked sent, or none is and the
sweep sends them all; the worker's own transport reads what the batching channel wrote."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from kombu import Connection

from bot.queue import QUEUE, TASK_FOR_KIND, CeleryDispatcher, JobQueue, client_celery
from bot.store.db import Database
from bot.store.jobs import JobSpec, JobStore
from bot.store.tables import Job
from tests.support import github_headers, load_payload
from worker.settings import WorkerSettings


@pytest.fixture
def store(settings: WorkerSettings) -> Iterator[JobStore]:
    db = Database(settings.effective_database_url)
    db.migrate()
    yield JobStore(db)
    db.dispose()


def new_jobs(store: JobStore, n: int) -> list[Job]:
    with store.db.session() as session:
        jobs = [
            store.create(
                session,
                JobSpec(kind="solve", forge="github", repo=f"o/r{i}", issue_number=i, actor="a"),
            )
            for i in range(n)
        ]
    assert all(job is not None for job in jobs)
    return [job for job in jobs if job is not None]


def broker_messages(settings: Any) -> list[dict[str, Any]]:
    """What a worker reads, through kombu's own SQLAlchemy transport ("sqla+" URL)."""
    out = []
    with Connection(settings.effective_broker_url) as conn:
        while (message := conn.default_channel.basic_get(QUEUE, no_ack=True)) is not None:
            headers = message.headers
            out.append({"task": headers["task"], "kwargs": message.decode()[1], "headers": headers})
    return out


def test_a_batch_reaches_the_embedded_broker_whole_and_readable_by_the_worker(
    settings: Any, store: JobStore
) -> None:
    assert settings.uses_embedded_broker
    jobs = new_jobs(store, 5)
    app = client_celery(settings)
    with app.connection_for_write() as conn:  # the batching channel, not kombu's own
        assert type(conn.transport).__module__ == "bot.queue"
    JobQueue(store, CeleryDispatcher(app)).send(jobs)
    assert [(m["task"], m["kwargs"]) for m in broker_messages(settings)] == [
        (TASK_FOR_KIND["solve"], {"job_id": job.id, "seq": job.dispatch_seq}) for job in jobs
    ]
    assert all(store.get(job.id).dispatched for job in jobs)
    assert store.take_pending_dispatch() == []


def test_a_batch_that_fails_midway_leaves_nothing_sent_and_all_of_it_to_the_sweep(
    settings: Any, store: JobStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    jobs = new_jobs(store, 5)
    dispatcher = CeleryDispatcher(client_celery(settings))
    real_send = CeleryDispatcher._send
    calls: list[str] = []

    def dies_on_the_third(self: CeleryDispatcher, job: Job, producer: Any) -> None:
        calls.append(job.id)
        if len(calls) == 3:
            raise ConnectionError("sender killed mid-batch")
        real_send(self, job, producer)

    monkeypatch.setattr(CeleryDispatcher, "_send", dies_on_the_third)
    JobQueue(store, dispatcher).send(jobs)
    assert len(calls) == 3
    # The two messages written before the failure were rolled back with the batch.
    assert broker_messages(settings) == []
    assert not any(store.get(job.id).dispatched for job in jobs)

    monkeypatch.setattr(CeleryDispatcher, "_send", real_send)
    queue = JobQueue(store, dispatcher)
    assert queue.dispatch_pending() == 5  # the sweep, the one re-sender
    sent = broker_messages(settings)
    assert sorted(m["kwargs"]["job_id"] for m in sent) == sorted(job.id for job in jobs)
    assert all(m["kwargs"]["seq"] == 2 for m in sent)  # the sweep's fresh sequence number
    assert queue.dispatch_pending() == 0


def test_a_single_job_and_a_batch_write_the_same_message(settings: Any, store: JobStore) -> None:
    one, *two = new_jobs(store, 3)
    dispatcher = CeleryDispatcher(client_celery(settings))
    dispatcher.dispatch(one)
    dispatcher.dispatch_all(two)
    sent = broker_messages(settings)
    assert [m["kwargs"]["job_id"] for m in sent] == [one.id, *(job.id for job in two)]
    assert len({frozenset(m["headers"]) for m in sent}) == 1
    for m in sent:  # what the worker logs for the task
        assert m["headers"]["argsrepr"] == "()"
        assert m["headers"]["kwargsrepr"] == repr(m["kwargs"])


def test_batches_after_the_first_and_a_batch_of_one_reach_the_worker(
    settings: Any, store: JobStore
) -> None:
    """The channel reads its queue's row once and inserts later batches with its id; one
    job goes through the batch path too."""
    jobs = new_jobs(store, 5)
    first, second, alone = jobs[:2], jobs[2:4], jobs[4:]
    queue = JobQueue(store, CeleryDispatcher(client_celery(settings)))
    for batch in (first, second, alone):
        queue.send(batch)
    sent = broker_messages(settings)
    assert [m["kwargs"]["job_id"] for m in sent] == [job.id for job in (*first, *second, *alone)]
    assert all(store.get(job.id).dispatched for job in (*first, *second, *alone))


class NeverSends:
    """A web process that dies after its answer, before its sender hands the job over: the
    send never returns (until the test ends, when it fails as a dead process's would)."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()

    def dispatch(self, job: Job) -> None:
        self.entered.set()
        self.release.wait(30)
        raise ConnectionError("the process is gone")


def test_a_job_committed_but_never_handed_over_is_sent_once_by_the_sweep(settings: Any) -> None:
    from bot.web import create_app

    dead = NeverSends()
    app = create_app(settings, dispatcher=dead)
    svc = app.extensions["ribbit"]
    try:
        payload = load_payload("github", "issues.labeled")
        payload["label"]["name"] = "ribbit"
        body = json.dumps(payload).encode()
        resp = app.test_client().post(
            "/webhooks/github", data=body, headers=github_headers(body, "issues", "crash-1")
        )
        assert resp.status_code == 202
        job_id = resp.get_json()["job_id"]
        assert dead.entered.wait(30)  # answered and committed; the hand-off is under way
        assert not svc.store.get(job_id).dispatched

        # The sweep of a live process (a worker's), on the real embedded broker.
        sweep = JobQueue(svc.store, CeleryDispatcher(client_celery(settings)))
        assert sweep.dispatch_pending() == 1
        assert sweep.dispatch_pending() == 0
        [message] = broker_messages(settings)
        assert message["kwargs"] == {"job_id": job_id, "seq": 2}
        assert svc.store.get(job_id).dispatched
    finally:
        dead.release.set()
        svc.close()
    # The dead sender's send failed: nothing more reached the broker, the job stays sent.
    assert broker_messages(settings) == []
    assert svc.store.get(job_id).dispatched


def test_sends_declare_nothing_and_the_worker_still_reads_them(
    settings: Any, store: JobStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The default queue is reached through the anonymous exchange (the routing key is the
    queue), so the web process declares nothing: kombu's check of its declared-entities
    cache cost a copy of the queue bound to the channel on every send. A broker no worker
    has declared anything on yet still gets each message where the worker reads it."""
    from kombu.messaging import Producer

    declared: list[object] = []
    real = Producer.maybe_declare

    def recording(self: Producer, entity: Any, *args: Any, **kwargs: Any) -> Any:
        declared.append(entity)
        return real(self, entity, *args, **kwargs)

    monkeypatch.setattr(Producer, "maybe_declare", recording)
    one, *batch = new_jobs(store, 3)
    dispatcher = CeleryDispatcher(client_celery(settings))
    dispatcher.dispatch(one)
    dispatcher.dispatch_all(batch)
    assert declared == []
    sent = broker_messages(settings)
    assert [m["kwargs"]["job_id"] for m in sent] == [job.id for job in (one, *batch)]
