"""ribbit_build_info and the process series on both /metrics endpoints: the web app's
(through the Flask test client) and a worker's exporter (served on loopback)."""

from __future__ import annotations

import platform
import subprocess
import urllib.request
from importlib.metadata import version
from pathlib import Path

import pytest
from flask.testing import FlaskClient
from prometheus_client.parser import text_string_to_metric_families

from bot import build_info
from bot.web import health
from tests.plugins.services import free_port
from worker.settings import WorkerSettings

SHA = "0123456789abcdef0123456789abcdef01234567"
PROCESS_SERIES = {
    "process_cpu_seconds_total",
    "process_resident_memory_bytes",
    "process_start_time_seconds",
    "process_open_fds",
    "python_info",
}


def _samples(text: str) -> dict[str, list[dict[str, str]]]:
    found: dict[str, list[dict[str, str]]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found.setdefault(sample.name, []).append({**sample.labels, "_": str(sample.value)})
    return found


def _expected_build() -> dict[str, str]:
    info = build_info.build_info()
    return {"version": info.version, "commit": info.commit, "python": info.python, "_": "1.0"}


def test_build_info_names_the_installed_version_and_this_python() -> None:
    info = build_info.build_info()
    assert info.version == version("ribbit")
    assert info.python == platform.python_version()


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        (SHA.upper(), SHA),
        ("unknown", "unknown"),  # the Dockerfile's default build argument
        ("main; rm -rf /", "unknown"),  # not a commit name: never a label value
    ],
)
def test_build_info_commit_comes_from_the_build_variable(given: str, expected: str) -> None:
    assert build_info._commit({build_info.COMMIT_ENV: given}) == expected


def test_build_info_commit_of_a_checkout_is_its_head() -> None:
    checkout = Path(build_info.__file__).resolve().parents[1]
    head = subprocess.run(
        ["git", "-C", str(checkout), "rev-parse", "HEAD"], capture_output=True, text=True
    )
    if head.returncode != 0:
        pytest.skip("this copy of the code is not a git checkout")
    assert build_info._commit({}) == head.stdout.strip()


def test_web_metrics_carry_build_info_and_process_series(
    client: FlaskClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(health, "check_broker", lambda url: None)
    samples = _samples(client.get("/metrics").get_data(as_text=True))
    assert samples.keys() >= PROCESS_SERIES
    assert samples["ribbit_build_info"] == [_expected_build()]
    # Once per registry: one process, one set of process series.
    assert len(samples["process_resident_memory_bytes"]) == 1


def test_worker_exporter_carries_build_info_and_process_series(
    settings: WorkerSettings,
) -> None:
    from worker.metrics import start_exporter

    port = free_port()
    worker = settings.model_copy(
        update={
            "metrics": settings.metrics.model_copy(
                update={"worker_port": port, "worker_host": "127.0.0.1"}
            )
        }
    )
    stop = start_exporter(worker)
    assert stop is not None
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as resp:
            samples = _samples(resp.read().decode())
    finally:
        stop()
    assert samples.keys() >= PROCESS_SERIES
    assert samples["ribbit_build_info"] == [_expected_build()]
