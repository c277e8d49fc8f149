"""A real project that keeps its test dependencies in PEP 735 dependency groups, set up
the way Ribbit detects with no ``.ribbit.yml``, then tested with its own suite.

structlog 26.1.0, its sdist from PyPI (pinned by hash; MIT OR Apache-2.0, licences
inside): no extras, ``[dependency-groups] tests`` with pytest-asyncio, time-machine and
the rest, and a hatchling + hatch-vcs build. Before groups were read, the detected
``pip install -e .`` succeeded and installed none of them, and the suite could not
even be collected (issue #35). The detected install runs in the bubblewrap sandbox
through the registry proxy; the suite then runs there with no network and passes.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from tests.fakes import make_git_repo
from tests.support import pinned_sdist, require_service
from worker.repo_config import RepoConfig
from worker.sandbox import open_sandbox
from worker.sandbox.setup import run_setup
from worker.sandbox.setupcmd import with_detected_setup
from worker.settings import SandboxSettings

pytestmark = pytest.mark.integration

STRUCTLOG = "structlog==26.1.0"
STRUCTLOG_SHA256 = "f63a716cbd1b1291cf7661de7794b455acfa4c43c5bcf1630e6ad5ddc1adb3b7"
HOST_CA = Path(os.environ.get("SSL_CERT_FILE", "/etc/ssl/certs/ca-certificates.crt"))
DETECTED = (
    "pip install -e . 'pytest-asyncio>=0.17' pytest-randomly 'pytest>=6.0' simplejson "
    "'time-machine>=2.14.1'"
)


@pytest.fixture(scope="module")
def structlog_repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """structlog's sdist, downloaded on the host, checked against its hash, committed."""
    tree = pinned_sdist(STRUCTLOG, tmp_path_factory.mktemp("structlog-sdist"), STRUCTLOG_SHA256)
    require_service(tree is not None, f"PyPI ({STRUCTLOG} sdist)")
    assert tree is not None
    assert (tree / "LICENSE-MIT").exists()
    files = {
        str(p.relative_to(tree)): p.read_text()
        for p in sorted(tree.rglob("*"))
        if p.is_file() and "docs" not in p.relative_to(tree).parts
    }
    repo = tmp_path_factory.mktemp("structlog") / "repo"
    make_git_repo(repo, files)
    return repo


def test_structlog_detected_setup_installs_its_tests_group_and_its_suite_passes(
    structlog_repo: Path, bubblewrap_settings: SandboxSettings
) -> None:
    config = with_detected_setup(RepoConfig(), structlog_repo)
    assert config.setup == DETECTED
    settings = bubblewrap_settings.model_copy(
        update={
            "setup_network": True,
            "setup_ca_bundle": HOST_CA if HOST_CA.is_file() else None,
            "memory_mb": 2048,
            "pids": 256,
            "workspace_mb": 256,
        }
    )
    with open_sandbox(settings, structlog_repo, network=True) as sandbox:
        setup = run_setup(sandbox, config, settings)
        assert setup.ok, setup.output
        installed = sandbox.exec(
            "python -c 'import pytest_asyncio, pytest_randomly, simplejson, time_machine'",
            timeout=60,
        )
        assert installed.exit_code == 0, installed.stderr
        # pytest-randomly, which the group installs, is turned off: the files' order,
        # not a random seed, decides the run.
        run = sandbox.exec("python -m pytest -q -p no:cacheprovider -p no:randomly", timeout=600)
    summary = run.stdout.strip().splitlines()[-1] if run.stdout.strip() else ""
    assert run.exit_code == 0, run.stdout[-4000:] + run.stderr[-2000:]
    assert re.search(r"\d+ passed", summary), summary
    assert "error" not in summary, summary
