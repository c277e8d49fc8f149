"""Abuse of the webhook endpoints, each case with its expected answer: whatever an
unauthenticated or hostile sender does costs a bounded amount and changes no job."""

from __future__ import annotations

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
        assert post_github(b"{}", f"made-up-{n}" * 20, f"u-{n}").status_code == 202
    assert _event_series(client) == [
        'ribbit_webhook_events_total{event="other",forge="github",outcome="ignored"}'
    ]


def test_every_label_value_is_from_the_fixed_set(client: Any, post_github: Any) -> None:
    from bot.metrics import EVENT_LABELS, OTHER, OUTCOME_LABELS, UNVERIFIED

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
