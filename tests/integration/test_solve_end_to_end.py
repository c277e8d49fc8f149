"""End to end through the real parts: a label added on the local forge sends a signed
webhook to `ribbit`'s web app over HTTP, the job goes through Redis to a real Celery
worker, which clones over git-HTTP, runs the agent (replay policy) in a real sandbox,
runs the real gates and opens a draft PR on the forge, keeping one status comment.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.plugins.e2e import (
    DOCS_ONLY_SCRIPT,
    FORGED_SCRIPT,
    GOOD_SCRIPT,
    INSECURE_SCRIPT,
    bot_comments,
    label_issue,
    new_repo,
    wait_for,
)

pytestmark = pytest.mark.integration


def _finished_job(
    forge_world: Any, deployment_for: Any, script: list[str], kind: str
) -> tuple[str, int, Any]:
    """A new repository on ``kind``, an issue labelled by a maintainer, and the job it
    started once that job has succeeded or failed: (repository, issue number, job)."""
    dep = deployment_for(script)
    repo = new_repo(forge_world, kind)
    number = label_issue(forge_world, kind, repo)
    [job] = dep.store.list()
    job = wait_for(
        lambda: (j := dep.store.get(job.id)).state in {"succeeded", "failed"} and j, what="job end"
    )
    return repo, number, job


@pytest.mark.parametrize("kind", ["github", "gitlab"])
def test_labelled_issue_becomes_a_gated_draft_pr(
    kind: str, forge_world: Any, deployment_for: Any
) -> None:
    repo, number, job = _finished_job(forge_world, deployment_for, GOOD_SCRIPT, kind)
    assert job.state == "succeeded", job.failure_reason
    [pr] = forge_world.forge.pulls(kind, repo)
    assert pr.draft or pr.title.startswith("Draft: ")
    assert pr.head.startswith(f"ribbit/issue-{number}-")
    assert f"Fixes #{number}" in pr.body
    assert "needs human review" in pr.body
    assert "Ribbit gates: passed" in pr.body
    assert pr.labels == ["bot"] and "maya" in pr.requested_reviewers
    branches = forge_world.forge.branches(kind, repo)
    assert branches[pr.head] == pr.head_sha
    # One status comment, edited in place through the job's phases.
    [status] = bot_comments(forge_world, kind, repo, number)
    assert "Draft pull request opened" in status.body
    assert any("Working on it" in old for old in status.history)
    assert not any("Failed" in old for old in status.history)
    statuses = forge_world.forge.repo(kind, repo).statuses
    assert statuses and statuses[-1].sha == pr.head_sha
    assert statuses[-1].state == "success"
    assert job.result["gates"]["passed"] is True
    assert Path(job.result["trajectory_path"]).exists()
    # What the trainer builds an environment from, on any host: in the job's row.
    record = job.solve_record.task
    assert record is not None and record.base_sha == job.result["base_sha"]
    assert record.issue_title and record.test_command


def test_docs_only_patch_is_an_unverified_draft_that_closes_nothing(
    forge_world: Any, deployment_for: Any
) -> None:
    # Issue #31: a docs-only patch for a code bug was "passed" with "Fixes #N".
    repo, number, job = _finished_job(forge_world, deployment_for, DOCS_ONLY_SCRIPT, "github")
    assert job.state == "succeeded", job.failure_reason
    [pr] = forge_world.forge.pulls("github", repo)
    assert pr.draft or pr.title.startswith("Draft: ")
    assert pr.body.startswith("> [!WARNING]\n> **Not verified: no test fails without this patch.")
    assert f"Refs #{number}" in pr.body
    for keyword in ("Fixes #", "Closes #", "Resolves #"):
        assert keyword not in pr.body
    assert "Ribbit gates: not verified" in pr.body and "Ribbit gates: passed" not in pr.body
    [status] = bot_comments(forge_world, "github", repo, number)
    assert "not verified" in status.body and "✅" not in status.body
    assert "Ribbit gates: passed" not in status.body
    statuses = forge_world.forge.repo("github", repo).statuses
    assert statuses[-1].sha == pr.head_sha and statuses[-1].state == "failure"
    assert job.result["gates"]["passed"] is False
    assert job.result["gates"]["verdict"] == "unverified"


def test_insecure_patch_opens_no_pr_and_says_why(forge_world: Any, deployment_for: Any) -> None:
    repo, number, job = _finished_job(forge_world, deployment_for, INSECURE_SCRIPT, "github")
    assert job.state == "failed"
    assert "gates failed" in job.failure_reason and "semgrep" in job.failure_reason
    assert forge_world.forge.pulls("github", repo) == []
    [status] = bot_comments(forge_world, "github", repo, number)
    assert "did not pass the gates" in status.body and "semgrep" in status.body


def test_forged_run_opens_no_pr_and_names_the_tamper(forge_world: Any, deployment_for: Any) -> None:
    # Issue #31: a patch that leaves the bug and forges the test run from inside it.
    repo, number, job = _finished_job(forge_world, deployment_for, FORGED_SCRIPT, "github")
    assert job.state == "failed"
    assert "gates failed" in job.failure_reason, job.failure_reason
    assert forge_world.forge.pulls("github", repo) == []
    [status] = bot_comments(forge_world, "github", repo, number)
    assert "did not pass the gates" in status.body
    assert "tamper" in status.body and "gc.get_objects" in status.body, status.body
    assert "calc.py" in status.body
    findings = [f for g in job.result["gates"]["gates"] for f in g["findings"]]
    assert any(f["rule"] == "tamper" and f["path"] == "calc.py" for f in findings), findings


def test_outsider_label_is_refused(forge_world: Any, deployment_for: Any) -> None:
    dep = deployment_for(GOOD_SCRIPT)
    repo = new_repo(forge_world, "github")
    number = label_issue(forge_world, "github", repo, actor="otto")
    [job] = dep.store.list()
    job = wait_for(lambda: (j := dep.store.get(job.id)).state == "failed" and j, what="refusal")
    assert "otto does not have write access" in job.failure_reason
    assert forge_world.forge.pulls("github", repo) == []
    [status] = bot_comments(forge_world, "github", repo, number)
    assert "Not started" in status.body


def test_merge_records_outcome_and_reconcile_repairs_a_lost_webhook(
    forge_world: Any, deployment_for: Any
) -> None:
    from bot.runtime import Runtime
    from bot.store.tables import Outcome
    from worker.pipelines.outcomes import Reconciled, reconcile_open_pull_requests

    dep = deployment_for(GOOD_SCRIPT)
    repo = new_repo(forge_world, "github")
    label_issue(forge_world, "github", repo)
    [job] = dep.store.list()
    wait_for(lambda: dep.store.get(job.id).state == "succeeded", what="draft PR")
    [pr] = forge_world.forge.pulls("github", repo)
    # The merge webhook is lost (bot down): the forge has no URL to send it to.
    forge_world.forge.configure_webhooks()
    forge_world.forge.merge_pull_request("github", repo, pr.number, actor="maya")
    runtime = Runtime.open(dep.settings)
    try:
        assert reconcile_open_pull_requests(runtime) == Reconciled(checked=1, repaired=1)
        with runtime.db.session() as s:
            [outcome] = s.query(Outcome).all()
            assert (outcome.state, outcome.actor, outcome.pr_number) == (
                "merged",
                "maya",
                pr.number,
            )
            assert outcome.diff_similarity == 1.0  # merged as the bot wrote it
            assert outcome.job_id == job.id
        assert reconcile_open_pull_requests(runtime) == Reconciled(checked=0, repaired=0)
    finally:
        runtime.db.dispose()
