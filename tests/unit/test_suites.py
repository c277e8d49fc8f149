"""The test suite's own plumbing: minutes per suite, and the fast tier."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.plugins.tiers import SLOW_MODULES
from tests.plugins.timing import suite_of


@pytest.mark.parametrize(
    ("nodeid", "suite"),
    [
        ("tests/integration/test_sandbox_docker.py::test_x[docker]", "integration/sandbox"),
        ("tests/integration/test_serve.py::test_x", "integration/serve"),
        ("tests/integration/distributed/test_a.py::test_x", "integration/distributed"),
        ("tests/unit/worker/gates/test_cli.py::test_x", "unit/worker"),
        ("tests/unit/test_suites.py::test_x", "unit"),
        ("tests/unit/bot/test_webhooks.py", "unit/bot"),
    ],
)
def test_suite_of(nodeid: str, suite: str) -> None:
    assert suite_of(nodeid) == suite


def test_every_slow_module_exists() -> None:
    """A renamed module would silently rejoin the fast tier."""
    here = Path(__file__).resolve().parents[1] / "integration"
    assert sorted(m for m in SLOW_MODULES if not (here / m).is_file()) == []
