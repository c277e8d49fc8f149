"""`ribbit serve` as a user runs it: embedded defaults (SQLite, the embedded broker, an
embedded worker), a signed labelled-issue webhook from each forge, the jobs in
`ribbit jobs --json`, and a clean shutdown on SIGTERM."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
import requests

from tests.plugins.services import free_port
from tests.support import (
    GITHUB_SECRET,
    GITLAB_TOKEN,
    github_headers,
    gitlab_headers,
    load_payload,
)

pytestmark = pytest.mark.integration


def _all_failed(store: Path, ids: set[str]) -> bool:
    conn = sqlite3.connect(f"file:{store}?mode=ro", uri=True)
    try:
        marks = ",".join("?" * len(ids))
        rows = conn.execute(f"SELECT state FROM jobs WHERE id IN ({marks})", sorted(ids)).fetchall()
    finally:
        conn.close()
    return len(rows) == len(ids) and all(state == "failed" for (state,) in rows)


def test_serve_accepts_both_forges_and_lists_the_jobs(tmp_path: Path) -> None:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("RIBBIT_")}
    env.update(
        RIBBIT_DATA_DIR=str(tmp_path / "data"),
        RIBBIT_PORT=str(port),
        RIBBIT_GITHUB__WEBHOOK_SECRET=GITHUB_SECRET,
        RIBBIT_GITLAB__WEBHOOK_TOKEN=GITLAB_TOKEN,
        RIBBIT_LOG_FORMAT="text",
    )
    log = (tmp_path / "serve.log").open("w")
    serve = subprocess.Popen(
        [sys.executable, "-m", "bot", "serve"], env=env, stdout=log, stderr=subprocess.STDOUT
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if requests.get(f"{base}/healthz", timeout=2).status_code == 200:
                    break
            except requests.ConnectionError:
                pass
            assert serve.poll() is None, (tmp_path / "serve.log").read_text()
            assert time.monotonic() < deadline, "ribbit serve did not come up"
            time.sleep(0.2)
        gh = load_payload("github", "issues.labeled")
        gh["label"]["name"] = "ribbit"
        body = json.dumps(gh).encode()
        r1 = requests.post(
            f"{base}/webhooks/github",
            data=body,
            headers=github_headers(body, "issues", "serve-gh-1"),
            timeout=10,
        )
        gl = json.dumps(load_payload("gitlab", "issue.update.labeled")).encode()
        r2 = requests.post(
            f"{base}/webhooks/gitlab",
            data=gl,
            headers=gitlab_headers("Issue Hook", "serve-gl-1"),
            timeout=10,
        )
        forged = requests.post(
            f"{base}/webhooks/github",
            data=body,
            timeout=10,
            headers=github_headers(body, "issues", "x", secret="nope"),
        )
        assert (r1.status_code, r2.status_code, forged.status_code) == (202, 202, 401)
        ids = {r1.json()["job_id"], r2.json()["job_id"]}
        listed = subprocess.run(
            [sys.executable, "-m", "bot", "jobs", "--json"],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        jobs = {j["id"]: j for j in json.loads(listed.stdout)}
        assert set(jobs) == ids
        assert {(j["forge"], j["repo"], j["issue"]) for j in jobs.values()} == {
            ("github", "Codertocat/Hello-World", 1),
            ("gitlab", "gitlab-org/gitlab-test", 23),
        }
        # The embedded worker picks them up over the embedded broker. No forge token is
        # configured here, so each ends with a reason saying what to set.
        # Watched in the store (a cheap read), then listed once more through the CLI: a
        # `ribbit jobs` process every half second cost more than the jobs themselves.
        store = tmp_path / "data" / "ribbit.db"
        deadline = time.monotonic() + 90
        while not _all_failed(store, ids):
            assert serve.poll() is None, (tmp_path / "serve.log").read_text()
            assert time.monotonic() < deadline, "the embedded worker did not end the jobs"
            time.sleep(0.2)
        listed = subprocess.run(
            [sys.executable, "-m", "bot", "jobs", "--json"],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        states = {j["id"]: j for j in json.loads(listed.stdout)}
        assert all(j["state"] == "failed" for j in states.values()), states
        reasons = " ".join(j["failure_reason"] for j in states.values())
        assert "RIBBIT_GITHUB__TOKEN" in reasons and "RIBBIT_GITLAB__TOKEN" in reasons
    finally:
        serve.send_signal(signal.SIGTERM)
        code = serve.wait(timeout=90)
        log.close()
    assert code == 0, (tmp_path / "serve.log").read_text()
