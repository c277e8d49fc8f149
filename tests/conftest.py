"""Shared fixtures. Each area keeps its fixtures in a plugin module under
tests/plugins/ (services, forge, sandbox, models), loaded here so every test
sees one copy of each."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

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


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() in {"1", "true", "yes"}


def require_service(available: bool, what: str) -> None:
    """Skip on a laptop without ``what``; fail under CI=true, where a skip would hide a
    missing install step."""
    if available:
        return
    if in_ci():
        pytest.fail(f"{what} is required under CI=true but is not available")
    pytest.skip(f"{what} not available")


FIXTURES = Path(__file__).parent / "fixtures"
GITHUB_SECRET = "gh-webhook-secret-for-tests"
GITLAB_TOKEN = "gl-webhook-token-for-tests"


def load_payload(forge: str, name: str) -> dict[str, Any]:
    """A real webhook payload from tests/fixtures/<forge>/<name>.json."""
    data: dict[str, Any] = json.loads((FIXTURES / forge / f"{name}.json").read_text())
    return data


@pytest.fixture
def settings(tmp_path: Path) -> Any:
    from bot.settings import load_settings

    return load_settings(
        data_dir=tmp_path / "data",
        github={"webhook_secret": GITHUB_SECRET},
        gitlab={"webhook_token": GITLAB_TOKEN},
    )


@pytest.fixture
def dispatcher() -> Any:
    from tests.fakes import RecordingDispatcher

    return RecordingDispatcher()


@pytest.fixture
def app(settings: Any, dispatcher: Any) -> Any:
    from bot import create_app

    flask_app = create_app(settings, dispatcher=dispatcher)
    flask_app.config["TESTING"] = True
    yield flask_app
    flask_app.extensions["ribbit"].close()


@pytest.fixture
def client(app: Any) -> Any:
    return app.test_client()


@pytest.fixture
def store(app: Any) -> Any:
    return app.extensions["ribbit"].store


def github_headers(
    body: bytes, event: str, delivery: str, secret: str = GITHUB_SECRET
) -> dict[str, str]:
    from bot.signatures import sign_github

    return {
        "X-GitHub-Event": event,
        "X-GitHub-Delivery": delivery,
        "X-Hub-Signature-256": sign_github(secret, body),
        "Content-Type": "application/json",
    }


def gitlab_headers(event: str, delivery: str, token: str = GITLAB_TOKEN) -> dict[str, str]:
    return {
        "X-Gitlab-Event": event,
        "X-Gitlab-Event-UUID": delivery,
        "X-Gitlab-Token": token,
        "Content-Type": "application/json",
    }


def flushed(app: Any, response: Any) -> Any:
    """``response`` once the jobs of the request it answers were handed to the broker: the
    answer comes first and the background sender after, so a test that looks at what was
    sent waits on the sender (an event, not a sleep)."""
    app.extensions["ribbit"].intake.flush()
    return response


@pytest.fixture
def post_github(app: Any, client: Any) -> Callable[..., Any]:
    def post(payload: dict[str, Any] | bytes, event: str, delivery: str, **kw: Any) -> Any:
        body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        return flushed(
            app,
            client.post(
                "/webhooks/github", data=body, headers=github_headers(body, event, delivery, **kw)
            ),
        )

    return post


@pytest.fixture
def post_gitlab(app: Any, client: Any) -> Callable[..., Any]:
    def post(payload: dict[str, Any] | bytes, event: str, delivery: str, **kw: Any) -> Any:
        body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        return flushed(
            app,
            client.post(
                "/webhooks/gitlab", data=body, headers=gitlab_headers(event, delivery, **kw)
            ),
        )

    return post
