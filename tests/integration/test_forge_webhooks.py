"""The local forge sends real, signed webhooks whose payloads have the real shapes."""

from __future__ import annotations

import hashlib
import hmac
import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from werkzeug.serving import make_server
from werkzeug.wrappers import Request, Response

from bot.forges.base import ForgeName
from tests.forge.server import LocalForge
from tests.plugins.forge import ForgeWorld
from tests.support import serving

pytestmark = pytest.mark.integration
EXAMPLES = json.loads((Path(__file__).parents[1] / "forge" / "webhook-examples.json").read_text())
# Keys GitHub adds only for organisations, enterprises or Apps.
OPTIONAL = {"organization", "enterprise", "installation"}


class Receiver:
    """A stand-in for the bot's webhook endpoint (a WSGI app): records what arrives."""

    def __init__(self) -> None:
        self.received: list[tuple[dict[str, str], bytes]] = []
        self.url = ""

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Any:
        request = Request(environ)
        self.received.append((dict(request.headers), request.get_data()))
        return Response("accepted", status=202)(environ, start_response)


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    with serving(make_server("127.0.0.1", 0, r, threaded=True)) as url:
        r.url = f"{url}/webhooks"
        yield r


def _missing_keys(example: Any, ours: Any, path: str = "") -> list[str]:
    """Keys of the real example (two levels deep) that our payload lacks."""
    missing = []
    if isinstance(example, dict) and isinstance(ours, dict):
        for key, value in example.items():
            if key in OPTIONAL and not path:
                continue
            if key not in ours:
                missing.append(f"{path}{key}")
            elif path.count(".") < 1 and isinstance(value, dict) and isinstance(ours[key], dict):
                missing += _missing_keys(value, ours[key], f"{path}{key}.")
    return missing


def _open_pr(forge: LocalForge, world: ForgeWorld, kind: ForgeName) -> int:
    repo = forge.repo(kind, world.repo(kind).full_name)
    repo.git("branch", "ribbit/issue-1-x", "main")
    return forge.add_pull_record(
        repo, "ribbit-bot", "Fix", "Fixes #1", "ribbit/issue-1-x", "main", draft=True
    ).number


def test_forge_github_webhooks_are_signed_and_shaped_like_github(
    forge_world: ForgeWorld, receiver: Receiver
) -> None:
    forge, full = forge_world.forge, forge_world.github.full_name
    secret = "hook-secret-" + uuid.uuid4().hex
    forge.configure_webhooks(github=(receiver.url, secret))
    issue = forge.create_issue("github", full, title="Bug", author="maya")
    number = _open_pr(forge, forge_world, "github")

    sent = [
        forge.add_label("github", full, issue.number, "ribbit", actor="maya"),
        forge.comment_as("github", full, issue.number, author="maya", body="/ribbit retry")[1],
        forge.submit_review("github", full, number, author="maya", state="APPROVED")[1],
        forge.merge_pull_request("github", full, number, actor="maya"),
    ]

    assert [d.status_code for d in sent if d] == [202, 202, 202, 202]
    assert len(receiver.received) == 4
    events = []
    for headers, body in receiver.received:
        expected = "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
        assert hmac.compare_digest(headers["X-Hub-Signature-256"], expected)
        uuid.UUID(headers["X-Github-Delivery"])
        payload = json.loads(body)
        events.append(f"{headers['X-Github-Event']}.{payload['action']}")
        example = EXAMPLES[f"{headers['X-Github-Event']}.{payload['action']}"]
        assert _missing_keys(example, payload) == [], headers["X-Github-Event"]
        assert payload["repository"]["full_name"] == full
        assert payload["sender"]["login"] == "maya"
    assert events == [
        "issues.labeled",
        "issue_comment.created",
        "pull_request_review.submitted",
        "pull_request.closed",
    ]
    labeled = json.loads(receiver.received[0][1])
    assert labeled["label"]["name"] == "ribbit"
    assert labeled["issue"]["number"] == issue.number
    closed = json.loads(receiver.received[3][1])
    assert closed["pull_request"]["merged"] is True
    assert closed["pull_request"]["merged_by"]["login"] == "maya"


def test_forge_gitlab_webhooks_carry_the_token_and_gitlab_shapes(
    forge_world: ForgeWorld, receiver: Receiver
) -> None:
    forge, full = forge_world.forge, forge_world.gitlab.full_name
    token = "gl-hook-" + uuid.uuid4().hex
    forge.configure_webhooks(gitlab=(receiver.url, token))
    issue = forge.create_issue("gitlab", full, title="Bug", author="maya")
    number = _open_pr(forge, forge_world, "gitlab")

    forge.add_label("gitlab", full, issue.number, "ribbit", actor="maya")
    forge.comment_as("gitlab", full, issue.number, author="maya", body="/ribbit retry")
    forge.merge_pull_request("gitlab", full, number, actor="maya")

    kinds = []
    for headers, body in receiver.received:
        assert headers["X-Gitlab-Token"] == token
        uuid.UUID(headers["X-Gitlab-Event-Uuid"])
        payload = json.loads(body)
        kinds.append((headers["X-Gitlab-Event"], payload["object_kind"]))
        assert payload["project"]["path_with_namespace"] == full
        assert payload["user"]["username"] == "maya"
    assert kinds == [
        ("Issue Hook", "issue"),
        ("Note Hook", "note"),
        ("Merge Request Hook", "merge_request"),
    ]
    labeled = json.loads(receiver.received[0][1])
    assert [label["title"] for label in labeled["changes"]["labels"]["current"]] == ["ribbit"]
    assert labeled["object_attributes"]["iid"] == issue.number
    note = json.loads(receiver.received[1][1])
    assert note["object_attributes"]["note"] == "/ribbit retry"
    assert note["object_attributes"]["noteable_type"] == "Issue"
    assert note["issue"]["iid"] == issue.number
    merged = json.loads(receiver.received[2][1])
    assert merged["object_attributes"]["action"] == "merge"
    assert merged["object_attributes"]["state"] == "merged"


def test_forge_without_a_bot_url_records_but_sends_nothing(forge_world: ForgeWorld) -> None:
    forge = forge_world.forge
    issue = forge.create_issue("github", forge_world.github.full_name, title="x", author="maya")
    delivery = forge.add_label(
        "github", forge_world.github.full_name, issue.number, "ribbit", actor="maya"
    )
    assert delivery is not None and delivery.status_code is None
    assert "X-Hub-Signature-256" not in delivery.headers
    assert forge.webhook_deliveries == [delivery]


@pytest.mark.parametrize("kind", ["github", "gitlab"])
def test_forge_comment_on_a_pull_request_is_a_pr_comment_event(
    kind: ForgeName, forge_world: ForgeWorld, receiver: Receiver
) -> None:
    forge, full = forge_world.forge, forge_world.repo(kind).full_name
    forge.configure_webhooks(github=(receiver.url, "s" * 16), gitlab=(receiver.url, "t" * 16))
    number = _open_pr(forge, forge_world, kind)

    forge.comment_on_pull_as(kind, full, number, author="maya", body="/ribbit revise please")

    payload = json.loads(receiver.received[0][1])
    if kind == "github":
        assert payload["action"] == "created"
        assert payload["issue"]["number"] == number
        assert "pull_request" in payload["issue"]  # how GitHub marks a PR conversation
    else:
        assert payload["object_attributes"]["noteable_type"] == "MergeRequest"
        assert payload["merge_request"]["iid"] == number
        assert payload["merge_request"]["source_branch"] == "ribbit/issue-1-x"
