"""Test ids round-trip inside the real sandboxes, with the pytest the sandbox has (the
image's Debian pytest, or the host's under bubblewrap): inherited, nested,
parametrised (``::``, ``/``, spaces, brackets), unittest, doctest and dotted-folder
tests all come back as node ids that select exactly themselves."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fakes import make_git_repo
from tests.unit.worker.gates.test_junit import EXPECTED, PROJECT
from worker.gates.testrun import run_tests
from worker.sandbox.base import SandboxFactory

pytestmark = pytest.mark.integration

PYTEST = "python3 -m pytest -q -p no:cacheprovider"


def test_ids_round_trip_in_the_sandbox(backend_factory: SandboxFactory, tmp_path: Path) -> None:
    repo = tmp_path / "proj"
    make_git_repo(repo, PROJECT)
    with backend_factory(repo) as sandbox:
        run = run_tests(sandbox, f"{PYTEST} --doctest-modules src tests", timeout=300)
        assert run.outcomes == EXPECTED, run.log()
        ids = sorted(run.outcomes)
        again = run_tests(sandbox, f"{PYTEST} --doctest-modules", timeout=300, select=ids)
        assert again.outcomes == EXPECTED, again.log()
        # make runs the command in a child shell: PYTEST_ADDOPTS still reaches pytest.
        sandbox.write_file("Makefile", f"test:\n\t{PYTEST} tests\n".encode())
        via_make = run_tests(sandbox, "make -s test", timeout=300)
        if via_make.exit_code == 127:
            pytest.skip("no make in this sandbox")
        assert via_make.outcomes["tests/test_sub.py::TestSub::test_clear"] == "passed"
