"""Faults in the publish steps of solve, through the real parts (the local forge over HTTP
with its fault injection, real git, a real Celery worker on Redis, the real sandbox and
gates): the job ends with exactly one draft PR, one branch and one status comment, and
a rerun resumes from the pushed branch instead of running the agent again."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import update

from tests.plugins.e2e import GOOD_SCRIPT, bot_comments, label_issue, new_repo, wait_for

pytestmark = pytest.mark.integration

PR_CREATE = {"github": r"/repos/acme/calc/pulls$", "gitlab": r"/merge_requests$"}
PUSH = {"github": r"/git/github/acme/calc\.git/git-receive-pack$"}


def _sweep_when_due(dep: Any) -> dict[str, int]:
    """Beat's sweep, called directly, after the deferral's wait is declared over."""
    from bot.store.models import Job, utcnow
    from worker.maintenance import sweep
    from worker.runtime import WorkerRuntime

    runtime = WorkerRuntime.build(dep.settings)
    try:
        with runtime.db.session() as s:
            s.execute(update(Job).where(Job.state == "queued").values(not_before=utcnow()))
        return sweep(runtime)
    finally:
        runtime.db.dispose()


@pytest.mark.parametrize(
    ("kind", "step"),
    [("github", "pull_request"), ("gitlab", "pull_request"), ("github", "push")],
)
def test_forge_outage_in_publish_resumes_without_rerunning_the_agent(
    kind: str, step: str, forge_world: Any, deployment_for: Any
) -> None:
    forge = forge_world.forge
    dep = deployment_for(GOOD_SCRIPT)
    repo = new_repo(forge_world, kind)
    path = PR_CREATE[kind] if step == "pull_request" else PUSH[kind]
    outage = forge.fail_next(path, count=10_000, status=502, method="POST")
    number = label_issue(forge_world, kind, repo)
    [job] = dep.store.list()
    deferred = wait_for(
        lambda: (j := dep.store.get(job.id)).state == "queued" and j.attempts == 1 and j,
        what="the deferral",
    )
    assert "deferred" in deferred.failure_reason
    assert deferred.result["publish"]["branch"].startswith(f"ribbit/issue-{number}-")
    assert forge.pulls(kind, repo) == []
    outage.count = 0  # the forge is back

    assert _sweep_when_due(dep)["dispatched"] == 1
    done = wait_for(
        lambda: (j := dep.store.get(job.id)).state in {"succeeded", "failed"} and j,
        what="job end",
    )
    assert done.state == "succeeded", done.failure_reason
    assert done.attempts == 2
    assert "agent" not in done.result["timings"]  # resumed: the agent ran once
    [pr] = forge.pulls(kind, repo)
    bot_branches = [b for b in forge.branches(kind, repo) if b.startswith("ribbit/")]
    assert bot_branches == [pr.head]  # no orphan branch
    assert forge.branches(kind, repo)[pr.head] == pr.head_sha == done.result["head_sha"]
    assert f"Fixes #{number}" in pr.body
    [status] = bot_comments(forge_world, kind, repo, number)
    assert "Draft pull request opened" in status.body
    assert _sweep_when_due(dep)["dispatched"] == 0
