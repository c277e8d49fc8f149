"""The dashboard served by the real `ribbit serve --no-worker` process (waitress) over
real HTTP, on a store of 10,000 jobs."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from bot.settings import load_settings
from bot.store.db import Database
from tests.plugins.admin import ADMIN_TOKEN, seed_jobs
from tests.plugins.services import _wait_for_port, free_port
from tests.support import GITHUB_SECRET

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def server(tmp_path: Path) -> Iterator[str]:
    data = tmp_path / "data"
    db = Database(load_settings(data_dir=data).effective_database_url)
    db.migrate()
    seed_jobs(db, 10_000)
    db.dispose()
    port = free_port()
    # The token comes in by environment here (the host's /run/secrets is not ours to
    # write); test_deploy_compose covers reading it from a secret file.
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("RIBBIT_")},
        "RIBBIT_DATA_DIR": str(data),
        "RIBBIT_ADMIN_TOKEN": ADMIN_TOKEN,
        "RIBBIT_GITHUB__WEBHOOK_SECRET": GITHUB_SECRET,
        "RIBBIT_LOG_FORMAT": "text",
        "PYTHONPATH": str(REPO),
    }
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "bot",
            "serve",
            "--no-worker",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
        ],
        cwd=REPO,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        _wait_for_port(port, proc, "ribbit serve", timeout=60)
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_dashboard_http_served_by_ribbit_serve(server: str) -> None:
    assert (
        requests.get(
            f"{server}/admin/", timeout=10, headers={"Accept": "application/json"}
        ).status_code
        == 401
    )
    assert (
        requests.get(
            f"{server}/admin/", timeout=10, headers={"Authorization": "Bearer wrong"}
        ).status_code
        == 401
    )
    auth = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    started = time.perf_counter()
    page = requests.get(f"{server}/admin/?state=failed&page=30", headers=auth, timeout=30)
    elapsed = time.perf_counter() - started
    assert page.status_code == 200
    assert 'id="job-total">2000<' in page.text and "page 30 of 40" in page.text
    assert "script-src 'self'" in page.headers["Content-Security-Policy"]
    print(f"\njobs page 30 of 10,000 jobs (state=failed) over HTTP: {elapsed * 1000:.1f} ms")

    session = requests.Session()
    login = session.post(
        f"{server}/admin/login", data={"token": ADMIN_TOKEN}, allow_redirects=False, timeout=10
    )
    assert login.status_code == 302
    assert session.get(f"{server}/admin/outcomes", timeout=10).status_code == 200
    js = session.get(f"{server}/admin/static/chart.umd.min.js", timeout=10)
    assert js.status_code == 200 and "javascript" in js.headers["Content-Type"]
