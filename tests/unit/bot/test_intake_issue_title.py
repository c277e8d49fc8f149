"""Intake keeps the issue's title on the job it admits (issue #36), from the webhook, so a
job that fails before the worker reads the issue can still name it: a label on GitHub and
GitLab, and a command on an issue on either."""

from __future__ import annotations

from typing import Any

from tests.support import load_payload
from tests.unit.bot.test_webhooks import comment, jobs, labeled


def test_a_github_label_keeps_the_issue_title(post_github: Any, store: Any) -> None:
    payload = labeled()
    payload["issue"]["title"] = "add() subtracts"
    assert post_github(payload, "issues", "d-1").status_code == 202
    [job] = jobs(store)
    assert store.get(job.id).issue_title == "add() subtracts"


def test_a_gitlab_label_keeps_the_issue_title(post_gitlab: Any, store: Any) -> None:
    payload = load_payload("gitlab", "issue.update.labeled")
    resp = post_gitlab(payload, "Issue Hook", "u-1")
    assert resp.status_code == 202, resp.get_json()
    [job] = jobs(store)
    assert store.get(job.id).issue_title == payload["object_attributes"]["title"]


def test_a_command_on_an_issue_keeps_its_title(post_github: Any, store: Any) -> None:
    payload = comment("/ribbit retry")
    payload["issue"]["title"] = "add() subtracts"
    assert post_github(payload, "issue_comment", "d-1").status_code == 202
    [job] = jobs(store)
    assert (job.kind, store.get(job.id).issue_title) == ("command", "add() subtracts")


def test_a_gitlab_note_on_an_issue_keeps_its_title(post_gitlab: Any, store: Any) -> None:
    payload = load_payload("gitlab", "note.issue")
    payload["object_attributes"]["note"] = "/ribbit retry"
    payload["issue"]["title"] = "add() subtracts"
    resp = post_gitlab(payload, "Note Hook", "u-1")
    assert resp.status_code == 202, resp.get_json()
    [job] = jobs(store)
    assert store.get(job.id).issue_title == "add() subtracts"
