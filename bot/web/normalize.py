"""GitHub and GitLab webhook payloads -> forge-neutral events (bot/web/events.py).

A payload that parses as JSON but lacks a field we need raises
:class:`PayloadError` (answered 400); an event we do not act on becomes
:class:`~bot.web.events.Ignored` with the reason (answered 202).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from bot.web.events import (
    Actor,
    CommentCreated,
    Event,
    Ignored,
    IssueLabeled,
    Ping,
    PullRequestClosed,
    ReviewSubmitted,
)


class PayloadError(ValueError):
    """The payload is JSON but not the shape this event type has."""


def _get(obj: Any, *path: str | int, kind: type | tuple[type, ...] = object) -> Any:
    cur = obj
    for part in path:
        try:
            cur = cur[part]
        except (KeyError, IndexError, TypeError):
            raise PayloadError(f"missing field {'.'.join(map(str, path))}") from None
    if not isinstance(cur, kind) or (kind is int and isinstance(cur, bool)):
        raise PayloadError(f"field {'.'.join(map(str, path))} has the wrong type")
    return cur


# Issue, PR and MR numbers are stored in 32-bit columns; a larger one is no real number.
MAX_NUMBER = 2**31 - 1


def _num(obj: Any, *path: str | int) -> int:
    value: int = _get(obj, *path, kind=int)
    if not 1 <= value <= MAX_NUMBER:
        raise PayloadError(f"field {'.'.join(map(str, path))} is out of range")
    return value


def _text(obj: Any, *path: str | int) -> str:
    """An optional text field: "" when missing or null, a 400 when it is not text."""
    try:
        value = _get(obj, *path)
    except PayloadError:
        return ""
    if value is None:
        return ""
    if not isinstance(value, str):
        raise PayloadError(f"field {'.'.join(map(str, path))} has the wrong type")
    return value


def _opt(obj: Any, *path: str | int) -> Any:
    try:
        return _get(obj, *path)
    except PayloadError:
        return None


def _time(value: Any) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    text = value.replace(" UTC", "+00:00").replace("Z", "+00:00")
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        return None


# -- GitHub -----------------------------------------------------------------------------------


def _gh_actor(payload: dict[str, Any]) -> Actor:
    login = _get(payload, "sender", "login", kind=str)
    kind = _opt(payload, "sender", "type")
    return Actor(login=login, is_bot=kind == "Bot" or login.endswith("[bot]"))


def _gh_common(payload: dict[str, Any], delivery_id: str) -> dict[str, Any]:
    installation = _opt(payload, "installation", "id")
    return {
        "forge": "github",
        "repo": _get(payload, "repository", "full_name", kind=str),
        "actor": _gh_actor(payload),
        "delivery_id": delivery_id,
        "installation_id": installation
        if isinstance(installation, int) and 0 < installation < 2**63
        else None,
        "private": _gh_private(payload),
    }


def _gh_private(payload: dict[str, Any]) -> bool | None:
    private = _opt(payload, "repository", "private")
    return private if isinstance(private, bool) else None


def _gl_private(payload: dict[str, Any]) -> bool | None:
    # GitLab: 0 private, 10 internal (every signed-in user: not public), 20 public.
    level = _opt(payload, "project", "visibility_level")
    if isinstance(level, bool) or not isinstance(level, int):
        return None
    return level != 20


# author_association values that never come with write access (COLLABORATOR and MEMBER
# may or may not: the worker asks the forge).
GITHUB_OUTSIDERS = frozenset(
    {"NONE", "CONTRIBUTOR", "FIRST_TIMER", "FIRST_TIME_CONTRIBUTOR", "MANNEQUIN"}
)


def from_github(event: str, delivery_id: str, payload: Any) -> Event | Ignored:
    if not isinstance(payload, dict):
        raise PayloadError("the payload must be a JSON object")
    action = payload.get("action")
    key = f"{event}.{action}" if isinstance(action, str) else event
    if event == "ping":
        repo = _opt(payload, "repository", "full_name") or ""
        sender = _opt(payload, "sender", "login") or ""
        return Ping(
            forge="github",
            repo=repo,
            actor=Actor(sender),
            delivery_id=delivery_id,
            installation_id=None,
        )
    if key == "issues.labeled":
        if _opt(payload, "issue", "pull_request") is not None:
            return Ignored("label added to a pull request, not an issue", key)
        return IssueLabeled(
            **_gh_common(payload, delivery_id),
            issue_number=_num(payload, "issue", "number"),
            label=_get(payload, "label", "name", kind=str),
            title=_get(payload, "issue", "title", kind=str),
        )
    if key == "issue_comment.created":
        return _github_comment(payload, delivery_id)
    if key == "pull_request.closed":
        pr = _get(payload, "pull_request", kind=dict)
        return PullRequestClosed(
            **_gh_common(payload, delivery_id),
            pr_number=_num(pr, "number"),
            merged=bool(pr.get("merged")),
            head_branch=_get(pr, "head", "ref", kind=str),
            head_sha=_get(pr, "head", "sha", kind=str),
            base_sha=_get(pr, "base", "sha", kind=str),
            body=_text(pr, "body"),
            author=_text(pr, "user", "login"),
            merged_by=_text(pr, "merged_by", "login") or None,
            closed_at=_time(pr.get("closed_at")),
            merge_commit_sha=_text(pr, "merge_commit_sha") or None,
        )
    if key == "pull_request_review.submitted":
        return ReviewSubmitted(
            **_gh_common(payload, delivery_id),
            pr_number=_num(payload, "pull_request", "number"),
            state=str(_get(payload, "review", "state", kind=str)).lower(),
            body=_text(payload, "review", "body"),
            head_branch=_get(payload, "pull_request", "head", "ref", kind=str),
            outsider=_opt(payload, "review", "author_association") in GITHUB_OUTSIDERS,
        )
    return Ignored(f"GitHub event {key} is not one Ribbit acts on", key)


def _github_comment(payload: dict[str, Any], delivery_id: str) -> CommentCreated:
    """An issue_comment on an issue or, where the issue carries ``pull_request``, a PR."""
    on_pr = _opt(payload, "issue", "pull_request") is not None
    number = _num(payload, "issue", "number")
    return CommentCreated(
        **_gh_common(payload, delivery_id),
        issue_number=None if on_pr else number,
        pr_number=number if on_pr else None,
        body=_get(payload, "comment", "body", kind=str),
        comment_id=_get(payload, "comment", "id", kind=int),
        title="" if on_pr else _text(payload, "issue", "title"),
        outsider=_opt(payload, "comment", "author_association") in GITHUB_OUTSIDERS,
    )


# -- GitLab -----------------------------------------------------------------------------------

_GITLAB_EVENTS = {
    "Issue Hook",
    "Note Hook",
    "Merge Request Hook",
    "Confidential Issue Hook",
    "Confidential Note Hook",
}


def _gl_common(
    payload: dict[str, Any], delivery_id: str, *, confidential: bool = False
) -> dict[str, Any]:
    username = _get(payload, "user", "username", kind=str)
    # GitLab marks bot users (project/group access tokens) with a "bot" suffix pattern
    # like project_123_bot_<hash>; the configured bot username is checked by handlers too.
    is_bot = "_bot" in username and username.startswith(("project_", "group_"))
    return {
        "forge": "gitlab",
        "repo": _get(payload, "project", "path_with_namespace", kind=str),
        "actor": Actor(login=username, is_bot=is_bot),
        "delivery_id": delivery_id,
        "installation_id": None,
        "confidential": confidential,
        "private": _gl_private(payload),
    }


def _label_titles(labels: Any) -> set[str]:
    if not isinstance(labels, list):
        return set()
    return {
        lab["title"]
        for lab in labels
        if isinstance(lab, dict) and isinstance(lab.get("title"), str)
    }


def from_gitlab(event: str, delivery_id: str, payload: Any) -> Event | Ignored | list[Event]:
    """GitLab sends one Issue Hook for a change that may add several labels; the result is
    then one IssueLabeled per added label."""
    if not isinstance(payload, dict):
        raise PayloadError("the payload must be a JSON object")
    if event not in _GITLAB_EVENTS:
        return Ignored(f"GitLab event {event!r} is not one Ribbit acts on", event)
    kind = payload.get("object_kind")
    confidential = (
        event.startswith("Confidential ")
        or _opt(payload, "object_attributes", "confidential") is True
        or _opt(payload, "object_attributes", "internal") is True
        or _opt(payload, "issue", "confidential") is True
    )
    if kind == "issue":
        attrs = _get(payload, "object_attributes", kind=dict)
        action = attrs.get("action")
        changes = payload.get("changes") if isinstance(payload.get("changes"), dict) else {}
        label_change = changes.get("labels") if isinstance(changes, dict) else None
        if isinstance(label_change, dict):
            added = _label_titles(label_change.get("current")) - _label_titles(
                label_change.get("previous")
            )
        elif action == "open":
            added = _label_titles(payload.get("labels"))
        else:
            added = set()
        if not added:
            return Ignored(f"issue {action or 'update'} without an added label", f"issue.{action}")
        common = _gl_common(payload, delivery_id, confidential=confidential)
        return [
            IssueLabeled(
                **common,
                issue_number=_num(attrs, "iid"),
                label=title,
                title=_get(attrs, "title", kind=str),
            )
            for title in sorted(added)
        ]
    if kind == "note":
        return _gitlab_note(payload, delivery_id, confidential=confidential)
    if kind == "merge_request":
        attrs = _get(payload, "object_attributes", kind=dict)
        action = attrs.get("action")
        if action not in {"merge", "close"}:
            return Ignored(f"merge request {action}", f"merge_request.{action}")
        merged = action == "merge"
        return PullRequestClosed(
            **_gl_common(payload, delivery_id),
            pr_number=_num(attrs, "iid"),
            merged=merged,
            head_branch=_get(attrs, "source_branch", kind=str),
            head_sha=_text(attrs, "last_commit", "id"),
            base_sha="",
            body=_text(attrs, "description"),
            author="",
            merged_by=_get(payload, "user", "username", kind=str) if merged else None,
            closed_at=_time(attrs.get("updated_at")),
            merge_commit_sha=_text(attrs, "merge_commit_sha") or None,
        )
    return Ignored(f"GitLab object_kind {kind!r} is not one Ribbit acts on", str(kind))


def _gitlab_note(
    payload: dict[str, Any], delivery_id: str, *, confidential: bool
) -> CommentCreated | Ignored:
    """A Note Hook: a comment on an issue or a merge request; other notes are ignored."""
    attrs = _get(payload, "object_attributes", kind=dict)
    noteable = attrs.get("noteable_type")
    if attrs.get("system"):
        return Ignored("system note", "note.system")
    common = _gl_common(payload, delivery_id, confidential=confidential)
    body = _get(attrs, "note", kind=str)
    comment_id = _get(attrs, "id", kind=int)
    if noteable == "Issue":
        return CommentCreated(
            **common,
            issue_number=_num(payload, "issue", "iid"),
            body=body,
            comment_id=comment_id,
            title=_text(payload, "issue", "title"),
        )
    if noteable == "MergeRequest":
        return CommentCreated(
            **common,
            pr_number=_num(payload, "merge_request", "iid"),
            body=body,
            comment_id=comment_id,
        )
    return Ignored(f"note on a {noteable}, not an issue or merge request", "note")
