"""The local forge's GitHub answers validate against GitHub's published response schemas
(tests/forge/openapi-subset.json, vendored from @octokit/openapi by vendor_openapi.py)."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest
import requests

from tests.forge.github_api import subset
from tests.plugins.forge import ForgeWorld

pytestmark = pytest.mark.integration


def _validate(endpoint: str, status: int, body: Any) -> None:
    spec = subset()["endpoints"][endpoint]
    assert status == spec["status"], endpoint
    schema = {"$defs": subset()["$defs"], **spec["schema"]}
    validator = jsonschema.Draft202012Validator(schema)
    errors = sorted(validator.iter_errors(body), key=lambda e: list(e.path))
    assert not errors, f"{endpoint}: " + "; ".join(
        f"{'/'.join(map(str, e.path))}: {e.message[:200]}" for e in errors[:5]
    )


def test_forge_github_answers_match_the_openapi_schemas(forge_world: ForgeWorld) -> None:
    world = forge_world
    forge, full = world.forge, world.github.full_name
    repo = forge.repo("github", full)
    issue = forge.create_issue(
        "github", full, title="Bug", body="b", author="maya", labels=("ribbit",)
    )
    forge.comment_as("github", full, issue.number, author="maya", body="hi")
    repo.git("branch", "ribbit/issue-1-x", "main")
    session = requests.Session()
    session.headers["Authorization"] = f"token {world.bot.token}"
    api = f"{forge.github_api_url}/repos/{full}"

    def call(method: str, path: str, endpoint: str, payload: Any = None) -> Any:
        response = session.request(
            method, api + path, data=None if payload is None else json.dumps(payload)
        )
        body = response.json()
        _validate(endpoint, response.status_code, body)
        return body

    r = "/repos/{owner}/{repo}"
    call("GET", "", f"GET {r}")
    call("GET", f"/issues/{issue.number}", f"GET {r}/issues/{{issue_number}}")
    comment = call(
        "POST",
        f"/issues/{issue.number}/comments",
        f"POST {r}/issues/{{issue_number}}/comments",
        {"body": "status"},
    )
    call("GET", f"/issues/{issue.number}/comments", f"GET {r}/issues/{{issue_number}}/comments")
    call("GET", f"/issues/comments/{comment['id']}", f"GET {r}/issues/comments/{{comment_id}}")
    call(
        "PATCH",
        f"/issues/comments/{comment['id']}",
        f"PATCH {r}/issues/comments/{{comment_id}}",
        {"body": "edited"},
    )
    call(
        "POST",
        f"/issues/{issue.number}/labels",
        f"POST {r}/issues/{{issue_number}}/labels",
        ["bug"],
    )
    call("POST", "/labels", f"POST {r}/labels", {"name": "ribbit", "color": "0e8a16"})
    call("GET", "/labels/ribbit", f"GET {r}/labels/{{name}}")
    call("GET", "/collaborators/maya/permission", f"GET {r}/collaborators/{{username}}/permission")
    call("GET", "/contents/.ribbit.yml", f"GET {r}/contents/{{path}}")
    pr = call(
        "POST",
        "/pulls",
        f"POST {r}/pulls",
        {
            "head": "ribbit/issue-1-x",
            "base": "main",
            "title": "Fix",
            "body": "Fixes #1",
            "draft": True,
        },
    )
    call("GET", "/pulls?state=all", f"GET {r}/pulls")
    call("GET", f"/pulls/{pr['number']}", f"GET {r}/pulls/{{pull_number}}")
    call(
        "POST",
        f"/pulls/{pr['number']}/requested_reviewers",
        f"POST {r}/pulls/{{pull_number}}/requested_reviewers",
        {"reviewers": ["maya"]},
    )
    forge.submit_review(
        "github",
        full,
        pr["number"],
        author="maya",
        state="COMMENTED",
        body="ok",
        comments=(("README.md", 1, "typo"),),
    )
    call("GET", f"/pulls/{pr['number']}/reviews", f"GET {r}/pulls/{{pull_number}}/reviews")
    call("GET", f"/pulls/{pr['number']}/comments", f"GET {r}/pulls/{{pull_number}}/comments")
    sha = pr["head"]["sha"]
    call(
        "POST",
        f"/statuses/{sha}",
        f"POST {r}/statuses/{{sha}}",
        {"state": "success", "context": "ribbit/gates", "description": "all gates passed"},
    )
    call("GET", f"/commits/{sha}/statuses", f"GET {r}/commits/{{ref}}/statuses")
    run = call(
        "POST",
        "/check-runs",
        f"POST {r}/check-runs",
        {
            "name": "ribbit/gates",
            "head_sha": sha,
            "external_id": "ribbit-job-sha",
            "status": "completed",
            "conclusion": "failure",
            "details_url": "https://ribbit.example/review/jobs/j?sig=s",
            "output": {
                "title": "Ribbit gates: semgrep ✖",
                "summary": "1 finding",
                "annotations": [
                    {
                        "path": "README.md",
                        "start_line": 1,
                        "end_line": 1,
                        "annotation_level": "failure",
                        "title": "semgrep: no-eval",
                        "message": "eval",
                    }
                ],
            },
        },
    )
    listed = call(
        "GET",
        f"/commits/{sha}/check-runs?check_name=ribbit/gates&filter=all",
        f"GET {r}/commits/{{ref}}/check-runs",
    )
    assert [c["external_id"] for c in listed["check_runs"]] == [run["external_id"]]


def test_forge_openapi_check_can_fail() -> None:
    with pytest.raises(AssertionError, match="GET /repos"):
        _validate("GET /repos/{owner}/{repo}", 200, {"id": "not-an-integer"})


def test_forge_installation_token_answer_matches_the_schema(forge_world: ForgeWorld) -> None:
    import time

    import jwt
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    public = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    forge = forge_world.forge
    forge.register_app(9, public.decode())
    forge.add_installation(90, 9, [forge_world.github.full_name])
    now = int(time.time())
    token = jwt.encode({"iat": now - 60, "exp": now + 540, "iss": "9"}, key, algorithm="RS256")

    response = requests.post(
        f"{forge.github_api_url}/app/installations/90/access_tokens",
        headers={"Authorization": f"Bearer {token}"},
        timeout=30,
    )

    _validate(
        "POST /app/installations/{installation_id}/access_tokens",
        response.status_code,
        response.json(),
    )
    bearer = {"Authorization": f"Bearer {token}"}
    app = requests.get(f"{forge.github_api_url}/app", headers=bearer, timeout=30)
    _validate("GET /app", app.status_code, app.json())
    found = requests.get(
        f"{forge.github_api_url}/repos/{forge_world.github.full_name}/installation",
        headers=bearer,
        timeout=30,
    )
    _validate("GET /repos/{owner}/{repo}/installation", found.status_code, found.json())
    assert found.json()["id"] == 90
