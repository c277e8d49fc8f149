"""The test suite's own plumbing: minutes per suite, and the fast tier."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

from tests.plugins.tiers import SLOW_MODULES
from tests.plugins.timing import suite_of

ROOT = Path(__file__).resolve().parents[2]


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


def test_a_module_that_raises_its_time_limit_is_in_the_slow_tier() -> None:
    """A module that gives its tests more than the suite's time limit says itself that
    they take minutes: `make test-fast` ("the quick integration suites") leaves it out."""
    pytest_options = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]
    default = int(pytest_options["ini_options"]["timeout"])
    raised = {
        module.name
        for module in (ROOT / "tests" / "integration").rglob("test_*.py")
        for limit in re.findall(r"mark\.timeout\((\d[\d_]*)", module.read_text())
        if int(limit) > default
    }
    assert raised, "no module raises its limit: the pattern no longer finds the marks"
    fast = {
        name
        for name in raised
        if name not in SLOW_MODULES
        and "mark.slow" not in next((ROOT / "tests").rglob(name)).read_text()
    }
    assert fast == set()
