"""GitLab (gitlab.com or self-managed) behind the Forge interface, over python-gitlab.

python-gitlab's own retry loop would sleep through a 429 for as long as the
server asks and retry POSTs on 5xx; both are switched off (``_Gitlab``) and
the shared urllib3 policy in :mod:`bot.forges.retries` is mounted on its
session instead, so the two forges fail and retry the same way.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import urllib.parse
import uuid
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Any, Literal, TypeVar, cast

import gitlab
import requests
from gitlab.exceptions import GitlabError
from requests.adapters import HTTPAdapter

from bot.forges import git
from bot.forges.base import (
    LABEL_COLOR,
    LABEL_DESCRIPTION,
    Annotation,
    Comment,
    CommitStatus,
    DraftPullRequest,
    ForgeError,
    ForgeName,
    ForgeNotFound,
    GateReview,
    Issue,
    IssueRef,
    PullRequest,
    PullRequestRef,
    RepoRef,
    Review,
    ReviewComment,
)
from bot.forges.branches import (
    BRANCH_PREFIX,
    validate_branch_name,
    validate_repo_path,
    validate_sha,
)
from bot.forges.create_once import create_once
from bot.forges.http_errors import mapped_errors, status_error
from bot.forges.markers import find_marked, marker_of, with_marker
from bot.forges.redact import SECRETS, redact, scrub
from bot.forges.retries import (
    HTTP_TIMEOUT_S,
    retry_policy,
    retry_repeatable,
)

log = logging.getLogger(__name__)
T = TypeVar("T")

DEVELOPER_ACCESS = 30
DRAFT_PREFIX = "Draft: "
# Each discussion notifies the MR's participants: past this many, the rest stay in the
# report (the PR body) instead of burying the MR in threads.
MAX_LINE_DISCUSSIONS = 25
_LEVEL_ICONS = {"failure": "❌", "warning": "⚠️", "notice": "ℹ️"}  # noqa: RUF001
_STATUS_STATES = {
    "pending": "pending",
    "success": "success",
    "failure": "failed",
    "error": "failed",
}
_REVIEWER_STATES: dict[str, Literal["approved", "changes_requested", "commented"]] = {
    "approved": "approved",
    "requested_changes": "changes_requested",
    "reviewed": "commented",
}


class _Gitlab(gitlab.Gitlab):
    """python-gitlab with its sleeping retry loop disabled (see module docstring)."""

    def http_request(self, *args: Any, **kwargs: Any) -> requests.Response:
        kwargs["obey_rate_limit"] = False
        kwargs["retry_transient_errors"] = False
        return super().http_request(*args, **kwargs)


def _parse_time(value: object) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def _username(user: object) -> str:
    if isinstance(user, Mapping):
        return str(user.get("username") or "")
    return ""


class GitLabForge:
    """The Forge interface on a GitLab instance (API v4)."""

    name: ForgeName = "gitlab"

    def __init__(
        self,
        *,
        url: str,
        token: str,
        bot_username: str,
        retry_total: int = 4,
        retry_backoff: float = 0.5,
        timeout_s: int = HTTP_TIMEOUT_S,
    ) -> None:
        self._token = token
        self._bot_username = bot_username
        SECRETS.add(token)
        self._local = threading.local()
        session = requests.Session()
        adapter = HTTPAdapter(
            max_retries=retry_policy(total=retry_total, backoff_factor=retry_backoff)
        )
        session.mount("http://", adapter)
        session.mount("https://", adapter)
        session.hooks["response"].append(self._remember_failure_headers)
        self._gl = _Gitlab(
            url.rstrip("/"), private_token=token, timeout=timeout_s, session=session, per_page=100
        )

    @property
    def bot_login(self) -> str:
        return self._bot_username

    # -- plumbing -----------------------------------------------------------

    def _remember_failure_headers(
        self, response: requests.Response, *args: Any, **kwargs: Any
    ) -> None:
        if response.status_code == 429 or response.status_code >= 500:
            self._local.headers = dict(response.headers)

    def _errors(self, what: str) -> AbstractContextManager[None]:
        self._local.headers = {}
        return mapped_errors("GitLab", what, GitlabError, lambda exc: self._map(exc, what))

    def _map(self, exc: GitlabError, what: str) -> ForgeError:
        status = exc.response_code or 0
        message = redact(str(exc.error_message or ""), SECRETS.values())
        headers = getattr(self._local, "headers", {}) or {}
        return status_error("GitLab", what, status, message, headers, rate_limited=status == 429)

    def _call(self, what: str, fn: Callable[[], T]) -> T:
        with self._errors(what):
            return fn()

    @staticmethod
    def _project(repo: RepoRef) -> str:
        if repo.forge != "gitlab":
            raise ForgeError(f"{repo} is not a GitLab project")
        return "/projects/" + urllib.parse.quote(repo.full_name, safe="")

    def _get(self, path: str, what: str, **query: Any) -> dict[str, Any]:
        return cast(
            dict[str, Any], self._call(what, lambda: self._gl.http_get(path, query_data=query))
        )

    def _list(self, path: str, what: str, **query: Any) -> list[dict[str, Any]]:
        def fetch() -> list[dict[str, Any]]:
            return cast(
                list[dict[str, Any]], self._gl.http_list(path, query_data=query, get_all=True)
            )

        return self._call(what, fetch)

    # -- issues and comments ------------------------------------------------

    def get_issue(self, ref: IssueRef) -> Issue:
        base = f"{self._project(ref.repo)}/issues/{ref.number}"
        data = self._get(base, f"read issue {ref}")
        notes = self._list(
            f"{base}/notes", f"read comments of {ref}", sort="asc", order_by="created_at"
        )
        comments = tuple(
            Comment(
                id=int(n["id"]),
                author=_username(n.get("author")),
                body=n.get("body") or "",
                created_at=_parse_time(n.get("created_at")),
            )
            for n in notes
            if not n.get("system")
        )
        return Issue(
            ref=ref,
            title=data.get("title") or "",
            body=data.get("description") or "",
            author=_username(data.get("author")),
            state="closed" if data.get("state") == "closed" else "open",
            labels=tuple(str(label) for label in data.get("labels") or ()),
            comments=comments,
            url=data.get("web_url") or "",
        )

    def _user_id(self, username: str) -> int | None:
        users = self._list("/users", f"look up user {username}", username=username)
        for user in users:
            if str(user.get("username", "")).lower() == username.lower():
                return int(user["id"])
        return None

    def has_write_access(self, repo: RepoRef, username: str) -> bool:
        user_id = self._user_id(username)
        if user_id is None:
            return False
        try:
            member = self._get(
                f"{self._project(repo)}/members/all/{user_id}",
                f"check {username}'s access to {repo}",
            )
        except ForgeNotFound:
            return False
        return int(member.get("access_level") or 0) >= DEVELOPER_ACCESS

    def ensure_label(self, repo: RepoRef, name: str) -> bool:
        base = f"{self._project(repo)}/labels"
        body = {"name": name, "color": f"#{LABEL_COLOR}", "description": LABEL_DESCRIPTION}

        def find() -> bool | None:
            label = f"{base}/{urllib.parse.quote(name, safe='')}"
            try:
                self._get(label, f"read the label {name} of {repo}")
            except ForgeNotFound:
                return None
            return False

        def create() -> bool:
            what = f"create the label {name} in {repo}"
            self._call(what, lambda: self._gl.http_post(base, post_data=body))
            return True

        return create_once(create, find, look_first=True)

    def post_comment(self, ref: IssueRef, body: str) -> int:
        body = scrub(body)
        marker = uuid.uuid4().hex
        path = f"{self._project(ref.repo)}/issues/{ref.number}/notes"
        what = f"comment on {ref}"

        def create() -> int:
            note = self._call(
                what,
                lambda: self._gl.http_post(path, post_data={"body": with_marker(body, marker)}),
            )
            return int(cast(dict[str, Any], note)["id"])

        def find() -> int | None:
            notes = self._list(path, f"read comments of {ref}", sort="asc")
            return find_marked(((int(n["id"]), n.get("body") or "") for n in notes), marker)

        return create_once(create, find)

    def edit_comment(self, ref: IssueRef, comment_id: int, body: str) -> None:
        body = scrub(body)
        path = f"{self._project(ref.repo)}/issues/{ref.number}/notes/{int(comment_id)}"
        self._call(
            f"edit comment {comment_id} on {ref}",
            lambda: self._gl.http_put(path, post_data={"body": body}),
        )

    # -- repository contents and git ----------------------------------------

    def _project_data(self, repo: RepoRef) -> dict[str, Any]:
        return self._get(self._project(repo), f"read {repo}")

    def default_branch(self, repo: RepoRef) -> str:
        branch = self._project_data(repo).get("default_branch")
        if not branch:
            raise ForgeError(f"{repo} has no default branch (empty repository?)")
        return str(branch)

    def read_file(self, repo: RepoRef, path: str, ref: str | None = None) -> str | None:
        validate_repo_path(path)
        at = ref or self.default_branch(repo)
        url = f"{self._project(repo)}/repository/files/{urllib.parse.quote(path, safe='')}/raw"

        def fetch() -> bytes:
            response = self._gl.http_get(url, query_data={"ref": at}, raw=True)
            return cast(requests.Response, response).content

        try:
            content = self._call(f"read {path} in {repo}", fetch)
        except ForgeNotFound:
            return None
        return content.decode("utf-8", errors="replace")

    def _clone_url(self, repo: RepoRef) -> str:
        return git.check_remote_url(str(self._project_data(repo)["http_url_to_repo"]))

    def _git_credentials(self) -> git.GitCredentials:
        return git.GitCredentials("oauth2", self._token)

    def clone(self, repo: RepoRef, dest: Path, *, branch: str | None = None) -> None:
        git.clone(self._clone_url(repo), dest, self._git_credentials(), branch=branch)

    def push(self, repo: RepoRef, workdir: Path, branch: str) -> None:
        git.push(self._clone_url(repo), workdir, branch, self._git_credentials())

    # -- merge requests -----------------------------------------------------

    def _merge_request(self, repo: RepoRef, mr: Mapping[str, Any]) -> PullRequest:
        raw_state = mr.get("state")
        state: Literal["open", "closed", "merged"] = (
            "merged" if raw_state == "merged" else "open" if raw_state == "opened" else "closed"
        )
        diff_refs = mr.get("diff_refs") or {}
        merged_by = mr.get("merge_user") or mr.get("merged_by")
        return PullRequest(
            ref=PullRequestRef(repo, int(mr["iid"])),
            title=mr.get("title") or "",
            body=mr.get("description") or "",
            state=state,
            draft=bool(mr.get("draft", mr.get("work_in_progress", False))),
            head_branch=mr.get("source_branch") or "",
            head_sha=mr.get("sha") or diff_refs.get("head_sha") or "",
            base_branch=mr.get("target_branch") or "",
            base_sha=diff_refs.get("base_sha") or "",
            author=_username(mr.get("author")),
            url=mr.get("web_url") or "",
            labels=tuple(str(label) for label in mr.get("labels") or ()),
            merged_by=_username(merged_by) or None,
            merged_at=_parse_time(mr.get("merged_at")),
            closed_at=_parse_time(mr.get("closed_at")),
            created_at=_parse_time(mr.get("created_at")),
            merge_commit_sha=(
                mr.get("merge_commit_sha") or mr.get("squash_commit_sha")
                if state == "merged"
                else None
            ),
        )

    def find_pull_request(self, repo: RepoRef, head_branch: str) -> PullRequest | None:
        validate_branch_name(head_branch)
        found = self._list(
            f"{self._project(repo)}/merge_requests",
            f"look for a merge request from {head_branch} in {repo}",
            source_branch=head_branch,
            state="all",
            order_by="created_at",
            sort="desc",
        )
        for mr in found:
            if mr.get("source_branch") == head_branch:
                return self._merge_request(repo, mr)
        return None

    def open_draft_pull_request(self, repo: RepoRef, draft: DraftPullRequest) -> PullRequest:
        draft = replace(draft, title=scrub(draft.title), body=scrub(draft.body))
        validate_branch_name(draft.head)
        validate_branch_name(draft.base)
        title = draft.title if draft.title.startswith(DRAFT_PREFIX) else DRAFT_PREFIX + draft.title
        payload: dict[str, Any] = {
            "source_branch": draft.head,
            "target_branch": draft.base,
            "title": title,
            "description": draft.body,
            "remove_source_branch": False,
        }
        if draft.labels:
            payload["labels"] = ",".join(draft.labels)
        reviewer_ids = [
            uid for uid in (self._user_id(name) for name in draft.reviewers) if uid is not None
        ]
        if reviewer_ids:
            payload["reviewer_ids"] = reviewer_ids
        path = f"{self._project(repo)}/merge_requests"
        what = f"open a draft merge request from {draft.head} in {repo}"

        def create() -> PullRequest:
            created = self._call(what, lambda: self._gl.http_post(path, post_data=payload))
            return self._merge_request(repo, cast(dict[str, Any], created))

        def find_open() -> PullRequest | None:
            existing = self.find_pull_request(repo, draft.head)
            return existing if existing is not None and existing.state == "open" else None

        # Looking first makes a retried job, or a POST whose answer was lost, reuse the MR.
        return create_once(create, find_open, look_first=True)

    def get_pull_request(self, ref: PullRequestRef) -> PullRequest:
        data = self._get(
            f"{self._project(ref.repo)}/merge_requests/{ref.number}", f"read merge request {ref}"
        )
        return self._merge_request(ref.repo, data)

    def update_pull_request_body(self, ref: PullRequestRef, body: str) -> None:
        body = scrub(body)
        path = f"{self._project(ref.repo)}/merge_requests/{int(ref.number)}"
        self._call(
            f"update merge request {ref}",
            lambda: self._gl.http_put(path, post_data={"description": body}),
        )

    def list_open_pull_requests(
        self, repo: RepoRef, head_prefix: str = BRANCH_PREFIX
    ) -> list[PullRequest]:
        found = self._list(
            f"{self._project(repo)}/merge_requests",
            f"list merge requests of {repo}",
            state="opened",
        )
        return [
            self._merge_request(repo, mr)
            for mr in found
            if str(mr.get("source_branch", "")).startswith(head_prefix)
        ]

    def list_reviews(self, ref: PullRequestRef) -> list[Review]:
        base = f"{self._project(ref.repo)}/merge_requests/{ref.number}"
        reviews: dict[str, Review] = {}
        for entry in self._list(f"{base}/reviewers", f"read reviewers of {ref}"):
            state = _REVIEWER_STATES.get(str(entry.get("state")))
            user = entry.get("user") or {}
            if state is None or not user:
                continue
            reviews[_username(user)] = Review(
                id=int(user.get("id") or 0),
                author=_username(user),
                state=state,
                body="",
                submitted_at=_parse_time(entry.get("created_at")),
            )
        approvals = self._get(f"{base}/approvals", f"read approvals of {ref}")
        for approval in approvals.get("approved_by") or ():
            user = approval.get("user") or {}
            name = _username(user)
            if name and name not in reviews:
                reviews[name] = Review(
                    id=int(user.get("id") or 0), author=name, state="approved", body=""
                )
        return list(reviews.values())

    def list_review_comments(self, ref: PullRequestRef) -> list[ReviewComment]:
        """Every human note on the MR; diff notes carry their path and line."""
        notes = self._list(
            f"{self._project(ref.repo)}/merge_requests/{ref.number}/notes",
            f"read review comments of {ref}",
            sort="asc",
            order_by="created_at",
        )
        comments = []
        for note in notes:
            if note.get("system"):
                continue
            position = note.get("position") or {}
            line = position.get("new_line") or position.get("old_line")
            comments.append(
                ReviewComment(
                    id=int(note["id"]),
                    author=_username(note.get("author")),
                    body=note.get("body") or "",
                    path=position.get("new_path") or position.get("old_path") or None,
                    line=int(line) if line is not None else None,
                    created_at=_parse_time(note.get("created_at")),
                )
            )
        return comments

    def get_pull_request_diff(self, ref: PullRequestRef) -> str:
        files = self._list(
            f"{self._project(ref.repo)}/merge_requests/{ref.number}/diffs",
            f"read the diff of {ref}",
        )
        return "".join(_unified_file_diff(f) for f in files)

    def set_commit_status(self, repo: RepoRef, sha: str, status: CommitStatus) -> None:
        status = replace(status, description=scrub(status.description))
        validate_sha(sha)
        payload: dict[str, Any] = {
            "state": _STATUS_STATES[status.state],
            "name": status.context,
            "description": status.description[:255],
        }
        if status.target_url:
            payload["target_url"] = status.target_url
        retry_repeatable(
            lambda: self._call(
                f"set the {status.context} status on {sha[:12]}",
                lambda: self._gl.http_post(
                    f"{self._project(repo)}/statuses/{sha}", post_data=payload
                ),
            )
        )

    # -- gate findings on the MR's lines -------------------------------------------------

    def publish_gate_review(self, ref: PullRequestRef, head_sha: str, review: GateReview) -> None:
        """One MR discussion per finding, on its line of the diff at ``head_sha``; each
        carries a marker derived from the review's key and the finding, so a rerun or a
        lost answer never opens it twice. The verdict itself is the commit status."""
        validate_sha(head_sha)
        base = f"{self._project(ref.repo)}/merge_requests/{ref.number}"
        mr = self._get(base, f"read merge request {ref}")
        refs = mr.get("diff_refs") or {}
        if refs.get("head_sha") != head_sha:
            log.warning("%s moved past %s; its findings are not put on the lines", ref, head_sha)
            return
        path = f"{base}/discussions"
        posted = self._discussion_markers(path, ref)
        for a in review.annotations[:MAX_LINE_DISCUSSIONS]:
            marker = _discussion_marker(review, a)
            if marker in posted:
                continue
            payload = {
                "body": with_marker(_discussion_body(review, a), marker),
                "position": {
                    "position_type": "text",
                    "base_sha": refs.get("base_sha"),
                    "start_sha": refs.get("start_sha"),
                    "head_sha": head_sha,
                    "old_path": a.path,
                    "new_path": a.path,
                    "new_line": a.line,
                },
            }
            self._create_discussion(path, ref, payload, marker)
            posted.add(marker)

    def _discussion_markers(self, path: str, ref: PullRequestRef) -> set[str]:
        found = set()
        for discussion in self._list(path, f"read discussions of {ref}"):
            for note in discussion.get("notes") or []:
                marker = marker_of(note.get("body") or "")
                if marker is not None:
                    found.add(marker)
        return found

    def _create_discussion(
        self, path: str, ref: PullRequestRef, payload: dict[str, Any], marker: str
    ) -> None:
        what = f"comment on a line of {ref}"

        def create() -> str:
            self._call(what, lambda: self._gl.http_post(path, post_data=payload))
            return marker

        def find() -> str | None:
            return marker if marker in self._discussion_markers(path, ref) else None

        create_once(create, find)


def _discussion_marker(review: GateReview, a: Annotation) -> str:
    """The same finding of the same run always gets the same marker, so a rerun or a
    lost answer finds the discussion it already opened."""
    key = "\0".join((review.key, a.path, str(a.line), a.title, a.message))
    return hashlib.sha256(key.encode()).hexdigest()[:32]


def _discussion_body(review: GateReview, a: Annotation) -> str:
    lines = [f"{_LEVEL_ICONS[a.level]} **{a.title}**", "", a.message]
    if review.details_url:
        lines += ["", f"<sub>{review.name} · [job page]({review.details_url})</sub>"]
    return scrub("\n".join(lines))


def _unified_file_diff(entry: Mapping[str, Any]) -> str:
    """One file of GitLab's /diffs answer as ``git diff`` would print it."""
    old, new = entry.get("old_path") or "", entry.get("new_path") or ""
    lines = [f"diff --git a/{old} b/{new}"]
    if entry.get("new_file"):
        lines.append(f"new file mode {entry.get('b_mode') or '100644'}")
    elif entry.get("deleted_file"):
        lines.append(f"deleted file mode {entry.get('a_mode') or '100644'}")
    elif entry.get("renamed_file"):
        lines += [f"rename from {old}", f"rename to {new}"]
    body = entry.get("diff") or ""
    if body:
        lines.append("--- /dev/null" if entry.get("new_file") else f"--- a/{old}")
        lines.append("+++ /dev/null" if entry.get("deleted_file") else f"+++ b/{new}")
    text = "\n".join(lines) + "\n" + body
    return text if text.endswith("\n") else text + "\n"
