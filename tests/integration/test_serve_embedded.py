"""`ribbit serve`'s embedded worker and beat under supervision: a SIGKILLed worker is
restarted and shows so on /healthz, the dashboard and /metrics, and a SIGKILLed
`ribbit serve` leaves no child behind. Every wait is for a condition, with a deadline."""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from tests.plugins.services import free_port

pytestmark = pytest.mark.integration

ADMIN_TOKEN = secrets.token_urlsafe(32)


class Serve:
    def __init__(self, tmp: Path) -> None:
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.log_path = tmp / "serve.log"
        env = {k: v for k, v in os.environ.items() if not k.startswith("RIBBIT_")}
        env.update(
            RIBBIT_DATA_DIR=str(tmp / "data"),
            RIBBIT_PORT=str(self.port),
            RIBBIT_LOG_FORMAT="text",
            RIBBIT_ADMIN_TOKEN=ADMIN_TOKEN,
        )
        with self.log_path.open("w") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "bot", "serve"],
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def wait_for(self, what: str, check: Callable[[], Any], timeout: float = 120) -> Any:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                value = check()
            except requests.ConnectionError:
                value = None
            if value:
                return value
            assert self.proc.poll() is None, self.log_path.read_text()[-4000:]
            time.sleep(0.3)
        pytest.fail(f"timed out waiting for {what}; log:\n{self.log_path.read_text()[-4000:]}")

    def health(self) -> dict[str, Any]:
        resp = requests.get(f"{self.base}/healthz", timeout=5)
        assert resp.status_code == 200, resp.text
        body: dict[str, Any] = resp.json()
        return body

    def embedded_running(self) -> dict[str, Any] | None:
        body = self.health()
        procs = body.get("embedded", {})
        if procs and all(p["state"] == "running" for p in procs.values()):
            return procs
        return None

    def close(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=30)


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Serve]:
    s = Serve(tmp_path)
    try:
        yield s
    finally:
        s.close()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie (dead, not yet reaped by its new parent) counts as gone.
    stat = Path(f"/proc/{pid}/stat")
    return not (stat.exists() and stat.read_text().rsplit(")", 1)[1].split()[0] == "Z")


def _group_gone(pgid: int) -> bool:
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            return False
    return True


def test_serve_restarts_a_killed_embedded_worker_and_reports_it(serve: Serve) -> None:
    first = serve.wait_for("the worker and beat to run", serve.embedded_running)
    assert set(first) == {"worker", "beat"}
    assert serve.health()["status"] == "ok"
    old = first["worker"]["pid"]
    os.kill(old, signal.SIGKILL)

    def restarted() -> dict[str, Any] | None:
        procs = serve.embedded_running()
        return procs if procs and procs["worker"]["pid"] != old else None

    procs = serve.wait_for("the worker to be restarted", restarted)
    assert procs["worker"]["restarts"] == 1
    assert procs["worker"]["last_exit"] == -signal.SIGKILL
    assert procs["beat"]["restarts"] == 0
    assert _group_gone(old)  # the dead worker's pool went with it
    metrics = requests.get(f"{serve.base}/metrics", timeout=5).text
    assert 'ribbit_embedded_restarts_total{process="worker"} 1.0' in metrics
    assert 'ribbit_embedded_up{process="worker"} 1.0' in metrics
    page = requests.get(
        f"{serve.base}/admin/health/live",
        headers={"Authorization": f"Bearer {ADMIN_TOKEN}"},
        timeout=5,
    )
    assert page.status_code == 200, page.text[:500]
    assert 'data-process="worker"' in page.text
    assert "killed by signal 9" in page.text


def test_serve_killed_leaves_no_embedded_process_behind(serve: Serve) -> None:
    procs = serve.wait_for("the worker and beat to run", serve.embedded_running)
    pids = [p["pid"] for p in procs.values()]
    serve.proc.kill()  # SIGKILL to `ribbit serve` alone, not its children's groups
    serve.proc.wait(timeout=30)
    deadline = time.monotonic() + 120
    while any(_alive(pid) or not _group_gone(pid) for pid in pids):
        assert time.monotonic() < deadline, f"left running: {pids}"
        time.sleep(0.3)
