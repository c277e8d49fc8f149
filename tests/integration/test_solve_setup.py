"""End to end with a setup step (real Celery worker, local forge, bubblewrap sandbox,
the real PyPI through the worker's registry proxy): the README's own ``.ribbit.yml``
reaches a draft PR; a refused host is listed in the PR body; a broken setup stops the
job before the agent with its output on the issue."""

from __future__ import annotations

from typing import Any

import pytest

from tests.plugins.e2e import GOOD_SCRIPT, ISSUE, REPO_FILES, bot_comments, wait_for
from tests.plugins.forge import BOT_LOGIN

pytestmark = pytest.mark.integration

# The README's .ribbit.yml on a package with a dependency from PyPI.
PYPROJECT = (
    '[build-system]\nrequires = ["setuptools>=61"]\nbuild-backend = "setuptools.build_meta"\n\n'
    '[project]\nname = "calc"\nversion = "0.1.0"\ndependencies = ["tomli-w==1.0.0"]\n\n'
    '[tool.setuptools]\npy-modules = ["calc"]\n'
)
README_CONFIG = (
    "setup: pip install -e .\ntest: python -m pytest -q\nlabels: [bot]\nreviewers: [maya]\n"
)
CALC_USES_DEPENDENCY = (
    "import tomli_w  # noqa: F401  (installed by setup)\n" + REPO_FILES["calc.py"]
)
GITHUB_PROBE = (
    "python -c \"import urllib.request as u; u.urlopen('https://github.com/', timeout=20)\""
)


def _repo(forge_world: Any, config: str | None, pyproject: str = PYPROJECT) -> str:
    files = {**REPO_FILES, "calc.py": CALC_USES_DEPENDENCY, "pyproject.toml": pyproject}
    if config is not None:
        files[".ribbit.yml"] = config
    forge_world.forge.create_repo("github", "acme/calc", files=files)
    forge_world.forge.add_collaborator("github", "acme/calc", BOT_LOGIN, "write")
    forge_world.forge.add_collaborator("github", "acme/calc", "maya", "maintain")
    return "acme/calc"


def _run(
    forge_world: Any, deployment_for: Any, config: str | None, pyproject: str = PYPROJECT
) -> tuple[Any, Any, str, int]:
    dep = deployment_for(GOOD_SCRIPT)
    repo = _repo(forge_world, config, pyproject)
    issue = forge_world.forge.create_issue(
        "github", repo, title=ISSUE[0], body=ISSUE[1], author="maya"
    )
    forge_world.forge.add_label("github", repo, issue.number, "ribbit", actor="maya")
    [job] = dep.store.list()
    job = wait_for(
        lambda: (j := dep.store.get(job.id)).state in {"succeeded", "failed"} and j,
        timeout=600,
        what="job end",
    )
    return dep, job, repo, int(issue.number)


def test_readme_config_reaches_a_draft_pr_with_its_dependency_from_pypi(
    forge_world: Any, deployment_for: Any
) -> None:
    _, job, repo, _ = _run(forge_world, deployment_for, README_CONFIG)
    assert job.state == "succeeded", job.failure_reason
    assert job.result["setup"]["ok"] and job.result["setup"]["network"]
    assert job.result["setup"]["blocked"] == []
    [pr] = forge_world.forge.pulls("github", repo)
    assert "Ribbit gates: passed" in pr.body
    assert "`pip install -e .`: succeeded" in pr.body
    assert "Target tests passing with the patch: `test_add_two_numbers`" in pr.body
    after = job.result["gates"]["gates"]
    tests = next(r for r in after if r["name"] == "tests")
    assert tests["details"]["after"]["counts"]["passed"] == 2


def test_a_refused_host_is_listed_in_the_pr_body(forge_world: Any, deployment_for: Any) -> None:
    config = README_CONFIG.replace(
        "setup: pip install -e .", f"setup: pip install -e . && ({GITHUB_PROBE} || true)"
    )
    _, job, repo, _ = _run(forge_world, deployment_for, config)
    assert job.state == "succeeded", job.failure_reason
    assert job.result["setup"]["blocked"] == ["CONNECT github.com:443 (host not on the allow-list)"]
    [pr] = forge_world.forge.pulls("github", repo)
    assert "refused these requests" in pr.body
    assert "`CONNECT github.com:443 (host not on the allow-list)`" in pr.body


def test_a_broken_setup_stops_the_job_before_the_agent(
    forge_world: Any, deployment_for: Any
) -> None:
    config = README_CONFIG.replace(
        "setup: pip install -e .", "setup: pip install ribbit-no-such-package-xyz"
    )
    _, job, repo, number = _run(forge_world, deployment_for, config)
    assert job.state == "failed"
    assert "setup failed" in job.failure_reason
    assert job.result["setup"]["ok"] is False
    assert "trajectory_path" not in job.result  # the agent never started
    assert forge_world.forge.pulls("github", repo) == []
    [status] = bot_comments(forge_world, "github", repo, number)
    assert "The repository's setup failed" in status.body
    assert "not a patch" in status.body
    assert "ribbit-no-such-package-xyz" in status.body
    assert not any("agent is working" in old for old in status.history)


def test_a_missing_dependency_is_the_repositorys_setup_not_the_patch(
    forge_world: Any, deployment_for: Any
) -> None:
    # calc.py needs tomli_w, and the package forgot to declare it: the install succeeds,
    # then every test module fails to import, at the base as with the patch.
    config = "test: python -m pytest -q\nlabels: [bot]\nreviewers: [maya]\n"
    undeclared = PYPROJECT.replace('dependencies = ["tomli-w==1.0.0"]', "dependencies = []")
    _, job, repo, number = _run(forge_world, deployment_for, config, undeclared)
    assert job.state == "failed"
    assert forge_world.forge.pulls("github", repo) == []
    [status] = bot_comments(forge_world, "github", repo, number)
    assert "the base tree's tests fail too" in status.body
    assert "not the patch" in status.body or "rather than the patch" in status.body
    assert "The patch did not pass the gates" not in status.body


def test_with_no_ribbit_yml_the_declared_dependencies_are_installed(
    forge_world: Any, deployment_for: Any
) -> None:
    # No .ribbit.yml at all: the package's own metadata says what to install
    # (worker/sandbox/setupcmd.py), and its dependency comes from PyPI through the proxy.
    _, job, repo, _ = _run(forge_world, deployment_for, None)
    assert job.state == "succeeded", job.failure_reason
    assert job.result["setup"]["command"] == "pip install -e ."
    assert job.result["setup"]["ok"] and job.result["setup"]["network"]
    [pr] = forge_world.forge.pulls("github", repo)
    assert "`pip install -e .`: succeeded" in pr.body
    assert "Ribbit gates: passed" in pr.body


def test_a_failed_detected_setup_says_what_ran_and_how_to_name_another(
    forge_world: Any, deployment_for: Any
) -> None:
    broken = PYPROJECT.replace('"tomli-w==1.0.0"', '"ribbit-no-such-package-xyz"')
    _, job, repo, number = _run(forge_world, deployment_for, None, broken)
    assert job.state == "failed"
    assert forge_world.forge.pulls("github", repo) == []
    [status] = bot_comments(forge_world, "github", repo, number)
    assert "`pip install -e .` exited 1" in status.body
    assert "names no `setup`, so this was the usual install" in status.body
    assert '`setup: ""` if nothing needs installing' in status.body
