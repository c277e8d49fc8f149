"""The local forge's webhooks parse with the bot's own normaliser (bot/web/normalize.py): the
two sides agree on payload shapes."""

from __future__ import annotations

from typing import Any

import pytest

from bot.forges.base import ForgeName
from bot.web import normalize
from tests.plugins.forge import ForgeWorld

pytestmark = pytest.mark.integration


def _events(result: Any) -> list[Any]:
    return result if isinstance(result, list) else [result]


@pytest.mark.parametrize("kind", ["github", "gitlab"])
def test_forge_webhooks_parse_with_the_bot_normaliser(
    kind: ForgeName, forge_world: ForgeWorld
) -> None:
    forge, full = forge_world.forge, forge_world.repo(kind).full_name
    repo = forge.repo(kind, full)
    repo.git("branch", "ribbit/issue-1-x", "main")
    issue = forge.create_issue(kind, full, title="Bug", author="maya")
    pr = forge.add_pull_record(
        repo, "ribbit-bot", "Fix", "Fixes #1", "ribbit/issue-1-x", "main", draft=True
    )
    deliveries = [
        forge.add_label(kind, full, issue.number, "ribbit", actor="maya"),
        forge.comment_as(kind, full, issue.number, author="maya", body="/ribbit retry")[1],
        forge.comment_on_pull_as(kind, full, pr.number, author="maya", body="/ribbit revise")[1],
        forge.merge_pull_request(kind, full, pr.number, actor="maya"),
    ]
    parse = normalize.from_github if kind == "github" else normalize.from_gitlab

    events = [e for d in deliveries if d for e in _events(parse(d.event, d.delivery_id, d.payload))]

    assert [e.key for e in events] == [
        "issues.labeled",
        "comment.created",
        "comment.created",
        "pull_request.closed",
    ]
    assert all(e.repo == full and e.actor.login == "maya" for e in events)
    labeled, on_issue, on_pr, closed = events
    assert (labeled.issue_number, labeled.label) == (issue.number, "ribbit")
    assert (on_issue.issue_number, on_issue.body) == (issue.number, "/ribbit retry")
    assert (on_pr.pr_number, on_pr.body) == (pr.number, "/ribbit revise")
    assert (closed.pr_number, closed.merged, closed.head_branch) == (
        pr.number,
        True,
        "ribbit/issue-1-x",
    )
