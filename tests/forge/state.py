"""The local forge's in-memory world: users, repositories, issues, pull requests.

One model serves both dialects; ``github_api`` and ``gitlab_api`` render it
as each forge's JSON. Git data lives in real bare repositories, so commits,
branches and diffs come from git, never from this module.
"""

from __future__ import annotations

import itertools
import subprocess
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

ForgeKind = Literal["github", "gitlab"]
Role = Literal["read", "triage", "write", "maintain", "admin"]
ROLE_RANK: dict[str, int] = {
    "none": 0,
    "read": 1,
    "triage": 2,
    "write": 3,
    "maintain": 4,
    "admin": 5,
}
# GitLab access levels for the same roles (Reporter, Developer, Maintainer, Owner).
GITLAB_LEVEL: dict[str, int] = {
    "none": 0,
    "read": 20,
    "triage": 20,
    "write": 30,
    "maintain": 40,
    "admin": 50,
}

_ids = itertools.count(1000)


def new_id() -> int:
    return next(_ids)


def now() -> datetime:
    return datetime.now(UTC).replace(microsecond=0)


@dataclass
class User:
    login: str
    id: int
    token: str
    kind: Literal["User", "Bot"] = "User"


@dataclass
class CommentRec:
    id: int
    author: str
    body: str
    created_at: datetime
    updated_at: datetime
    history: list[str] = field(default_factory=list)  # earlier bodies, oldest first


@dataclass
class ReviewRec:
    id: int
    author: str
    state: Literal["APPROVED", "CHANGES_REQUESTED", "COMMENTED"]
    body: str
    commit_id: str
    submitted_at: datetime


@dataclass
class ReviewCommentRec:
    id: int
    review_id: int
    author: str
    body: str
    path: str
    line: int
    commit_id: str
    created_at: datetime
    diff_hunk: str = ""


@dataclass
class IssueRec:
    number: int
    id: int
    title: str
    body: str
    author: str
    state: Literal["open", "closed"] = "open"
    labels: list[str] = field(default_factory=list)
    comments: list[CommentRec] = field(default_factory=list)
    created_at: datetime = field(default_factory=now)
    updated_at: datetime = field(default_factory=now)
    closed_at: datetime | None = None


@dataclass
class PullRec:
    number: int
    id: int
    title: str
    body: str
    author: str
    head: str
    base: str
    head_sha: str
    base_sha: str
    draft: bool
    state: Literal["open", "closed"] = "open"
    merged: bool = False
    merged_by: str | None = None
    merged_at: datetime | None = None
    closed_at: datetime | None = None
    merge_commit_sha: str | None = None
    labels: list[str] = field(default_factory=list)
    comments: list[CommentRec] = field(default_factory=list)
    requested_reviewers: list[str] = field(default_factory=list)
    reviews: list[ReviewRec] = field(default_factory=list)
    review_comments: list[ReviewCommentRec] = field(default_factory=list)
    discussions: list[DiscussionRec] = field(default_factory=list)
    created_at: datetime = field(default_factory=now)
    updated_at: datetime = field(default_factory=now)


@dataclass
class StatusRec:
    id: int
    sha: str
    state: str
    context: str
    description: str
    target_url: str | None
    creator: str
    created_at: datetime


@dataclass
class AnnotationRec:
    path: str
    start_line: int
    end_line: int
    level: str
    title: str
    message: str


@dataclass
class CheckRunRec:
    id: int
    name: str
    head_sha: str
    external_id: str | None
    status: str
    conclusion: str | None
    title: str
    summary: str
    annotations: list[AnnotationRec]
    details_url: str | None
    creator: str
    created_at: datetime


@dataclass
class DiscussionRec:
    """A merge-request discussion (GitLab): its first note, and where it sits."""

    id: str
    note: CommentRec
    position: dict[str, object] | None


@dataclass
class RepoRec:
    forge: ForgeKind
    full_name: str
    id: int
    bare: Path
    default_branch: str = "main"
    private: bool = True
    roles: dict[str, str] = field(default_factory=dict)  # login -> Role
    issues: dict[int, IssueRec] = field(default_factory=dict)
    pulls: dict[int, PullRec] = field(default_factory=dict)
    statuses: list[StatusRec] = field(default_factory=list)
    check_runs: list[CheckRunRec] = field(default_factory=list)
    label_ids: dict[str, int] = field(default_factory=dict)
    # The repository's label list (name -> colour): what GET/POST .../labels see. Issues
    # may carry names outside it, as the control API adds labels without defining them.
    labels: dict[str, str] = field(default_factory=dict)
    _numbers: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    _mr_numbers: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    @property
    def owner(self) -> str:
        return self.full_name.rsplit("/", 1)[0]

    @property
    def name(self) -> str:
        return self.full_name.rsplit("/", 1)[1]

    def next_issue_number(self) -> int:
        return next(self._numbers)

    def next_pull_number(self) -> int:
        # GitHub numbers issues and PRs together; GitLab MR iids count on their own.
        return next(self._numbers) if self.forge == "github" else next(self._mr_numbers)

    def role_of(self, login: str) -> str:
        return self.roles.get(login, "none")

    def label_id(self, name: str) -> int:
        return self.label_ids.setdefault(name, new_id())

    def git(self, *args: str, input_bytes: bytes | None = None) -> str:
        env = {
            "GIT_CONFIG_GLOBAL": "/dev/null",
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_AUTHOR_NAME": "Local Forge",
            "GIT_AUTHOR_EMAIL": "forge@localhost",
            "GIT_COMMITTER_NAME": "Local Forge",
            "GIT_COMMITTER_EMAIL": "forge@localhost",
            "PATH": "/usr/bin:/bin",
        }
        out = subprocess.run(
            ["git", *args],
            cwd=self.bare,
            env=env,
            input=input_bytes,
            capture_output=True,
            check=True,
        )
        return out.stdout.decode()

    def branch_sha(self, branch: str) -> str | None:
        try:
            return (
                self.git(
                    "rev-parse", "--verify", "--quiet", f"refs/heads/{branch}^{{commit}}"
                ).strip()
                or None
            )
        except subprocess.CalledProcessError:
            return None

    def branches(self) -> dict[str, str]:
        out = self.git("for-each-ref", "--format=%(refname:strip=2) %(objectname)", "refs/heads")
        return dict(line.split(" ", 1) for line in out.splitlines() if line)

    def file_at(self, ref: str, path: str) -> bytes | None:
        try:
            kind = self.git("cat-file", "-t", f"{ref}:{path}").strip()
        except subprocess.CalledProcessError:
            return None
        if kind != "blob":
            return None
        env_out = subprocess.run(
            ["git", "cat-file", "blob", f"{ref}:{path}"],
            cwd=self.bare,
            capture_output=True,
            check=True,
        )
        return env_out.stdout

    def is_tree(self, ref: str, path: str) -> bool:
        try:
            return self.git("cat-file", "-t", f"{ref}:{path}").strip() == "tree"
        except subprocess.CalledProcessError:
            return False

    def diff(self, base_sha: str, head_sha: str) -> str:
        return self.git("diff", "--no-color", "-M", f"{base_sha}...{head_sha}")

    def issue_like(self, number: int) -> IssueRec | PullRec | None:
        return self.issues.get(number) or (
            self.pulls.get(number) if self.forge == "github" else None
        )
