"""Real, signed webhooks from the local forge to the bot under test.

GitHub: ``X-GitHub-Event``, ``X-GitHub-Delivery`` (a uuid) and
``X-Hub-Signature-256: sha256=HMAC(secret, body)``; payloads have the shape of
``@octokit/webhooks-examples`` (``webhook-examples.json``), with objects
rendered exactly as the REST answers are. GitLab: ``X-Gitlab-Event``
(``Issue Hook``, ``Note Hook``, ``Merge Request Hook``), ``X-Gitlab-Token``
and ``X-Gitlab-Event-UUID``, payloads as in GitLab's webhook documentation.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import requests

from tests.forge import github_api, gitlab_api
from tests.forge.state import CommentRec, IssueRec, PullRec, RepoRec, ReviewRec

if TYPE_CHECKING:
    from tests.forge.server import LocalForge


@dataclass(frozen=True)
class Delivery:
    forge: str
    event: str
    delivery_id: str
    payload: dict[str, Any]
    body: bytes
    headers: dict[str, str]
    status_code: int | None  # None: no bot URL configured, nothing was sent
    response_text: str


def github_signature(secret: str, body: bytes) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def _send(forge: LocalForge, kind: str, event: str, payload: dict[str, Any]) -> Delivery:
    body = json.dumps(payload).encode()
    delivery_id = str(uuid.uuid4())
    target = forge.github_webhook if kind == "github" else forge.gitlab_webhook
    if kind == "github":
        headers = {
            "Content-Type": "application/json",
            "X-GitHub-Event": event,
            "X-GitHub-Delivery": delivery_id,
            "User-Agent": "GitHub-Hookshot/local",
            "X-GitHub-Hook-ID": "1",
        }
        if target is not None:
            headers["X-Hub-Signature-256"] = github_signature(target[1], body)
    else:
        headers = {
            "Content-Type": "application/json",
            "X-Gitlab-Event": event,
            "X-Gitlab-Event-UUID": delivery_id,
            "X-Gitlab-Webhook-UUID": delivery_id,
            "User-Agent": "GitLab/local",
        }
        if target is not None:
            headers["X-Gitlab-Token"] = target[1]
    status: int | None = None
    text = ""
    if target is not None:
        response = requests.post(target[0], data=body, headers=headers, timeout=30)
        status, text = response.status_code, response.text
    delivery = Delivery(kind, event, delivery_id, payload, body, headers, status, text)
    forge.webhook_deliveries.append(delivery)
    return delivery


def _github_common(forge: LocalForge, repo: RepoRec, actor: str) -> dict[str, Any]:
    r = github_api.Renderer(forge)
    common: dict[str, Any] = {"repository": r.repo(repo), "sender": r.user(actor)}
    for installation in forge.installations.values():
        if repo.full_name in installation.repos:
            common["installation"] = {
                "id": installation.id,
                "node_id": f"MDIzOkludGVncmF0aW9uSW5zdGFsbGF0aW9u{installation.id}",
            }
    return common


def _gitlab_common(forge: LocalForge, repo: RepoRec, actor: str) -> dict[str, Any]:
    r = gitlab_api.Renderer(forge)
    user = forge.users.get(actor)
    project = r.project(repo)
    return {
        "user": {
            "id": user.id if user else 0,
            "name": actor.title(),
            "username": actor,
            "avatar_url": None,
            "email": "[REDACTED]",
        },
        "project_id": repo.id,
        "project": {
            "id": repo.id,
            "name": repo.name,
            "description": None,
            "web_url": project["web_url"],
            "avatar_url": None,
            "git_ssh_url": project["ssh_url_to_repo"],
            "git_http_url": project["http_url_to_repo"],
            "namespace": repo.owner,
            "visibility_level": 0 if repo.private else 20,
            "path_with_namespace": repo.full_name,
            "default_branch": repo.default_branch,
            "ci_config_path": None,
            "homepage": project["web_url"],
            "url": project["ssh_url_to_repo"],
            "ssh_url": project["ssh_url_to_repo"],
            "http_url": project["http_url_to_repo"],
        },
        "repository": {
            "name": repo.name,
            "url": project["ssh_url_to_repo"],
            "description": None,
            "homepage": project["web_url"],
        },
    }


def _gitlab_label(repo: RepoRec, name: str) -> dict[str, Any]:
    return {
        "id": repo.label_id(name),
        "title": name,
        "color": "#ededed",
        "project_id": repo.id,
        "created_at": None,
        "updated_at": None,
        "template": False,
        "description": None,
        "type": "ProjectLabel",
        "group_id": None,
    }


def _gitlab_issue_attrs(
    forge: LocalForge, repo: RepoRec, issue: IssueRec, action: str | None
) -> dict[str, Any]:
    data = gitlab_api.Renderer(forge).issue(repo, issue)
    author = forge.users.get(issue.author)
    attrs = {
        "id": issue.id,
        "iid": issue.number,
        "title": issue.title,
        "description": issue.body,
        "state": data["state"],
        "project_id": repo.id,
        "author_id": author.id if author else 0,
        "created_at": data["created_at"],
        "updated_at": data["updated_at"],
        "closed_at": data["closed_at"],
        "url": data["web_url"],
        "labels": [_gitlab_label(repo, n) for n in issue.labels],
        "confidential": False,
        "assignee_ids": [],
        "type": "Issue",
    }
    if action:
        attrs["action"] = action
    return attrs


def issue_labeled(
    forge: LocalForge, repo: RepoRec, issue: IssueRec, label: str, actor: str, previous: list[str]
) -> Delivery:
    if repo.forge == "github":
        r = github_api.Renderer(forge)
        payload = {
            "action": "labeled",
            "issue": r.issue(repo, issue),
            "label": r.label(repo, label),
            **_github_common(forge, repo, actor),
        }
        return _send(forge, "github", "issues", payload)
    payload = {
        "object_kind": "issue",
        "event_type": "issue",
        **_gitlab_common(forge, repo, actor),
        "object_attributes": _gitlab_issue_attrs(forge, repo, issue, "update"),
        "labels": [_gitlab_label(repo, n) for n in issue.labels],
        "changes": {
            "labels": {
                "previous": [_gitlab_label(repo, n) for n in previous],
                "current": [_gitlab_label(repo, n) for n in issue.labels],
            }
        },
    }
    return _send(forge, "gitlab", "Issue Hook", payload)


def comment_created(
    forge: LocalForge, repo: RepoRec, issue: IssueRec | PullRec, comment: CommentRec
) -> Delivery:
    if repo.forge == "github":
        r = github_api.Renderer(forge)
        payload = {
            "action": "created",
            "issue": r.issue(repo, issue),
            "comment": r.comment(repo, issue.number, comment),
            **_github_common(forge, repo, comment.author),
        }
        return _send(forge, "github", "issue_comment", payload)
    author = forge.users.get(comment.author)
    on_mr = isinstance(issue, PullRec)
    path = "merge_requests" if on_mr else "issues"
    payload = {
        "object_kind": "note",
        "event_type": "note",
        **_gitlab_common(forge, repo, comment.author),
        "object_attributes": {
            "id": comment.id,
            "note": comment.body,
            "noteable_type": "MergeRequest" if on_mr else "Issue",
            "author_id": author.id if author else 0,
            "created_at": gitlab_api.ts(comment.created_at),
            "updated_at": gitlab_api.ts(comment.updated_at),
            "project_id": repo.id,
            "noteable_id": issue.id,
            "system": False,
            "action": "create",
            "url": f"{forge.gitlab_url}/{repo.full_name}/-/{path}/{issue.number}#note_{comment.id}",
        },
    }
    if isinstance(issue, PullRec):
        payload["merge_request"] = _gitlab_mr_attrs(forge, repo, issue, "update")
        del payload["merge_request"]["action"]
    else:
        payload["issue"] = _gitlab_issue_attrs(forge, repo, issue, None)
    return _send(forge, "gitlab", "Note Hook", payload)


def _gitlab_mr_attrs(forge: LocalForge, repo: RepoRec, pr: PullRec, action: str) -> dict[str, Any]:
    data = gitlab_api.Renderer(forge).merge_request(repo, pr)
    author = forge.users.get(pr.author)
    return {
        "id": pr.id,
        "iid": pr.number,
        "title": pr.title,
        "description": pr.body,
        "state": data["state"],
        "action": action,
        "draft": pr.draft,
        "work_in_progress": pr.draft,
        "source_branch": pr.head,
        "target_branch": pr.base,
        "source_project_id": repo.id,
        "target_project_id": repo.id,
        "author_id": author.id if author else 0,
        "created_at": data["created_at"],
        "updated_at": data["updated_at"],
        "merge_commit_sha": pr.merge_commit_sha,
        "merge_status": "can_be_merged",
        "detailed_merge_status": data["detailed_merge_status"],
        "url": data["web_url"],
        "last_commit": {"id": pr.head_sha},
        "labels": [_gitlab_label(repo, n) for n in pr.labels],
        "reviewer_ids": [forge.users[n].id for n in pr.requested_reviewers if n in forge.users],
    }


def pull_closed(forge: LocalForge, repo: RepoRec, pr: PullRec, actor: str) -> Delivery:
    if repo.forge == "github":
        r = github_api.Renderer(forge)
        payload = {
            "action": "closed",
            "number": pr.number,
            "pull_request": r.pull(repo, pr),
            **_github_common(forge, repo, actor),
        }
        return _send(forge, "github", "pull_request", payload)
    payload = {
        "object_kind": "merge_request",
        "event_type": "merge_request",
        **_gitlab_common(forge, repo, actor),
        "object_attributes": _gitlab_mr_attrs(forge, repo, pr, "merge" if pr.merged else "close"),
        "labels": [_gitlab_label(repo, n) for n in pr.labels],
        "changes": {},
        "reviewers": [gitlab_api.Renderer(forge).user(n) for n in pr.requested_reviewers],
    }
    return _send(forge, "gitlab", "Merge Request Hook", payload)


def review_submitted(forge: LocalForge, repo: RepoRec, pr: PullRec, review: ReviewRec) -> Delivery:
    if repo.forge == "github":
        r = github_api.Renderer(forge)
        review_json = r.review(repo, pr, review)
        review_json["state"] = review.state.lower()  # webhooks use lower case here
        payload = {
            "action": "submitted",
            "review": review_json,
            "pull_request": r.pull(repo, pr, simple=True),
            **_github_common(forge, repo, review.author),
        }
        return _send(forge, "github", "pull_request_review", payload)
    action = {"APPROVED": "approved", "CHANGES_REQUESTED": "update"}.get(review.state, "update")
    payload = {
        "object_kind": "merge_request",
        "event_type": "merge_request",
        **_gitlab_common(forge, repo, review.author),
        "object_attributes": _gitlab_mr_attrs(forge, repo, pr, action),
        "labels": [_gitlab_label(repo, n) for n in pr.labels],
        "changes": {},
        "reviewers": [gitlab_api.Renderer(forge).user(n) for n in pr.requested_reviewers],
    }
    return _send(forge, "gitlab", "Merge Request Hook", payload)
