"""The set-up benchmark's vendored projects (tests/benchmarks/bench_envcache.py, issue
#35: "set-up cold and cached times in the benchmark") are the trees the end to end tests
run, set up as a job with no ``.ribbit.yml`` sets them up: what it times is what a job
installs, and a change to detection or to the fixtures shows here first."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.benchmarks.bench_envcache import PROJECTS, setup_config
from worker.sandbox.setupcmd import commit_files, detect_setup

NPM_CI = "npm ci --no-audit --no-fund"
# The set-up tests/integration/test_real_projects_e2e.py expects of each (``detected_setup``).
DETECTED = {
    "humanize": "pip install -e '.[tests]'",
    # PEP 735: the tests group's requirements on pip's command line.
    "structlog": (
        "pip install -e . 'freezegun>=0.2.8' pretend 'pytest-asyncio>=0.17' "
        "'pytest>=6.0' simplejson"
    ),
    # src/ layout tested through tox: what its [testenv] installs.
    "itsdangerous": "pip install -e . -r requirements/tests.txt",
    "cookie": NPM_CI,
    "mime": NPM_CI,
}


@pytest.mark.parametrize("name", sorted(DETECTED))
def test_each_vendored_project_is_set_up_as_a_job_with_no_ribbit_yml_would(
    name: str, tmp_path: Path
) -> None:
    project = PROJECTS[name]
    checkout = project.checkout(tmp_path)
    assert checkout is not None
    assert setup_config(project, checkout).setup == DETECTED[name]
    # What a job reads is the base commit, not the working tree: the same install.
    assert [s.command for s in detect_setup(commit_files(checkout, "HEAD"))] == [DETECTED[name]]


def test_a_vendored_checkout_keeps_the_modes_its_patch_records(tmp_path: Path) -> None:
    # mime's test script runs test/exports_test.sh itself: a checkout that lost its mode
    # would set up fine and then fail every test run.
    checkout = PROJECTS["mime"].checkout(tmp_path)
    assert checkout is not None
    staged = subprocess.run(
        ["git", "ls-files", "-s", "test/exports_test.sh"],
        cwd=checkout,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert staged.startswith("100755 "), staged
