"""Abuse of the webhook endpoints, each case with its expected answer: whatever an
unauthenticated or hostile sender does costs a bounded amount and changes no job."""

from __future__ import annotations

import json
import re
from typing import Any

from tests.unit.bot.test_webhooks import comment, jobs, labeled


def _event_series(client: Any) -> list[str]:
    text = client.get("/metrics").get_data(as_text=True)
    return re.findall(r"^ribbit_webhook_events_total\{[^}]*\}", text, re.MULTILINE)


def test_unsigned_requests_cannot_grow_the_metrics(client: Any) -> None:
    for n in range(300):
        resp = client.post(
            "/webhooks/github",
            data=b"{}",
            headers={"X-GitHub-Event": f"evil-{n}", "X-GitHub-Delivery": f"x-{n}"},
        )
        assert resp.status_code == 401
    assert _event_series(client) == [
        'ribbit_webhook_events_total{event="unverified",forge="github",outcome="error"}'
    ]


def test_signed_unknown_events_share_one_series(client: Any, post_github: Any) -> None:
    for n in range(50):
        body = json.dumps({"n": n}).encode()
        assert post_github(body, f"made-up-{n}" * 20, f"u-{n}").status_code == 202
    assert _event_series(client) == [
        'ribbit_webhook_events_total{event="other",forge="github",outcome="ignored"}'
    ]


def test_every_label_value_is_from_the_fixed_set(client: Any, post_github: Any) -> None:
    from bot.web.metrics import EVENT_LABELS, OTHER, OUTCOME_LABELS, UNVERIFIED

    post_github(labeled(), "issues", "d-1")
    post_github(labeled(), "issues", "d-1")
    post_github(b"{", "issues", "d-2")
    post_github(comment("/ribbit help"), "issue_comment", "d-3")
    client.post("/webhooks/gitlab", data=b"{}", headers={"X-Gitlab-Event": "\u2603" * 300})
    events = EVENT_LABELS["github"] | EVENT_LABELS["gitlab"] | {OTHER, UNVERIFIED}
    for series in _event_series(client):
        labels = dict(re.findall(r'(\w+)="([^"]*)"', series))
        assert labels["event"] in events and labels["outcome"] in OUTCOME_LABELS | {OTHER}
    assert len(jobs(client.application.extensions["ribbit"].store)) == 2


# -- signed but malformed: 400 with a reason, never a 500 ---------------------------------------


def _signed_raw(client: Any, body: bytes, event: str = "issues", delivery: str = "m-1") -> Any:
    from tests.support import github_headers

    return client.post("/webhooks/github", data=body, headers=github_headers(body, event, delivery))


def test_deeply_nested_json_is_a_400(client: Any) -> None:
    resp = _signed_raw(client, b"[" * 100_000 + b"]" * 100_000)
    assert resp.status_code == 400 and "JSON" in resp.get_json()["reason"]


def test_huge_integer_is_a_400(client: Any) -> None:
    resp = _signed_raw(client, b'{"action": "labeled", "issue": {"number": 1' + b"0" * 5000 + b"}}")
    assert resp.status_code == 400


def test_issue_number_beyond_the_column_is_a_400(post_github: Any, store: Any) -> None:
    payload = labeled()
    payload["issue"]["number"] = 2**40
    resp = post_github(payload, "issues", "m-2")
    assert resp.status_code == 400 and "issue.number" in resp.get_json()["reason"]
    assert jobs(store) == []


def test_non_string_pr_body_is_a_400(post_github: Any) -> None:
    from tests.support import load_payload

    closed = load_payload("github", "pull_request.closed")
    closed["pull_request"].update(merged=True, body={"not": "text"})
    resp = post_github(closed, "pull_request", "m-3")
    assert resp.status_code == 400 and "body" in resp.get_json()["reason"]


def test_merged_pr_that_fixes_a_20_digit_issue_keeps_its_outcome(
    post_github: Any, store: Any
) -> None:
    from tests.support import load_payload

    job_id = post_github(labeled(number=3), "issues", "m-4").get_json()["job_id"]
    store.transition(job_id, "running")
    store.transition(job_id, "failed", reason="gates failed")
    closed = load_payload("github", "pull_request.closed")
    closed["pull_request"].update(merged=True, body="Fixes #3 and fixes #12345678901234567890 too")
    resp = post_github(closed, "pull_request", "m-5")
    assert resp.status_code == 202, resp.get_json()
    outcome = store.get(resp.get_json()["job_id"])
    assert (outcome.kind, outcome.issue_number) == ("outcome", 3)


# -- replays, old GitLab, allow-list, confidential issues ------------------------------------------


def test_signed_body_replayed_under_a_new_delivery_id_is_a_duplicate(
    post_github: Any, store: Any
) -> None:
    body = json.dumps(labeled()).encode()
    first = post_github(body, "issues", "r-1")
    job_id = first.get_json()["job_id"]
    store.transition(job_id, "running")
    store.transition(job_id, "succeeded")  # no active job left to block a second one
    again = post_github(body, "issues", "r-2")
    assert again.status_code == 200 and again.get_json()["status"] == "duplicate"
    assert [j.id for j in jobs(store)] == [job_id]


def test_gitlab_without_event_uuid_is_deduplicated_by_body(client: Any, store: Any) -> None:
    from tests.support import GITLAB_TOKEN, load_payload

    payload = load_payload("gitlab", "issue.update.labeled")
    body = json.dumps(payload).encode()
    headers = {"X-Gitlab-Event": "Issue Hook", "X-Gitlab-Token": GITLAB_TOKEN}
    first = client.post("/webhooks/gitlab", data=body, headers=headers)
    again = client.post("/webhooks/gitlab", data=body, headers=headers)
    assert first.status_code == 202, first.get_json()
    assert again.status_code == 200 and again.get_json()["status"] == "duplicate"


def test_allow_list_applies_to_every_job_kind(tmp_path: Any, dispatcher: Any) -> None:
    from bot.settings import load_settings
    from bot.web import create_app
    from tests.support import GITHUB_SECRET

    settings = load_settings(
        data_dir=tmp_path,
        github={"webhook_secret": GITHUB_SECRET},
        admission={"allowed_repos": ["acme/allowed"]},
    )
    app = create_app(settings, dispatcher=dispatcher)
    client = app.test_client()
    for n, text in enumerate(["/ribbit help", "/ribbit explain", "/ribbit stop"]):
        resp = _signed_raw(client, json.dumps(comment(text)).encode(), "issue_comment", f"a-{n}")
        assert resp.get_json()["status"] == "refused", resp.get_json()
        assert "ALLOWED_REPOS" in resp.get_json()["reason"]
    assert jobs(app.extensions["ribbit"].store) == []
    app.extensions["ribbit"].db.dispose()


def test_gitlab_confidential_issue_is_refused(post_gitlab: Any, store: Any) -> None:
    from tests.support import load_payload

    payload = load_payload("gitlab", "issue.update.labeled")
    payload["object_attributes"]["confidential"] = True
    resp = post_gitlab(payload, "Confidential Issue Hook", "c-1")
    assert resp.get_json()["status"] == "refused" and "confidential" in resp.get_json()["reason"]
    note = load_payload("gitlab", "note.issue")
    note["object_attributes"]["note"] = "/ribbit retry"
    note["issue"]["confidential"] = True
    resp = post_gitlab(note, "Confidential Note Hook", "c-2")
    assert resp.get_json()["status"] == "refused"
    assert jobs(store) == []


def test_branch_name_with_a_trailing_newline_is_refused() -> None:
    import pytest

    from bot.forges.branches import UnsafeRefError, validate_branch_name

    with pytest.raises(UnsafeRefError):
        validate_branch_name("ribbit/issue-1-x\n")
