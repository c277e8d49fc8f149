"""Shared fixtures. Each area keeps its fixtures in a plugin module under
tests/plugins/ (services, forge, sandbox, models), loaded here so every test
sees one copy of each."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from tests.support import GITHUB_SECRET, GITLAB_TOKEN, flushed, github_headers, gitlab_headers

if TYPE_CHECKING:
    from flask import Flask
    from flask.testing import FlaskClient
    from werkzeug.test import TestResponse

    from bot.store.jobs import JobStore
    from tests.fakes import RecordingDispatcher
    from worker.settings import WorkerSettings

# A signed webhook posted through the test client: (payload, event, delivery, **headers).
PostWebhook = Callable[..., "TestResponse"]

pytest_plugins = [
    "tests.plugins.services",
    "tests.plugins.forge",
    "tests.plugins.sandbox",
    "tests.plugins.models",
    "tests.plugins.e2e",
    "tests.plugins.trainer",
    "tests.plugins.hub",
    "tests.plugins.timing",
    "tests.plugins.tiers",
    "tests.plugins.served_model",
    "tests.plugins.notify",
    "tests.plugins.browser",
    "tests.plugins.skips",
]

# Variables a test must never inherit from the developer's shell or CI.
_RIBBIT_PREFIX = "RIBBIT_"


@pytest.fixture(autouse=True)
def _reset_environ(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Each test starts without RIBBIT_* variables and leaves os.environ as it found it."""
    saved = dict(os.environ)
    for key in list(os.environ):
        if key.startswith(_RIBBIT_PREFIX):
            monkeypatch.delenv(key)
    yield
    os.environ.clear()
    os.environ.update(saved)


@pytest.fixture
def settings(tmp_path: Path) -> WorkerSettings:
    # WorkerSettings, as every `ribbit` process builds (bot/cli.py): the web app's tests
    # and the worker's share it. tests/unit/bot/test_settings.py covers bot's Settings alone.
    from worker.settings import load_worker_settings

    return load_worker_settings(
        data_dir=tmp_path / "data",
        github={"webhook_secret": GITHUB_SECRET},
        gitlab={"webhook_token": GITLAB_TOKEN},
    )


@pytest.fixture
def dispatcher() -> RecordingDispatcher:
    from tests.fakes import RecordingDispatcher

    return RecordingDispatcher()


@pytest.fixture
def app(settings: WorkerSettings, dispatcher: RecordingDispatcher) -> Iterator[Flask]:
    from bot.web import create_app

    flask_app = create_app(settings, dispatcher=dispatcher)
    flask_app.config["TESTING"] = True
    yield flask_app
    flask_app.extensions["ribbit"].close()


@pytest.fixture
def client(app: Flask) -> FlaskClient:
    return app.test_client()


@pytest.fixture
def store(app: Flask) -> JobStore:
    job_store: JobStore = app.extensions["ribbit"].store
    return job_store


@pytest.fixture
def post_github(app: Flask, client: FlaskClient) -> PostWebhook:
    def post(payload: dict[str, Any] | bytes, event: str, delivery: str, **kw: Any) -> TestResponse:
        body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        return flushed(
            app,
            client.post(
                "/webhooks/github", data=body, headers=github_headers(body, event, delivery, **kw)
            ),
        )

    return post


@pytest.fixture
def post_gitlab(app: Flask, client: FlaskClient) -> PostWebhook:
    def post(payload: dict[str, Any] | bytes, event: str, delivery: str, **kw: Any) -> TestResponse:
        body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        return flushed(
            app,
            client.post(
                "/webhooks/gitlab", data=body, headers=gitlab_headers(event, delivery, **kw)
            ),
        )

    return post
