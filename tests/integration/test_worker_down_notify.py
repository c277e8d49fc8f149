"""A killed worker raises a notification by itself: a real `ribbit worker` (Celery, on
real Redis) with no job is killed with SIGKILL, and the real `ribbit serve` web process
notices its silence and POSTs to a local Slack-compatible receiver, once; a worker
started again brings one "back" message. No cron, no `ribbit notify`.

The thresholds are settings made small here; the test waits on the POSTs themselves
(with a generous upper bound) and asserts no durations.
"""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bot import worker_heartbeats
from bot.store.db import Database
from tests.plugins.notify import NotifyReceiver
from tests.plugins.services import free_port

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
REDIS_DB = 10  # a database of its own, flushed per test
UPPER_BOUND_S = 120  # the "within 2 minutes"; never a measured duration


class Processes:
    def __init__(self, tmp: Path, env: dict[str, str]) -> None:
        self.tmp, self.env = tmp, env
        self.procs: list[subprocess.Popen[bytes]] = []

    def start(self, name: str, *argv: str) -> subprocess.Popen[bytes]:
        with (self.tmp / f"{name}.log").open("ab") as log:
            proc = subprocess.Popen(
                [sys.executable, "-m", "bot", *argv],
                cwd=REPO,
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.procs.append(proc)
        return proc

    def logs(self) -> str:
        return "\n".join(
            f"--- {p.name}\n{p.read_text()[-3000:]}" for p in sorted(self.tmp.glob("*.log"))
        )

    def close(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=30)


def _next_text(texts: queue.Queue[str], procs: Processes, what: str) -> str:
    try:
        return texts.get(timeout=UPPER_BOUND_S)
    except queue.Empty:
        pytest.fail(f"no notification POST ({what}); logs:\n{procs.logs()}")


def test_a_killed_worker_is_notified_once_and_its_return_too(
    tmp_path: Path, redis_url: str, notify_receiver: tuple[str, NotifyReceiver]
) -> None:
    import redis

    url, received = notify_receiver
    texts = received.arrivals
    broker = f"{redis_url.rsplit('/', 1)[0]}/{REDIS_DB}"
    redis.Redis.from_url(broker).flushdb()
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("RIBBIT_")},
        "PYTHONPATH": str(REPO),
        "RIBBIT_DATA_DIR": str(tmp_path / "data"),
        "RIBBIT_BROKER_URL": broker,
        "RIBBIT_LOG_FORMAT": "text",
        "RIBBIT_PORT": str(free_port()),
        "RIBBIT_NOTIFY__WEBHOOK_URL": url,
        # Small, so the test is quick; it still waits only on the POSTs.
        "RIBBIT_NOTIFY__CHECK_INTERVAL_S": "0.2",
        "RIBBIT_NOTIFY__WORKER_HEARTBEAT_S": "0.2",
        "RIBBIT_NOTIFY__WORKER_DOWN_AFTER_S": "5",
    }
    db = Database(f"sqlite:///{tmp_path / 'data' / 'ribbit.db'}")
    db.migrate()
    procs = Processes(tmp_path, env)
    try:
        procs.start("web", "serve", "--no-worker")
        worker = procs.start("worker", "worker", "--pool", "solo", "--loglevel", "INFO")
        deadline = time.monotonic() + UPPER_BOUND_S
        while not worker_heartbeats.seen(db):  # the worker is up (no job, ever)
            if time.monotonic() > deadline or worker.poll() is not None:
                pytest.fail(f"the worker never heartbeated; logs:\n{procs.logs()}")
            time.sleep(0.2)
        (name,) = [w.name for w in worker_heartbeats.seen(db)]

        os.kill(worker.pid, signal.SIGKILL)  # a lost node: no shutdown handler runs
        worker.wait(timeout=30)
        lost = _next_text(texts, procs, "worker lost")
        assert lost.startswith(f"Ribbit: worker {name} stopped heartbeating"), lost

        again = procs.start("worker2", "worker", "--pool", "solo", "--loglevel", "INFO")
        back = _next_text(texts, procs, "worker back")
        assert back.startswith(f"Ribbit: worker {name} is back"), back
        # Many checks saw the silence in between; it was said once.
        assert texts.empty(), list(texts.queue)

        # Stopped cleanly (a deploy, scaling down), a worker takes its row with it: no incident.
        os.kill(again.pid, signal.SIGTERM)
        assert again.wait(timeout=UPPER_BOUND_S) == 0
        assert worker_heartbeats.seen(db) == [], procs.logs()
    finally:
        procs.close()
        db.dispose()
