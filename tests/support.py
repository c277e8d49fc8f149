"""Helpers the tests import: service requirements, webhook secrets, payloads and signed
headers. Fixtures live in tests/conftest.py and tests/plugins/; this module holds none."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest


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
