"""Handing jobs to the worker fleet by task name, so bot/ never imports worker/."""

from __future__ import annotations

import logging
import os
import queue
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Protocol, runtime_checkable

from celery import Celery

from bot.settings import Settings
from bot.store.broker import insert_messages
from bot.store.db import use_wal
from bot.store.jobs import JobStore
from bot.store.kinds import TASK_FOR_KIND
from bot.store.tables import Job

QUEUE = "ribbit"

log = logging.getLogger(__name__)


class Dispatcher(Protocol):
    def dispatch(self, job: Job) -> None: ...


@runtime_checkable
class BatchDispatcher(Protocol):
    """A dispatcher that can hand several jobs to the broker at once, all or none."""

    def dispatch(self, job: Job) -> None: ...

    def dispatch_all(self, jobs: Sequence[Job]) -> Sequence[Job]:
        """Send ``jobs``; returns those the broker holds now (raises if none of them)."""
        ...


def broker_transport_options(settings: Settings) -> dict[str, object]:
    # With acks_late an unacknowledged Redis message comes back after the visibility
    # timeout; it must outlast the longest job or a healthy long job would run twice. The
    # embedded SQLAlchemy transport passes its options to create_engine, so it gets none.
    # Settings without the worker's sections (no `ribbit` process: those build
    # WorkerSettings) know no limit, and only send: the timeout is a consumer's.
    limit = settings.effective_job_time_limit_s
    if settings.uses_embedded_broker or limit is None:
        return {}
    return {"visibility_timeout": limit + 600}


def prepare_broker(settings: Settings) -> None:
    """The embedded broker is a SQLite file in the data dir, which must exist first."""
    if settings.uses_embedded_broker:
        settings.data_dir.mkdir(parents=True, exist_ok=True)
        # kombu opens the file with SQLite's defaults (a rollback journal: several fsyncs and
        # a file created and deleted per message). WAL is a property of the file, so setting
        # it once here holds for kombu's connections in every process: one fsync per
        # message, and the worker's polling does not block the web process's sends.
        use_wal(settings.data_dir / "broker.db")


def client_celery(settings: Settings) -> Celery:
    """A Celery app used only to send (the web process runs no tasks).

    Never made the current app: the worker builds one of these to send (a /ribbit retry's
    new job, the sweep), and Celery's current app is per thread, so a pool thread that
    built one ran its later tasks on it (``shared_task`` resolves through the current app),
    without the worker's settings: they read the default database and found no job."""
    prepare_broker(settings)
    url = settings.effective_broker_url
    transport: str | None = None
    if url.startswith(("redis://", "rediss://")):
        transport = SENDING_REDIS_TRANSPORT
    elif url.startswith(SQL_PREFIX):
        # kombu takes the transport from a "sqla+" prefix over any it is given; without the
        # prefix the same database URL reaches the same tables through the batching channel.
        transport, url = SENDING_SQL_TRANSPORT, url.removeprefix(SQL_PREFIX)
    app = Celery("ribbit-web", broker=url, set_as_current=False)
    if transport is not None:
        app.conf.broker_transport = transport
    app.conf.update(
        task_default_queue=QUEUE,
        broker_transport_options=broker_transport_options(settings),
        broker_connection_timeout=3,
        broker_connection_retry_on_startup=False,
        task_ignore_result=True,
    )
    return app


SENDING_REDIS_TRANSPORT = "bot.queue:SendingRedisTransport"
SENDING_SQL_TRANSPORT = "bot.queue:SendingSQLTransport"
SQL_PREFIX = "sqla+"


def _sending_redis_transport() -> type:
    from kombu.transport import redis as kombu_redis

    class SendingChannel(kombu_redis.Channel):
        """kombu's Redis channel built a new redis-py client for every message it sent
        (a quarter of the web process's CPU for each hand-off: the client's constructor
        fills a table of ~170 response callbacks). The client holds no connection of its
        own (it borrows from the channel's pool per command, and is thread-safe), so one
        per pool serves every message; a channel that renews its pool gets a new one."""

        _sending_client: Any = None

        def _create_client(self, asynchronous: bool = False) -> Any:
            if asynchronous:  # the event loop's client (a worker's), kept by kombu already
                return super()._create_client(asynchronous=True)
            pool = self.pool
            client = self._sending_client
            if client is None or client.connection_pool is not pool:
                client = self._sending_client = super()._create_client()
            return client

    class Transport(kombu_redis.Transport):
        Channel = SendingChannel

    return Transport


def _sending_sql_transport() -> type:
    from kombu.transport import sqlalchemy as kombu_sql

    class SendingChannel(kombu_sql.Channel):
        """kombu's SQLAlchemy channel commits every message on its own: on the embedded
        broker (SQLite) that is a query for the queue row, an ORM flush and a synced commit
        per job, 1.9 ms of CPU and ~8 ms of fsync each, more than the webhook itself cost.
        Inside :meth:`one_transaction` the messages of a batch are inserted by one statement
        and committed together, so the batch is stored whole or not at all."""

        _batching = False

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self._queue_ids: dict[str, int] = {}
            self._rows: list[dict[str, Any]] = []

        # kombu's SQL channel already widens its base's _put(queue, message); this is its own.
        def _put(self, queue: Any, payload: Any, **kwargs: Any) -> Any:  # type: ignore[override]
            if not self._batching:
                return super()._put(queue, payload, **kwargs)
            queue_id = self._queue_ids.get(queue)
            if queue_id is None:
                # Read once per channel: kombu creates a queue's row once and never deletes
                # it (only messages), and its own query per message was a third of a send.
                queue_id = self._queue_ids[queue] = self._get_or_create(queue).id
            # The columns kombu's Message gets from its constructor and column defaults; the
            # timestamp stays NULL, as kombu's own insert leaves it.
            self._rows.append(
                {
                    "payload": kombu_sql.dumps(payload),
                    "queue_id": queue_id,
                    "visible": True,
                    "version": 1,
                }
            )

        @contextmanager
        def one_transaction(self) -> Iterator[None]:
            self._batching, self._rows = True, []
            try:
                yield
                if self._rows:
                    insert_messages(self.session, self.message_cls.__table__, self._rows)
                self.session.commit()
            except BaseException:
                self.session.rollback()
                raise
            finally:
                self._batching, self._rows = False, []

    class Transport(kombu_sql.Transport):
        Channel = SendingChannel

    return Transport


_TRANSPORTS: dict[str, Callable[[], type]] = {
    "SendingRedisTransport": _sending_redis_transport,
    "SendingSQLTransport": _sending_sql_transport,
}


def __getattr__(name: str) -> Any:
    # Resolved by kombu from SENDING_*_TRANSPORT, each only where the broker is of its kind,
    # so a web-only install with the embedded broker never imports the redis client.
    build = _TRANSPORTS.get(name)
    if build is None:
        raise AttributeError(name)
    transport = globals()[name] = build()
    return transport


class CeleryDispatcher:
    def __init__(self, app: Celery) -> None:
        self.app = app

    def dispatch(self, job: Job) -> None:
        self._send(job, None)

    def dispatch_all(self, jobs: Sequence[Job]) -> Sequence[Job]:
        """One producer for the batch, and on a broker whose channel can (the embedded
        one), one transaction: every job of the batch is in the broker, or none is. On
        Redis the batch goes in one pipeline (one round trip, not one per job); if it
        fails, none of the batch counts as sent, and a message that did get through is one
        the sweep's re-send makes stale (its seq is behind the job's), so it runs nothing."""
        with self.app.producer_or_acquire() as producer:
            together = getattr(producer.channel, "one_transaction", None)
            if together is None and getattr(producer, "supports_batch_publish", False):
                together = producer.batch
            if together is None:
                sent: list[Job] = []
                for job in jobs:
                    try:
                        self._send(job, producer)
                    except Exception as exc:  # broker down: the job is safe in the store
                        log.warning("dispatch of job %s failed, will retry: %s", job.id, exc)
                        continue
                    sent.append(job)
                return sent
            with together():
                for job in jobs:
                    self._send(job, producer)
            return list(jobs)

    def _send(self, job: Job, producer: Any) -> None:
        # No send retries here: a failed send leaves the job undispatched in the store,
        # and dispatch_pending re-sends it, so the webhook answer never waits on a dead broker.
        kwargs = {"job_id": job.id, "seq": job.dispatch_seq}
        self.app.send_task(
            TASK_FOR_KIND[job.kind],
            kwargs=kwargs,
            queue=QUEUE,
            retry=False,
            producer=producer,
            # What the worker logs for the task. Celery's default builds it with its
            # recursion-safe repr, a fifth of the CPU of a send; these are two plain values.
            argsrepr="()",
            kwargsrepr=repr(kwargs),
            # Nothing to declare: the default queue goes through the anonymous exchange, whose
            # routing key is the queue itself (a Redis list, a kombu SQL queue row created on
            # first put), so no binding is read; the worker declares what it consumes. Kombu
            # re-bound a copy of the queue to the channel on every send to check its cache of
            # declared entities: a sixth of the sender's CPU per job.
            declare=[],
        )


_NOW = object()


class BackgroundSender:
    """Sends committed jobs to the broker from a thread of its own, so that a webhook is
    answered as soon as its one transaction commits, not after a broker round trip and a
    second commit to mark the job sent.

    Jobs are sent in batches (``send`` marks them dispatched in one transaction): after the
    first job of a batch the thread lingers ``linger_s`` for more. A send costs mostly per
    batch (a broker transaction, the store's commit): at 200 webhooks/s jobs came one at a
    time, at 2.8 ms of CPU each against 0.6 in batches of ten. The linger delays a job's
    start by at most ``linger_s``, on jobs that run for minutes.

    This is the fast path only: a job this process does not send (it died, the backlog was
    full, the broker was down) stays queued and undispatched in the store, and the sweep
    (``JobQueue.dispatch_pending``), the one owner of re-sending, sends it.
    """

    def __init__(
        self,
        send: Callable[[Sequence[Job]], None],
        *,
        backlog: int = 10_000,
        batch: int = 200,
        linger_s: float = 0.05,
    ) -> None:
        self._send = send
        self._batch = batch
        self._linger_s = linger_s
        # Jobs; _NOW (flush: send what is here without lingering); None (stop).
        self._queue: queue.Queue[Job | object | None] = queue.Queue(maxsize=backlog)
        self._hurry = threading.Event()  # set by flush and close: stop lingering
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._pid = 0

    def submit(self, jobs: Sequence[Job]) -> None:
        """Queue ``jobs`` (committed, detached rows) for sending; never blocks."""
        if not jobs:
            return
        self._ensure_thread()
        for job in jobs:
            try:
                self._queue.put_nowait(job)
            except queue.Full:  # the sweep sends it; the answer must not wait on the broker
                log.warning("send backlog full; job %s is left to the sweep", job.id)

    def flush(self) -> None:
        """Wait until every job submitted so far was sent or failed to send."""
        if self._thread is not None and self._pid == os.getpid():
            self._queue.put(_NOW)
            self._hurry.set()  # cuts the linger short
            self._queue.join()

    def close(self, timeout: float = 10.0) -> None:
        """Send what is queued (within ``timeout``) and stop the thread."""
        with self._lock:
            thread, self._thread = self._thread, None
        if thread is None or self._pid != os.getpid():
            return
        try:
            self._queue.put(None, timeout=timeout)
        except queue.Full:  # a broker that hangs: what is left is the sweep's
            return
        self._hurry.set()
        thread.join(timeout)

    def _ensure_thread(self) -> None:
        # Started on first use, and again in a process forked after it started (a pre-forking
        # server): threads do not survive a fork.
        if self._thread is not None and self._pid == os.getpid():
            return
        with self._lock:
            if self._thread is not None and self._pid == os.getpid():
                return
            if self._pid != os.getpid():
                self._queue = queue.Queue(maxsize=self._queue.maxsize)
                self._hurry = threading.Event()
            self._pid = os.getpid()
            self._thread = threading.Thread(target=self._run, name="ribbit-sender", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        while True:
            items = [self._queue.get()]
            if isinstance(items[0], Job):
                # Asleep through the linger, not woken by each job that arrives (a thread
                # switch per webhook, taken from the request threads): only flush and close
                # cut it short.
                self._hurry.wait(self._linger_s)
                self._hurry.clear()
            while len(items) < self._batch and items[-1] is not None:
                try:
                    items.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            jobs = [job for job in items if isinstance(job, Job)]
            try:
                if jobs:
                    self._send(jobs)
            except Exception:  # the store is down: the jobs stay undispatched for the sweep
                log.exception("sending %d job(s) failed; left to the sweep", len(jobs))
            finally:
                for _ in items:
                    self._queue.task_done()
            if any(item is None for item in items):
                return


class JobQueue:
    """The one way jobs reach the broker: the webhook's background sender, the sweep's
    re-sends, a /ribbit retry's new job, the dashboard's and the CLI's retry and resume.

    A send that fails leaves the job in the store, undispatched; :meth:`dispatch_pending`
    (run by the sweep, the only re-sender) sends it later."""

    def __init__(self, store: JobStore, dispatcher: Dispatcher) -> None:
        self.store = store
        self.dispatcher = dispatcher

    @classmethod
    def to_celery(cls, settings: Settings, store: JobStore) -> JobQueue:
        """The deployment's queue: Celery on the configured broker."""
        return cls(store, CeleryDispatcher(client_celery(settings)))

    def dispatch(self, job_ids: Sequence[str]) -> None:
        """Send jobs by id (held or no longer queued ones are skipped)."""
        self.send([self.store.get(job_id) for job_id in job_ids])

    def send(self, jobs: Sequence[Job]) -> None:
        due = [job for job in jobs if not job.held and job.state == "queued"]
        sent: Sequence[Job] = []
        # A batch of one too: the batch path sends on one pooled producer, in one broker
        # transaction, where a lone send acquires a producer and commits on its own.
        if isinstance(self.dispatcher, BatchDispatcher) and due:
            try:
                sent = self.dispatcher.dispatch_all(due)
            except Exception as exc:  # broker down: the jobs are safe in the store
                log.warning("dispatch of %d job(s) failed, will retry: %s", len(due), exc)
        else:
            sent = [job for job in due if self._dispatch_one(job)]
        self.store.mark_dispatched([(job.id, job.dispatch_seq) for job in sent])

    def _dispatch_one(self, job: Job) -> bool:
        try:
            self.dispatcher.dispatch(job)
        except Exception as exc:  # broker down: the job is safe in the store
            log.warning("dispatch of job %s failed, will retry: %s", job.id, exc)
            return False
        return True

    def dispatch_pending(self) -> int:
        """The one place that re-sends jobs (called by the sweep): never sent, deferred
        and due, released from a pause, or requeued after their worker died."""
        pending = self.store.take_pending_dispatch()
        self.send(pending)
        return len(pending)
