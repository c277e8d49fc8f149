"""`pip install ribbit` in a fresh virtualenv gives a web app that answers webhooks, with
no torch, transformers, Semgrep or Docker SDK installed (they are the `worker` extra)."""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import shutil
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import requests

from tests.support import GITHUB_SECRET, require_service

pytestmark = [pytest.mark.integration, pytest.mark.slow]
ROOT = Path(__file__).resolve().parents[2]
SECRET = GITHUB_SECRET


def _pypi_reachable() -> bool:
    try:
        return requests.head("https://pypi.org/simple/flask/", timeout=10).ok
    except requests.RequestException:
        return False


def test_install_web_only_serves_webhooks_without_model_libraries(tmp_path: Path) -> None:
    require_service(_pypi_reachable(), "PyPI (the web-only install downloads its packages)")
    source = tmp_path / "src"  # a copy, so the build leaves nothing in the checkout
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    for package in ("bot", "worker", "trainer"):
        shutil.copytree(
            ROOT / package, source / package, ignore=shutil.ignore_patterns("__pycache__")
        )
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = subprocess.run(
        [str(venv / "bin" / "pip"), "install", "-q", "--disable-pip-version-check", str(source)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert pip.returncode == 0, pip.stderr[-2000:]
    listed = subprocess.run(
        [str(venv / "bin" / "pip"), "list", "--format=json"], capture_output=True, text=True
    )
    installed = {p["name"].lower() for p in json.loads(listed.stdout)}
    assert "ribbit" in installed
    assert not installed & {"torch", "transformers", "semgrep", "docker", "peft"}

    env = {
        "PATH": f"{venv / 'bin'}:/usr/bin:/bin",
        "HOME": str(tmp_path),
        "RIBBIT_DATA_DIR": str(tmp_path / "data"),
        "RIBBIT_GITHUB__WEBHOOK_SECRET": SECRET,
    }
    # A model-side command in this build says what is missing instead of a traceback.
    train = subprocess.run(
        [str(venv / "bin" / "ribbit"), "train"], env=env, capture_output=True, text=True
    )
    assert train.returncode == 1, train.stderr
    assert "Traceback" not in train.stderr
    assert "torch is not installed; install ribbit[worker] or ribbit[train]" in train.stderr
    # A worker started here would take jobs off the queue and fail every one of them; it
    # must refuse before it connects to anything, naming the extra to install.
    worker = subprocess.run(
        [str(venv / "bin" / "ribbit"), "worker"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert worker.returncode == 1, worker.stdout + worker.stderr
    assert "Traceback" not in worker.stderr
    refusal = worker.stderr.strip().splitlines()
    assert len(refusal) == 1, worker.stderr
    assert "pip install 'ribbit[worker]'" in refusal[0]
    assert "torch" in refusal[0]
    with socket.socket() as probe:  # a free port (`--port 0` means the default, 8080)
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    serve = ["serve", "--no-worker", "--host", "127.0.0.1", "--port", str(port)]
    server = subprocess.Popen(
        [str(venv / "bin" / "ribbit"), *serve],
        env=env,
        stderr=subprocess.PIPE,
        text=True,
    )
    logged: list[str] = []
    try:
        assert server.stderr is not None
        url = None
        for line in server.stderr:  # ends when the server exits; the address comes first
            if m := re.search(r"listening on (http://\S+)", line):
                url = m.group(1)
                break
        assert url, "ribbit serve exited before listening"
        # Keep reading what the server logs: a full pipe would block its writes (and its
        # exit), and the tail explains a failure.
        drain = threading.Thread(target=lambda: logged.extend(server.stderr), daemon=True)
        drain.start()
        body = json.dumps({"zen": "Keep it logically awesome.", "hook_id": 1}).encode()
        signature = "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
        resp = requests.post(
            f"{url}/webhooks/github",
            data=body,
            headers={
                "Content-Type": "application/json",
                "X-GitHub-Event": "ping",
                "X-GitHub-Delivery": "web-only-1",
                "X-Hub-Signature-256": signature,
            },
            timeout=30,
        )
        assert resp.status_code == 202, resp.text
        forged = requests.post(
            f"{url}/webhooks/github",
            data=body,
            headers={"X-GitHub-Event": "ping", "X-Hub-Signature-256": "sha256=00"},
            timeout=30,
        )
        assert forged.status_code == 401
    finally:
        server.terminate()
        try:
            server.wait(timeout=60)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
            raise AssertionError(
                "ribbit serve did not stop within 60 s of SIGTERM; its log ends:\n"
                + "".join(logged[-40:])
            ) from None
