"""Extract what the local forge needs from GitHub's published descriptions.

Writes ``openapi-subset.json``: for each GitHub endpoint the local forge
implements, its success status and response schema (OpenAPI 3.0's
``nullable`` turned into JSON Schema so ``jsonschema`` can check it), the
schemas those refer to, and the official examples the forge fills in to build
its answers. Also writes ``webhook-examples.json``: one real payload per
webhook the forge sends. Rerun after bumping the packages::

    cd /tmp && npm pack @octokit/openapi @octokit/webhooks-examples
    tar xzf octokit-openapi-*.tgz && mv package openapi
    tar xzf octokit-webhooks-examples-*.tgz && mv package webhooks-examples
    python -m tests.forge.vendor_openapi /tmp/openapi /tmp/webhooks-examples
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent

# (method, path template, success status): the endpoints tests/forge/github_api.py serves.
ENDPOINTS = [
    ("get", "/repos/{owner}/{repo}", "200"),
    ("get", "/repos/{owner}/{repo}/issues/{issue_number}", "200"),
    ("get", "/repos/{owner}/{repo}/issues/{issue_number}/comments", "200"),
    ("post", "/repos/{owner}/{repo}/issues/{issue_number}/comments", "201"),
    ("get", "/repos/{owner}/{repo}/issues/comments/{comment_id}", "200"),
    ("patch", "/repos/{owner}/{repo}/issues/comments/{comment_id}", "200"),
    ("post", "/repos/{owner}/{repo}/issues/{issue_number}/labels", "200"),
    ("get", "/repos/{owner}/{repo}/collaborators/{username}/permission", "200"),
    ("get", "/repos/{owner}/{repo}/contents/{path}", "200"),
    ("get", "/repos/{owner}/{repo}/pulls", "200"),
    ("post", "/repos/{owner}/{repo}/pulls", "201"),
    ("get", "/repos/{owner}/{repo}/pulls/{pull_number}", "200"),
    ("post", "/repos/{owner}/{repo}/pulls/{pull_number}/requested_reviewers", "201"),
    ("get", "/repos/{owner}/{repo}/pulls/{pull_number}/reviews", "200"),
    ("get", "/repos/{owner}/{repo}/pulls/{pull_number}/comments", "200"),
    ("post", "/repos/{owner}/{repo}/statuses/{sha}", "201"),
    ("get", "/repos/{owner}/{repo}/commits/{ref}/statuses", "200"),
    ("post", "/repos/{owner}/{repo}/check-runs", "201"),
    ("get", "/repos/{owner}/{repo}/commits/{ref}/check-runs", "200"),
    ("post", "/app/installations/{installation_id}/access_tokens", "201"),
    ("get", "/app", "200"),
    ("get", "/repos/{owner}/{repo}/installation", "200"),
    ("get", "/repos/{owner}/{repo}/labels/{name}", "200"),
    ("post", "/repos/{owner}/{repo}/labels", "201"),
    ("post", "/app-manifests/{code}/conversions", "201"),
]

# Official examples the forge uses as templates (name in components/examples -> template name).
EXAMPLES = {
    "full-repository-default-response": "repository",
    "issue": "issue",
    "issue-comment": "issue-comment",
    "label": "label",
    "pull-request": "pull-request",
    "pull-request-simple-items": "pull-request-simple",
    "pull-request-review-items": "pull-request-review",
    "pull-request-review-comment-items": "pull-request-review-comment",
    "status": "status",
    "check-run-example-of-completed-conclusion": "check-run",
    "installation-token": "installation-token",
    "repository-collaborator-permission-response-if-user-has-admin-permissions": (
        "collaborator-permission"
    ),
    "content-file-response-if-content-is-a-file": "content-file",
    "integration": "integration",
    "installation": "installation",
    "integration-from-manifest": "integration-from-manifest",
}

WEBHOOKS = [
    ("issues", "labeled"),
    ("issue_comment", "created"),
    ("pull_request", "closed"),
    ("pull_request_review", "submitted"),
]


def to_json_schema(node: Any) -> Any:
    """OpenAPI 3.0 schema -> JSON Schema: ``nullable`` becomes a null alternative."""
    if isinstance(node, list):
        return [to_json_schema(item) for item in node]
    if not isinstance(node, dict):
        return node
    out = {
        key: to_json_schema(value)
        for key, value in node.items()
        if key not in ("nullable", "example", "examples", "description", "x-github")
    }
    if node.get("nullable"):
        if "$ref" in out or "allOf" in out or "anyOf" in out or "oneOf" in out:
            return {"anyOf": [out, {"type": "null"}]}
        if "type" in out:
            out["type"] = [out["type"], "null"]
        if "enum" in out:
            out["enum"] = [*out["enum"], None]
    if "$ref" in out:
        out["$ref"] = out["$ref"].replace("#/components/schemas/", "#/$defs/")
    return out


def collect_refs(node: Any, schemas: dict[str, Any], found: set[str]) -> None:
    if isinstance(node, list):
        for item in node:
            collect_refs(item, schemas, found)
    elif isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/components/schemas/"):
            name = ref.rsplit("/", 1)[1]
            if name not in found:
                found.add(name)
                collect_refs(schemas[name], schemas, found)
        for value in node.values():
            collect_refs(value, schemas, found)


def first_item(value: Any) -> Any:
    return value[0] if isinstance(value, list) else value


def main(openapi_dir: Path, webhooks_dir: Path) -> None:
    spec = json.loads((openapi_dir / "generated" / "api.github.com.json").read_text())
    schemas = spec["components"]["schemas"]
    endpoints: dict[str, Any] = {}
    needed: set[str] = set()
    for method, path, status in ENDPOINTS:
        response = spec["paths"][path][method]["responses"][status]
        content = response["content"]
        media = "application/json" if "application/json" in content else next(iter(content))
        schema = content[media]["schema"]
        collect_refs(schema, schemas, needed)
        endpoints[f"{method.upper()} {path}"] = {
            "status": int(status),
            "schema": to_json_schema(schema),
        }
    examples = {
        template: first_item(spec["components"]["examples"][name]["value"])
        for name, template in EXAMPLES.items()
    }
    subset = {
        "source": f"@octokit/openapi generated/api.github.com.json (openapi {spec['openapi']}, "
        f"info.version {spec['info']['version']})",
        "endpoints": endpoints,
        "$defs": {name: to_json_schema(schemas[name]) for name in sorted(needed)},
        "examples": examples,
    }
    (HERE / "openapi-subset.json").write_text(json.dumps(subset, indent=1, sort_keys=True) + "\n")

    hooks = json.loads((webhooks_dir / "api.github.com" / "index.json").read_text())
    chosen: dict[str, Any] = {}
    for event, action in WEBHOOKS:
        entry = next(h for h in hooks if h["name"] == event)
        chosen[f"{event}.{action}"] = next(
            e for e in entry["examples"] if e.get("action") == action
        )
    (HERE / "webhook-examples.json").write_text(json.dumps(chosen, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
