"""Forge-neutral events. GitHub and GitLab payloads become one of these (bot/web/normalize.py),
so handlers never look at a raw payload."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from bot.forges.base import ForgeName


@dataclass(frozen=True)
class Actor:
    login: str
    is_bot: bool = False


@dataclass(frozen=True)
class EventBase:
    forge: ForgeName
    repo: str
    actor: Actor
    delivery_id: str
    installation_id: int | None

    key: str = ""  # "<event>.<action>", set by each subclass
    # A GitLab confidential issue or internal note: working on it in the open (a branch, an
    # ordinary MR) would disclose it, so intake refuses it.
    confidential: bool = False
    # What the forge says of the repository's visibility (None: the payload does not say);
    # recorded for model lines (bot/model_lines.py), where internal counts as private.
    private: bool | None = None


@dataclass(frozen=True)
class IssueLabeled(EventBase):
    issue_number: int = 0
    label: str = ""
    title: str = ""
    key: str = "issues.labeled"


@dataclass(frozen=True)
class CommentCreated(EventBase):
    """A new comment on an issue or on a PR/MR (``pr_number`` set)."""

    issue_number: int | None = None
    pr_number: int | None = None
    body: str = ""
    comment_id: int = 0
    # The issue's title when the comment is on an issue ("" on a PR/MR: its title is not
    # the issue's), kept on the job the command starts.
    title: str = ""
    # True when the forge says the author is no collaborator (GitHub's author_association),
    # so their command is dropped at intake: no job, no reply. False means "maybe": the
    # worker checks write access on the forge (GitLab sends no such field).
    outsider: bool = False
    key: str = "comment.created"


@dataclass(frozen=True)
class PullRequestClosed(EventBase):
    pr_number: int = 0
    merged: bool = False
    head_branch: str = ""
    head_sha: str = ""
    base_sha: str = ""
    body: str = ""
    author: str = ""
    merged_by: str | None = None
    closed_at: datetime | None = None
    merge_commit_sha: str | None = None
    key: str = "pull_request.closed"


@dataclass(frozen=True)
class ReviewSubmitted(EventBase):
    pr_number: int = 0
    state: str = ""  # approved | changes_requested | commented
    body: str = ""
    head_branch: str = ""
    # As CommentCreated's: True when the forge says the reviewer is no collaborator, so the
    # review asks for nothing and is only counted; False means "maybe" (the worker checks).
    outsider: bool = False
    key: str = "pull_request_review.submitted"


@dataclass(frozen=True)
class Ping(EventBase):
    key: str = "ping"


Event = IssueLabeled | CommentCreated | PullRequestClosed | ReviewSubmitted | Ping


@dataclass(frozen=True)
class Ignored:
    """A delivery we understood and chose not to act on; ``reason`` goes in the 202 answer."""

    reason: str
    key: str = ""
