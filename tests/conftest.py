"""Shared fixtures. Each area keeps its fixtures in a plugin module under
tests/plugins/ (services, forge, sandbox, models), loaded here so every test
sees one copy of each."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

pytest_plugins = [
    "tests.plugins.services",
    "tests.plugins.forge",
    "tests.plugins.sandbox",
    "tests.plugins.models",
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
