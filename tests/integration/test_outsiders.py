"""Outsiders' commands cost nothing, through the real parts (signed webhooks from the
local forge over HTTP, a real worker on Redis, the forge's permission API): no solve job,
nothing counted against the daily budget, at most one reply per outsider per issue."""

from __future__ import annotations

from typing import Any

import pytest

from tests.plugins.e2e import GOOD_SCRIPT, ISSUE, bot_comments, new_repo, wait_for

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("kind", ["github", "gitlab"])
def test_outsiders_retries_spend_no_budget_and_get_one_reply(
    kind: str, forge_world: Any, deployment_for: Any
) -> None:
    from bot.settings import AdmissionSettings

    forge = forge_world.forge
    dep = deployment_for(GOOD_SCRIPT, admission=AdmissionSettings(daily_jobs_per_repo=1))
    repo = new_repo(forge_world, kind)
    number = forge.create_issue(kind, repo, title=ISSUE[0], body=ISSUE[1], author="otto").number
    for _ in range(3):
        _, delivery = forge.comment_as(kind, repo, number, author="otto", body="/ribbit retry")
        assert delivery is not None and delivery.status_code == 202
    # GitHub says otto is no collaborator, so intake drops it; GitLab does not say, so the
    # worker asks the forge, refuses, and tells otto once.
    commands = [j for j in dep.store.list() if j.kind == "command"]
    assert len(commands) == (0 if kind == "github" else 3)
    wait_for(
        lambda: all(dep.store.get(j.id).state == "failed" for j in commands),
        what="commands refused",
    )
    assert not any(j.kind in {"solve", "revise"} for j in dep.store.list())
    replies = bot_comments(forge_world, kind, repo, number)
    assert len(replies) == (0 if kind == "github" else 1)

    # The budget of one job a day is intact: a maintainer's label is accepted and runs.
    delivery = forge.add_label(kind, repo, number, "ribbit", actor="maya")
    assert delivery is not None and delivery.status_code == 202
    assert '"accepted"' in delivery.response_text
    [solve] = [j for j in dep.store.list() if j.kind == "solve"]
    done = wait_for(
        lambda: (j := dep.store.get(solve.id)).state in {"succeeded", "failed"} and j,
        what="job end",
    )
    assert done.state == "succeeded", done.failure_reason
    assert len(forge.pulls(kind, repo)) == 1
