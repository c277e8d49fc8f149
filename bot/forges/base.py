"""The one interface Ribbit uses to talk to a forge, and the data it passes.

Sans-IO in Flask's sense: nothing here imports Flask, so the worker imports
``bot.forges`` to comment, push and open pull requests. GitHub and GitLab
differences stay behind :class:`Forge`; callers never branch on the forge.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Literal, Protocol, runtime_checkable

from bot.forges.branches import BRANCH_PREFIX

ForgeName = Literal["github", "gitlab"]
FORGE_NAMES: tuple[ForgeName, ...] = ("github", "gitlab")


def forge_name(value: str) -> ForgeName:
    """``value`` as a ForgeName (a stored row's forge column); ValueError for anything else."""
    for name in FORGE_NAMES:
        if value == name:
            return name
    raise ValueError(f"{value!r} is not a forge Ribbit knows ({', '.join(FORGE_NAMES)})")


class ForgeError(Exception):
    """A forge call that failed; the message is safe to show (no tokens)."""


class ForgeUnavailable(ForgeError):
    """5xx, connection error or rate limit: retry later, do not fail the job."""

    def __init__(self, message: str, *, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class ForgeNotFound(ForgeError):
    """404: the repo, issue or PR is gone, or the token cannot see it."""


class ForgePermissionDenied(ForgeError):
    """403 (not a rate limit): the bot's token lacks a permission."""


@dataclass(frozen=True)
class RepoRef:
    forge: ForgeName
    full_name: str  # "owner/name" on GitHub, "group/sub/project" on GitLab

    def __str__(self) -> str:
        return f"{self.forge}:{self.full_name}"


# One part of a repository's path as both forges allow it (GitHub's owner and name,
# GitLab's groups and project): no spaces, no `..`, no leading `-` that reads as an option.
_PATH_PART = re.compile(r"[A-Za-z0-9_.][A-Za-z0-9_.-]{0,99}")
# GitHub: owner/name; GitLab: group/project, with subgroups up to its nesting limit.
_PATH_PARTS: dict[ForgeName, tuple[int, int]] = {"github": (2, 2), "gitlab": (2, 21)}
REPO_FORMS = "owner/name, or group/subgroup/project on GitLab, optionally after github: or gitlab:"


def parse_repo_ref(text: str, default_forge: ForgeName = "github") -> RepoRef:
    """A repository as an operator types it, ``[forge:]owner/name``; ValueError saying the
    accepted forms for anything else (a pause on a name no job can have would hold nothing
    and still read as done)."""
    forge_text, sep, full_name = text.strip().partition(":")
    forge = forge_name(forge_text) if sep else default_forge
    if not sep:
        full_name = forge_text
    parts = full_name.split("/")
    fewest, most = _PATH_PARTS[forge]
    if (
        not fewest <= len(parts) <= most
        or len(full_name) > 255
        or any(p in {".", ".."} or not _PATH_PART.fullmatch(p) for p in parts)
    ):
        raise ValueError(f"{text!r} is not a {forge} repository name ({REPO_FORMS})")
    return RepoRef(forge, full_name)


@dataclass(frozen=True)
class IssueRef:
    repo: RepoRef
    number: int  # GitHub number, GitLab iid

    def __str__(self) -> str:
        return f"{self.repo}#{self.number}"


@dataclass(frozen=True)
class PullRequestRef:
    repo: RepoRef
    number: int  # GitHub number, GitLab MR iid

    def __str__(self) -> str:
        return f"{self.repo}!{self.number}"


@dataclass(frozen=True)
class Comment:
    id: int
    author: str
    body: str
    created_at: datetime | None = None


@dataclass(frozen=True)
class Issue:
    ref: IssueRef
    title: str
    body: str
    author: str
    state: Literal["open", "closed"]
    labels: tuple[str, ...] = ()
    comments: tuple[Comment, ...] = ()
    url: str = ""


@dataclass(frozen=True)
class PullRequest:
    ref: PullRequestRef
    title: str
    body: str
    state: Literal["open", "closed", "merged"]
    draft: bool
    head_branch: str
    head_sha: str
    base_branch: str
    base_sha: str
    author: str
    url: str = ""
    labels: tuple[str, ...] = ()
    merged_by: str | None = None
    merged_at: datetime | None = None
    closed_at: datetime | None = None
    created_at: datetime | None = None
    merge_commit_sha: str | None = None


@dataclass(frozen=True)
class Review:
    id: int
    author: str
    state: Literal["approved", "changes_requested", "commented", "dismissed", "pending"]
    body: str
    submitted_at: datetime | None = None


@dataclass(frozen=True)
class ReviewComment:
    id: int
    author: str
    body: str
    path: str | None = None
    line: int | None = None
    diff_hunk: str | None = None
    created_at: datetime | None = None


# One name for the gates on a commit: the commit status and GitHub's check run carry the
# same one, so a branch rule that requires it matches whichever the forge shows.
GATES_NAME = "ribbit/gates"


@dataclass(frozen=True)
class CommitStatus:
    state: Literal["pending", "success", "failure", "error"]
    context: str = GATES_NAME
    description: str = ""
    target_url: str | None = None


AnnotationLevel = Literal["notice", "warning", "failure"]


@dataclass(frozen=True)
class Annotation:
    """One gate finding on one line of the patch's new side."""

    path: str
    line: int
    level: AnnotationLevel
    title: str  # "semgrep: no-eval"
    message: str


@dataclass(frozen=True)
class GateReview:
    """A gate run shown where reviewers look: a GitHub check run with annotations, or
    GitLab merge-request discussions on the lines. ``key`` names this run (job and head
    commit): publishing the same key again changes nothing."""

    key: str
    passed: bool  # verified: the only verdict a forge shows as success
    title: str
    summary: str  # markdown
    annotations: tuple[Annotation, ...] = ()
    name: str = GATES_NAME
    details_url: str | None = None
    # Nothing blocked it but no test shows the fix: GitHub's check run says "neutral".
    unverified: bool = False


@dataclass(frozen=True)
class DraftPullRequest:
    """What the worker asks the forge to open; always a draft."""

    head: str
    base: str
    title: str
    body: str
    labels: Sequence[str] = field(default_factory=tuple)
    reviewers: Sequence[str] = field(default_factory=tuple)


# How Ribbit's trigger label looks where Ribbit creates it (Forge.ensure_label): one
# colour (hex, no "#") and one description on both forges.
LABEL_COLOR = "0e8a16"
LABEL_DESCRIPTION = "Ask Ribbit for a fix: it answers with a draft pull request"


@runtime_checkable
class Forge(Protocol):
    """Everything Ribbit does on a forge. Implementations: GitHubForge, GitLabForge."""

    name: ForgeName

    @property
    def bot_login(self) -> str:
        """The account the bot acts as; its own events are ignored."""
        ...

    def get_issue(self, ref: IssueRef) -> Issue: ...

    def has_write_access(self, repo: RepoRef, username: str) -> bool: ...

    def ensure_label(self, repo: RepoRef, name: str) -> bool:
        """Create the label ``name`` on ``repo`` unless it has one (LABEL_COLOR,
        LABEL_DESCRIPTION); True when this call created it."""
        ...

    def post_comment(self, ref: IssueRef, body: str) -> int:
        """Post on the issue; returns the comment id for later edits."""
        ...

    def edit_comment(self, ref: IssueRef, comment_id: int, body: str) -> None: ...

    def default_branch(self, repo: RepoRef) -> str: ...

    def read_file(self, repo: RepoRef, path: str, ref: str | None = None) -> str | None:
        """A file's text at ``ref`` (default branch if None); None when absent."""
        ...

    def clone(self, repo: RepoRef, dest: Path, *, branch: str | None = None) -> None:
        """Real git clone into ``dest``; credentials never appear in argv, URLs or .git/config."""
        ...

    def push(self, repo: RepoRef, workdir: Path, branch: str) -> None:
        """Push ``branch`` from ``workdir`` (never with --force)."""
        ...

    def find_pull_request(self, repo: RepoRef, head_branch: str) -> PullRequest | None:
        """The open or closed PR/MR whose head is ``head_branch``; for idempotent opening."""
        ...

    def open_draft_pull_request(self, repo: RepoRef, draft: DraftPullRequest) -> PullRequest: ...

    def get_pull_request(self, ref: PullRequestRef) -> PullRequest: ...

    def update_pull_request_body(self, ref: PullRequestRef, body: str) -> None:
        """Replace the PR/MR description (a revision's new gate report)."""
        ...

    def list_open_pull_requests(
        self, repo: RepoRef, head_prefix: str = BRANCH_PREFIX
    ) -> list[PullRequest]: ...

    def list_reviews(self, ref: PullRequestRef) -> list[Review]: ...

    def list_review_comments(self, ref: PullRequestRef) -> list[ReviewComment]: ...

    def get_pull_request_diff(self, ref: PullRequestRef) -> str:
        """Unified diff of the PR/MR (the merged diff once merged)."""
        ...

    def set_commit_status(self, repo: RepoRef, sha: str, status: CommitStatus) -> None: ...

    def publish_gate_review(self, ref: PullRequestRef, head_sha: str, review: GateReview) -> None:
        """Show the gate run on the PR's ``head_sha``, once per ``review.key`` even when an
        answer is lost (GitHub: a completed check run; GitLab: one discussion per finding)."""
        ...
