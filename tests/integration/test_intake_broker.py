"""The web process's hand-off to a real Redis broker: every message arrives as the worker
reads it, sent through one redis-py client rather than a new one per message."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
import redis

from tests.support import GITHUB_SECRET

pytestmark = pytest.mark.integration


def test_jobs_reach_redis_through_one_reused_client(
    tmp_path: Path, redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from bot.queue import QUEUE, TASK_FOR_KIND, CeleryDispatcher, client_celery
    from bot.settings import load_settings
    from bot.store.tables import Job

    queue_db = redis_url.rsplit("/", 1)[0] + "/7"  # a database of its own: nothing else reads it
    server = redis.Redis.from_url(queue_db)
    server.delete(QUEUE)
    settings = load_settings(
        data_dir=tmp_path, broker_url=queue_db, github={"webhook_secret": GITHUB_SECRET}
    )
    app = client_celery(settings)
    dispatcher = CeleryDispatcher(app)
    built: list[object] = []
    real_init = redis.Redis.__init__

    def counting_init(self: Any, *args: Any, **kwargs: Any) -> None:
        built.append(self)
        real_init(self, *args, **kwargs)

    monkeypatch.setattr(redis.Redis, "__init__", counting_init)
    jobs = [Job(id=f"job-{n}", kind=kind, dispatch_seq=n) for n, kind in enumerate(TASK_FOR_KIND)]
    for job in jobs:  # the first sends connect: their clients are not counted
        dispatcher.dispatch(job)
    built.clear()
    for job in jobs:
        dispatcher.dispatch(job)
    assert built == []  # kombu's own Redis channel builds one per message
    sent = [json.loads(raw) for raw in reversed(server.lrange(QUEUE, 0, -1))]
    assert [m["headers"]["task"] for m in sent] == list(TASK_FOR_KIND.values()) * 2
    bodies = [json.loads(base64.b64decode(m["body"])) for m in sent]
    assert [kwargs for _args, kwargs, _embed in bodies] == [
        {"job_id": job.id, "seq": job.dispatch_seq} for job in jobs * 2
    ]
    with app.connection_for_write() as conn:
        assert type(conn.transport).__module__ == "bot.queue"
    server.delete(QUEUE)


def test_a_batch_reaches_redis_in_one_pipeline(
    tmp_path: Path, redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from bot.queue import QUEUE, CeleryDispatcher, client_celery
    from bot.settings import load_settings
    from bot.store.tables import Job

    queue_db = redis_url.rsplit("/", 1)[0] + "/7"
    server = redis.Redis.from_url(queue_db)
    settings = load_settings(
        data_dir=tmp_path, broker_url=queue_db, github={"webhook_secret": GITHUB_SECRET}
    )
    dispatcher = CeleryDispatcher(client_celery(settings))
    dispatcher.dispatch(Job(id="warm", kind="solve", dispatch_seq=1))  # connects
    server.delete(QUEUE)
    executed: list[int] = []
    real_execute = redis.client.Pipeline.execute

    def counting_execute(self: Any, *args: Any, **kwargs: Any) -> Any:
        executed.append(len(self.command_stack))
        return real_execute(self, *args, **kwargs)

    monkeypatch.setattr(redis.client.Pipeline, "execute", counting_execute)
    jobs = [Job(id=f"job-{n}", kind="solve", dispatch_seq=1) for n in range(5)]
    assert list(dispatcher.dispatch_all(jobs)) == jobs
    assert executed == [5]  # one round trip for the batch
    sent = [json.loads(raw) for raw in reversed(server.lrange(QUEUE, 0, -1))]
    bodies = [json.loads(base64.b64decode(m["body"])) for m in sent]
    assert [kwargs["job_id"] for _args, kwargs, _embed in bodies] == [job.id for job in jobs]
    server.delete(QUEUE)
