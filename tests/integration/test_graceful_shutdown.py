"""A real Celery worker (`ribbit worker --pool prefork -c 1`, on real Redis) stopped
mid-job, the two ways production stops one:

* SIGTERM (a deploy, `docker stop`, Kubernetes): Celery's warm shutdown lets the
  running job finish and record its real end before the process exits.
* SIGKILL of the whole worker (a lost node): the message stays unacknowledged in
  Redis until its visibility timeout, far too long to wait for, so the beat sweep
  requeues the job once its heartbeat is 2 x STALE_AFTER old and another worker
  runs it.
* SIGKILL of the pool process that runs the job (the OOM killer): the job's message
  was acknowledged late, so `reject_on_worker_lost` puts it back on the queue; the
  next delivery finds the job "running" with a live-looking heartbeat and runs
  nothing (the sweep alone re-sends jobs, so no second chain starts), and once the
  heartbeat is stale the sweep requeues the job and a worker runs it to the end.

No test waits for a heartbeat to age: it is aged in the store, and the sweep is
called directly instead of waiting for beat's schedule.

No real pipeline takes seconds without a model and a forge yet, so the worker is
started through a few lines of Python that replace the `explain` pipeline with a
slow one before handing over to the real `ribbit worker` command; everything else
(CLI, Celery app, task wrappers, claim, heartbeat, store) is the production code.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bot.queue import CeleryDispatcher, client_celery
from bot.store.db import Database
from bot.store.jobs import JobSpec, JobStore
from worker.jobs import STALE_AFTER
from worker.maintenance import Swept
from worker.settings import WorkerSettings, load_worker_settings

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
REDIS_DB = 13  # a database of its own, flushed per test

WORKER = """
import os, pathlib, sys, time
import worker.pipelines  # the real registrations first, then the slow stand-in
from worker.jobs import PIPELINES
from tests.fakes import FakeResult
marks = pathlib.Path(os.environ["GRACEFUL_MARKS"])
def slow(ctx):
    (marks / f"started-{os.getpid()}").write_text(ctx.job.id)
    ctx.stage("sleeping")
    deadline = time.monotonic() + float(os.environ["GRACEFUL_SLEEP"])
    while time.monotonic() < deadline:
        ctx.check_cancelled()
        time.sleep(0.1)
    (marks / f"finished-{os.getpid()}").write_text(ctx.job.id)
    return FakeResult({"ran_in": os.getpid()})
PIPELINES["explain"] = slow
from bot.cli import main
beat = ["--beat"] if os.environ.get("GRACEFUL_BEAT") else []
main(["worker", "--pool", "prefork", "--concurrency", "1", "--loglevel", "INFO", *beat])
"""


class Deployment:
    """The store, the broker and the worker processes of one test."""

    def __init__(self, tmp: Path, redis_url: str) -> None:
        self.marks = tmp / "marks"
        self.marks.mkdir()
        self.log = tmp / "worker.log"
        base = redis_url.rsplit("/", 1)[0]
        self.env = {
            "RIBBIT_DATA_DIR": str(tmp / "data"),
            "RIBBIT_BROKER_URL": f"{base}/{REDIS_DB}",
            "RIBBIT_LOG_FORMAT": "text",
        }
        self.settings: WorkerSettings = load_worker_settings(
            data_dir=tmp / "data", broker_url=f"{base}/{REDIS_DB}"
        )
        import redis

        redis.Redis.from_url(self.settings.broker_url or "").flushdb()
        self.db = Database(self.settings.effective_database_url)
        self.db.migrate()
        self.store = JobStore(self.db)
        self.procs: list[subprocess.Popen[bytes]] = []

    def start_worker(self, sleep_s: float, *, beat: bool = False) -> subprocess.Popen[bytes]:
        env = {
            **{k: v for k, v in os.environ.items() if not k.startswith("RIBBIT_")},
            **self.env,
            "GRACEFUL_MARKS": str(self.marks),
            "GRACEFUL_SLEEP": str(sleep_s),
            "PYTHONPATH": str(REPO),
            "GRACEFUL_BEAT": "1" if beat else "",
        }
        with self.log.open("ab") as log:
            proc = subprocess.Popen(
                [sys.executable, "-c", WORKER],
                cwd=REPO,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.procs.append(proc)
        return proc

    def submit(self) -> str:
        with self.db.session() as session:
            job = self.store.create(
                session,
                JobSpec(
                    kind="explain", forge="github", repo="acme/calc", issue_number=1, pr_number=2
                ),
            )
            assert job is not None
        CeleryDispatcher(client_celery(self.settings)).dispatch(job)
        self.store.mark_dispatched([(job.id, job.dispatch_seq)])
        return job.id

    def wait_for(self, what: str, check: Any, timeout: float) -> Any:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            value = check()
            if value:
                return value
            time.sleep(0.2)
        pytest.fail(f"timed out waiting for {what}; worker log:\n{self.log.read_text()[-4000:]}")

    def marks_named(self, prefix: str) -> list[Path]:
        return sorted(self.marks.glob(f"{prefix}-*"))

    def close(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=30)
        self.db.dispose()


@pytest.fixture
def deployment(tmp_path: Path, redis_url: str) -> Iterator[Deployment]:
    dep = Deployment(tmp_path, redis_url)
    try:
        yield dep
    finally:
        dep.close()


def test_graceful_shutdown_sigterm_finishes_the_running_job(deployment: Deployment) -> None:
    worker = deployment.start_worker(sleep_s=4)
    job_id = deployment.submit()
    deployment.wait_for("the job to start", lambda: deployment.marks_named("started"), 60)
    assert deployment.store.get(job_id).state == "running"

    worker.send_signal(signal.SIGTERM)
    rc = worker.wait(timeout=90)

    assert rc == 0, deployment.log.read_text()[-4000:]
    job = deployment.store.get(job_id)
    assert job.state == "succeeded", (job.state, job.failure_reason)
    assert job.attempts == 1
    assert len(deployment.marks_named("finished")) == 1
    assert "Warm shutdown" in deployment.log.read_text()


@pytest.mark.slow
def _age_heartbeat(deployment: Deployment, job_id: str) -> None:
    from datetime import timedelta

    from sqlalchemy import update

    from bot.store.tables import Job, utcnow

    with deployment.db.session() as s:
        s.execute(
            update(Job)
            .where(Job.id == job_id)
            .values(updated_at=utcnow() - STALE_AFTER * 2 - timedelta(seconds=1))
        )


def _sweep(deployment: Deployment) -> Swept:
    from bot.runtime import Runtime
    from worker.maintenance import sweep

    runtime = Runtime.open(deployment.settings)
    try:
        return sweep(runtime)
    finally:
        runtime.db.dispose()


def test_graceful_shutdown_killed_pool_process_job_is_reclaimed(deployment: Deployment) -> None:
    deployment.start_worker(sleep_s=3)
    job_id = deployment.submit()
    started = deployment.wait_for("the job to start", lambda: deployment.marks_named("started"), 60)
    first_pid = int(started[0].name.split("-")[1])
    os.kill(first_pid, signal.SIGKILL)  # the pool process, mid-job; the parent lives on

    # Redelivered at once; the job looks alive, so the redelivery runs nothing.
    deployment.wait_for(
        "the redelivered message to be skipped",
        lambda: "'skipped'" in deployment.log.read_text(),
        60,
    )
    assert deployment.store.get(job_id).state == "running"
    _age_heartbeat(deployment, job_id)  # nobody beats for it any more
    assert _sweep(deployment) == Swept(requeued=1, failed=0, dispatched=1)
    job = deployment.wait_for(
        "the requeued job to finish",
        lambda: (j := deployment.store.get(job_id)).state == "succeeded" and j,
        60,
    )
    assert job.attempts == 2 and job.requeues == 1
    finished = deployment.marks_named("finished")
    assert len(finished) == 1 and int(finished[0].name.split("-")[1]) != first_pid
    assert job.result == {"ran_in": int(finished[0].name.split("-")[1])}
    assert "signal 9 (SIGKILL)" in deployment.log.read_text()  # Celery saw its pool die
    assert _sweep(deployment).dispatched == 0


def test_graceful_shutdown_killed_worker_job_is_swept_to_another_worker(
    deployment: Deployment,
) -> None:
    first = deployment.start_worker(sleep_s=3)
    job_id = deployment.submit()
    deployment.wait_for("the job to start", lambda: deployment.marks_named("started"), 60)
    os.killpg(first.pid, signal.SIGKILL)  # the worker and its pool, as a lost node
    first.wait(timeout=30)
    assert deployment.store.get(job_id).state == "running"  # nobody told the store
    second = deployment.start_worker(sleep_s=3)
    _age_heartbeat(deployment, job_id)
    assert _sweep(deployment) == Swept(requeued=1, failed=0, dispatched=1)

    job = deployment.wait_for(
        "the second worker to finish the requeued job",
        lambda: (j := deployment.store.get(job_id)).state == "succeeded" and j,
        120,
    )
    assert job.attempts == 2
    assert second.poll() is None
    finished = deployment.marks_named("finished")
    assert len(finished) == 1
