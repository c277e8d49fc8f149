"""End to end (real Celery worker, local forge, bubblewrap sandbox, the real PyPI through
the worker's proxy): what a repository asks of its environment in ``.ribbit.yml`` is
said in the job, never silently dropped. An image cannot apply on bubblewrap: the PR
body and the job record say so. A setup host the deployment does not let repositories
add is refused and listed in the PR body with the proxy's refusals."""

from __future__ import annotations

from typing import Any

import pytest

from tests.integration.test_solve_setup import README_CONFIG, _run

pytestmark = pytest.mark.integration


def test_an_image_on_bubblewrap_is_said_in_the_pr_and_the_job(
    forge_world: Any, deployment_for: Any
) -> None:
    _, job, repo, _ = _run(forge_world, deployment_for, README_CONFIG + "image: python:3.12\n")
    assert job.state == "succeeded", job.failure_reason
    image = job.result["sandbox_image"]
    assert image["requested"] == "image `python:3.12` (from `.ribbit.yml`)"
    assert "bubblewrap" in image["note"]
    [pr] = forge_world.forge.pulls("github", repo)
    assert "### Sandbox image" in pr.body
    assert "where no image applies" in pr.body


def test_a_setup_host_outside_the_deployments_permit_is_listed(
    forge_world: Any, deployment_for: Any
) -> None:
    config = README_CONFIG + "setup_hosts: [pkgs.evil.example.com]\n"
    _, job, repo, _ = _run(forge_world, deployment_for, config)
    assert job.state == "succeeded", job.failure_reason
    refusal = (
        "setup_hosts pkgs.evil.example.com:443 "
        "(not among the hosts this deployment lets repositories add)"
    )
    assert job.result["setup"]["blocked"] == [refusal]
    [pr] = forge_world.forge.pulls("github", repo)
    assert f"`{refusal}`" in pr.body
