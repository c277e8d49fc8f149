"""The app factory (bot/web/app.py) on its own: what it wires into the Flask app, each
request's latency in the histogram, the body limit Werkzeug enforces behind the webhook's
own, and a forge without a secret named in the log."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from flask import Flask
from flask.testing import FlaskClient

from bot.web import create_app
from bot.web.services import Services
from tests.fakes import RecordingDispatcher
from tests.support import GITHUB_SECRET
from worker.settings import WorkerSettings, load_worker_settings


def _latency_count(services: Services, endpoint: str, status: str) -> float:
    value = services.metrics.registry.get_sample_value(
        "ribbit_http_request_duration_seconds_count", {"endpoint": endpoint, "status": status}
    )
    return value or 0.0


def test_the_factory_wires_the_services_and_every_blueprint(
    app: Flask, settings: WorkerSettings
) -> None:
    services = app.extensions["ribbit"]
    assert isinstance(services, Services) and services.settings is settings
    assert set(app.blueprints) >= {"webhooks", "health", "admin", "review"}
    # One byte over the webhook's own limit: reading limit+1 bytes tells "over" from "equal".
    assert app.config["MAX_CONTENT_LENGTH"] == settings.max_body_bytes + 1


def test_every_request_is_timed_by_endpoint_and_status(app: Flask, client: FlaskClient) -> None:
    services = app.extensions["ribbit"]
    assert _latency_count(services, "health.healthz", "200") == 0
    assert client.get("/healthz").status_code == 200
    assert client.get("/healthz").status_code == 200
    assert _latency_count(services, "health.healthz", "200") == 2
    assert client.get("/no-such-page").status_code == 404
    assert _latency_count(services, "unknown", "404") == 1


def test_a_forge_without_its_secret_is_named_in_the_log(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    settings = load_worker_settings(
        data_dir=tmp_path / "data", github={"webhook_secret": GITHUB_SECRET}
    )
    with caplog.at_level(logging.ERROR, logger="bot.web.app"):
        app = create_app(settings, dispatcher=RecordingDispatcher())
    try:
        [record] = [r for r in caplog.records if r.name == "bot.web.app"]
        assert record.getMessage().startswith("gitlab webhooks are disabled")
        assert "RIBBIT_GITLAB__WEBHOOK_TOKEN" in record.getMessage()
    finally:
        app.extensions["ribbit"].close()
