"""GitHub behind the :class:`~bot.forges.base.Forge` interface, over PyGithub.

Authentication is a personal access token or a GitHub App installation token
(minted from a JWT, cached per installation and refreshed shortly before it
expires by PyGithub's ``AppInstallationAuth``). Every call goes through
:meth:`GitHubForge._call`, which turns PyGithub's and requests' errors into
the Forge error types with token-free messages.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
import urllib.parse
import uuid
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import replace
from pathlib import Path
from typing import Any, Literal, TypeVar

import github
from github import Auth, Github, GithubException
from github.PullRequest import PullRequest as GhPullRequest
from github.Repository import Repository

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
    ForgeUnavailable,
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
from bot.forges.markers import find_marked, with_marker
from bot.forges.redact import SECRETS, redact, scrub
from bot.forges.retries import (
    HTTP_TIMEOUT_S,
    is_github_rate_limited,
    retry_policy,
    retry_repeatable,
)

log = logging.getLogger(__name__)
T = TypeVar("T")

_WRITE_PERMISSIONS = frozenset({"admin", "maintain", "write"})
_REVIEW_STATES: dict[
    str, Literal["approved", "changes_requested", "commented", "dismissed", "pending"]
] = {
    "APPROVED": "approved",
    "CHANGES_REQUESTED": "changes_requested",
    "COMMENTED": "commented",
    "DISMISSED": "dismissed",
    "PENDING": "pending",
}
# GitHub takes at most 50 annotations per request; one request keeps the creation atomic.
MAX_ANNOTATIONS = 50

# One AppInstallationAuth per installation: it holds the installation token
# and refreshes it shortly before expiry, so jobs share a token, not mint one each.
_installation_auths: dict[tuple[str, int, int, str], Auth.AppInstallationAuth] = {}
_installation_lock = threading.Lock()


def installation_auth(
    api_url: str, app_id: int, private_key: str, installation_id: int
) -> Auth.AppInstallationAuth:
    # The key's digest is part of the cache key so a rotated key is used at once.
    key = (api_url, app_id, installation_id, hashlib.sha256(private_key.encode()).hexdigest())
    with _installation_lock:
        auth = _installation_auths.get(key)
        if auth is None:
            auth = Auth.AppAuth(app_id, private_key).get_installation_auth(installation_id)
            _installation_auths[key] = auth
        return auth


def _message(exc: GithubException) -> str:
    data = exc.data
    if isinstance(data, dict):
        return str(data.get("message") or "")
    return str(data or "")


class GitHubForge:
    """The Forge interface on GitHub.com or GitHub Enterprise Server."""

    name: ForgeName = "github"

    def __init__(
        self,
        *,
        api_url: str,
        auth: Auth.Token | Auth.AppInstallationAuth,
        bot_login: str,
        write_interval_s: float = 1.0,
        retry_total: int = 4,
        retry_backoff: float = 0.5,
        timeout_s: int = HTTP_TIMEOUT_S,
    ) -> None:
        self._api_url = api_url.rstrip("/")
        self._auth = auth
        self._bot_login = bot_login
        self._gh = Github(
            auth=auth,
            base_url=self._api_url,
            timeout=timeout_s,
            retry=retry_policy(total=retry_total, backoff_factor=retry_backoff),
            seconds_between_requests=None,
            seconds_between_writes=write_interval_s or None,
            lazy=True,
        )
        if isinstance(auth, Auth.Token):
            SECRETS.add(auth.token)

    @property
    def bot_login(self) -> str:
        return self._bot_login

    # -- plumbing -----------------------------------------------------------

    def _token(self) -> str:
        token = self._auth.token
        SECRETS.add(token)  # installation tokens are new every hour
        return token

    def _secrets(self) -> list[str]:
        return SECRETS.values()

    def _errors(self, what: str) -> AbstractContextManager[None]:
        return mapped_errors("GitHub", what, GithubException, lambda exc: self._map(exc, what))

    def _map(self, exc: GithubException, what: str) -> ForgeError:
        status = exc.status
        headers = dict(exc.headers or {})
        message = redact(_message(exc), self._secrets())
        limited = is_github_rate_limited(status, headers, message)
        return status_error("GitHub", what, status, message, headers, rate_limited=limited)

    def _call(self, what: str, fn: Callable[[], T]) -> T:
        with self._errors(what):
            result = fn()
            if isinstance(self._auth, Auth.AppInstallationAuth):
                # The call just used (or minted) the installation token: make sure the
                # log filter knows it. Cached, so this costs no request.
                SECRETS.add(self._auth.token)
        return result

    def _repo(self, repo: RepoRef) -> Repository:
        if repo.forge != "github":
            raise ForgeError(f"{repo} is not a GitHub repository")
        return self._gh.get_repo(repo.full_name)  # lazy: Github(lazy=True)

    def _raw(
        self,
        verb: str,
        url: str,
        what: str,
        *,
        accept: str | None = None,
        body: dict[str, Any] | None = None,
    ) -> str:
        """A request whose answer is not a PyGithub object (diffs) or that needs no GET first."""
        headers = {"Accept": accept} if accept else None

        def send() -> str:
            status, resp_headers, data = self._gh.requester.requestJson(
                verb, url, headers=headers, input=body
            )
            if status >= 400:
                output: Any
                try:
                    output = json.loads(data) if data else None
                except ValueError:
                    output = data
                raise GithubException(status, output, resp_headers)
            return data

        return self._call(what, send)

    # -- issues and comments ------------------------------------------------

    def get_issue(self, ref: IssueRef) -> Issue:
        def fetch() -> Issue:
            issue = self._repo(ref.repo).get_issue(ref.number)
            comments = tuple(
                Comment(id=c.id, author=c.user.login, body=c.body or "", created_at=c.created_at)
                for c in issue.get_comments()
            )
            return Issue(
                ref=ref,
                title=issue.title or "",
                body=issue.body or "",
                author=issue.user.login,
                state="closed" if issue.state == "closed" else "open",
                labels=tuple(label.name for label in issue.labels),
                comments=comments,
                url=issue.html_url or "",
            )

        return self._call(f"read issue {ref}", fetch)

    def has_write_access(self, repo: RepoRef, username: str) -> bool:
        user = urllib.parse.quote(username, safe="")

        def check() -> bool:
            try:
                data = self._raw(
                    "GET",
                    f"{self._repo(repo).url}/collaborators/{user}/permission",
                    f"check {username}'s permission on {repo}",
                )
            except ForgeNotFound:
                return False
            answer = json.loads(data)
            role = str(answer.get("role_name") or "")
            return answer.get("permission") in _WRITE_PERMISSIONS or role in _WRITE_PERMISSIONS

        return check()

    def ensure_label(self, repo: RepoRef, name: str) -> bool:
        base = f"{self._repo(repo).url}/labels"
        label = f"{base}/{urllib.parse.quote(name, safe='')}"
        body = {"name": name, "color": LABEL_COLOR, "description": LABEL_DESCRIPTION}

        def find() -> bool | None:
            try:
                self._raw("GET", label, f"read the label {name} of {repo}")
            except ForgeNotFound:
                return None
            return False

        def create() -> bool:
            self._raw("POST", base, f"create the label {name} in {repo}", body=body)
            return True

        return create_once(create, find, look_first=True)

    def post_comment(self, ref: IssueRef, body: str) -> int:
        body = scrub(body)
        marker = uuid.uuid4().hex
        marked = with_marker(body, marker)
        url = f"{self._repo(ref.repo).url}/issues/{ref.number}/comments"
        what = f"comment on {ref}"
        return create_once(
            lambda: int(json.loads(self._raw("POST", url, what, body={"body": marked}))["id"]),
            lambda: self._find_marked_comment(ref, marker),
        )

    def _find_marked_comment(self, ref: IssueRef, marker: str) -> int | None:
        def search() -> int | None:
            issue = self._repo(ref.repo).get_issue(ref.number)
            return find_marked(((c.id, c.body or "") for c in issue.get_comments()), marker)

        return self._call(f"read comments of {ref}", search)

    def edit_comment(self, ref: IssueRef, comment_id: int, body: str) -> None:
        body = scrub(body)
        url = f"{self._repo(ref.repo).url}/issues/comments/{int(comment_id)}"
        self._raw("PATCH", url, f"edit comment {comment_id} on {ref}", body={"body": body})

    # -- repository contents and git ----------------------------------------

    def default_branch(self, repo: RepoRef) -> str:
        return self._call(f"read {repo}", lambda: self._repo(repo).default_branch)

    def read_file(self, repo: RepoRef, path: str, ref: str | None = None) -> str | None:
        validate_repo_path(path)

        def fetch() -> str | None:
            r = self._repo(repo)
            try:
                content = r.get_contents(path, ref=ref) if ref else r.get_contents(path)
            except github.UnknownObjectException:
                return None
            if isinstance(content, list) or content.type != "file":
                raise ForgeError(f"{path} in {repo} is not a file")
            return content.decoded_content.decode("utf-8", errors="replace")

        return self._call(f"read {path} in {repo}", fetch)

    def _clone_url(self, repo: RepoRef) -> str:
        return git.check_remote_url(self._call(f"read {repo}", lambda: self._repo(repo).clone_url))

    def _git_credentials(self) -> git.GitCredentials:
        return git.GitCredentials("x-access-token", self._token())

    def clone(self, repo: RepoRef, dest: Path, *, branch: str | None = None) -> None:
        git.clone(self._clone_url(repo), dest, self._git_credentials(), branch=branch)

    def push(self, repo: RepoRef, workdir: Path, branch: str) -> None:
        git.push(self._clone_url(repo), workdir, branch, self._git_credentials())

    # -- pull requests ------------------------------------------------------

    def _pull(self, repo: RepoRef, pr: GhPullRequest) -> PullRequest:
        state: Literal["open", "closed", "merged"]
        if pr.merged:
            state = "merged"
        elif pr.state == "closed":
            state = "closed"
        else:
            state = "open"
        return PullRequest(
            ref=PullRequestRef(repo, pr.number),
            title=pr.title or "",
            body=pr.body or "",
            state=state,
            draft=bool(pr.draft),
            head_branch=pr.head.ref,
            head_sha=pr.head.sha,
            base_branch=pr.base.ref,
            base_sha=pr.base.sha,
            author=pr.user.login,
            url=pr.html_url or "",
            labels=tuple(label.name for label in pr.labels),
            merged_by=pr.merged_by.login if pr.merged_by else None,
            merged_at=pr.merged_at,
            closed_at=pr.closed_at,
            created_at=pr.created_at,
            merge_commit_sha=pr.merge_commit_sha if pr.merged else None,
        )

    def find_pull_request(self, repo: RepoRef, head_branch: str) -> PullRequest | None:
        validate_branch_name(head_branch)
        owner = repo.full_name.split("/", 1)[0]

        def search() -> PullRequest | None:
            for pr in self._repo(repo).get_pulls(state="all", head=f"{owner}:{head_branch}"):
                if pr.head.ref == head_branch:
                    return self._pull(repo, pr)
            return None

        return self._call(f"look for a pull request from {head_branch} in {repo}", search)

    def open_draft_pull_request(self, repo: RepoRef, draft: DraftPullRequest) -> PullRequest:
        draft = replace(draft, title=scrub(draft.title), body=scrub(draft.body))
        validate_branch_name(draft.head)
        validate_branch_name(draft.base)
        what = f"open a draft pull request from {draft.head} in {repo}"

        def create() -> int:
            created = self._call(
                what,
                lambda: self._repo(repo).create_pull(
                    base=draft.base,
                    head=draft.head,
                    title=draft.title,
                    body=draft.body,
                    draft=True,
                    maintainer_can_modify=False,
                ),
            )
            return created.number

        def find_open() -> int | None:
            existing = self.find_pull_request(repo, draft.head)
            if existing is None or existing.state != "open":
                return None
            return existing.ref.number

        # Looking first makes a retried job, or a POST whose answer was lost, reuse the PR.
        number = create_once(create, find_open, look_first=True)
        return self._apply_labels_and_reviewers(repo, number, draft)

    def _apply_labels_and_reviewers(
        self, repo: RepoRef, number: int, draft: DraftPullRequest
    ) -> PullRequest:
        """Both calls only add, so repeating them on a reused PR changes nothing."""
        pr = self._call(f"read pull request {number}", lambda: self._repo(repo).get_pull(number))
        if draft.labels:
            retry_repeatable(
                lambda: self._call(
                    f"label pull request {pr.number}", lambda: pr.add_to_labels(*draft.labels)
                )
            )
        reviewers = [r for r in draft.reviewers if r.lower() != pr.user.login.lower()]
        if reviewers:
            self._request_reviewers(pr, reviewers)
        return self.get_pull_request(PullRequestRef(repo, number))

    def _request_reviewers(self, pr: GhPullRequest, reviewers: list[str]) -> None:
        """GitHub refuses the whole request if one login cannot review (not a collaborator);
        then each is asked alone so one stale name in .ribbit.yml does not drop the rest,
        and a refusal never fails a job whose PR is already open."""
        what = f"request reviewers on pull request {pr.number}"
        try:
            retry_repeatable(
                lambda: self._call(what, lambda: pr.create_review_request(reviewers=reviewers))
            )
            return
        except ForgeUnavailable:
            raise
        except ForgeError as exc:
            if len(reviewers) == 1:
                log.warning("could not request reviewer %s: %s", reviewers[0], exc)
                return
        for login in reviewers:
            try:
                self._call(
                    what,
                    lambda login=login: pr.create_review_request(  # type: ignore[misc]
                        reviewers=[login]
                    ),
                )
            except ForgeUnavailable:
                raise
            except ForgeError as exc:
                log.warning("could not request reviewer %s: %s", login, exc)

    def get_pull_request(self, ref: PullRequestRef) -> PullRequest:
        return self._call(
            f"read pull request {ref}",
            lambda: self._pull(ref.repo, self._repo(ref.repo).get_pull(ref.number)),
        )

    def update_pull_request_body(self, ref: PullRequestRef, body: str) -> None:
        body = scrub(body)
        url = f"{self._repo(ref.repo).url}/pulls/{int(ref.number)}"
        # PATCH is idempotent, so the client may retry it on a lost answer.
        self._raw("PATCH", url, f"update pull request {ref}", body={"body": body})

    def list_open_pull_requests(
        self, repo: RepoRef, head_prefix: str = BRANCH_PREFIX
    ) -> list[PullRequest]:
        def fetch() -> list[PullRequest]:
            return [
                self._pull(repo, pr)
                for pr in self._repo(repo).get_pulls(state="open")
                if pr.head.ref.startswith(head_prefix)
            ]

        return self._call(f"list pull requests of {repo}", fetch)

    def list_reviews(self, ref: PullRequestRef) -> list[Review]:
        def fetch() -> list[Review]:
            pr = self._repo(ref.repo).get_pull(ref.number)
            return [
                Review(
                    id=r.id,
                    author=r.user.login if r.user else "",
                    state=_REVIEW_STATES.get(r.state, "commented"),
                    body=r.body or "",
                    submitted_at=r.submitted_at,
                )
                for r in pr.get_reviews()
            ]

        return self._call(f"read reviews of {ref}", fetch)

    def list_review_comments(self, ref: PullRequestRef) -> list[ReviewComment]:
        def fetch() -> list[ReviewComment]:
            pr = self._repo(ref.repo).get_pull(ref.number)
            return [
                ReviewComment(
                    id=c.id,
                    author=c.user.login if c.user else "",
                    body=c.body or "",
                    path=c.path,
                    line=c.line if c.line is not None else c.original_line,
                    diff_hunk=c.diff_hunk,
                    created_at=c.created_at,
                )
                for c in pr.get_review_comments()
            ]

        return self._call(f"read review comments of {ref}", fetch)

    def get_pull_request_diff(self, ref: PullRequestRef) -> str:
        url = f"{self._repo(ref.repo).url}/pulls/{ref.number}"
        return self._raw(
            "GET", url, f"read the diff of {ref}", accept="application/vnd.github.v3.diff"
        )

    def set_commit_status(self, repo: RepoRef, sha: str, status: CommitStatus) -> None:
        status = replace(status, description=scrub(status.description))
        validate_sha(sha)
        body: dict[str, Any] = {
            "state": status.state,
            "context": status.context,
            # GitHub rejects descriptions over 140 characters.
            "description": status.description[:140],
        }
        if status.target_url:
            body["target_url"] = status.target_url
        retry_repeatable(
            lambda: self._raw(
                "POST",
                f"{self._repo(repo).url}/statuses/{sha}",
                f"set the {status.context} status on {sha[:12]}",
                body=body,
            )
        )

    # -- check runs -----------------------------------------------------------------

    def publish_gate_review(self, ref: PullRequestRef, head_sha: str, review: GateReview) -> None:
        """A completed check run on ``head_sha`` carrying the findings as annotations,
        created once: looked up by ``external_id`` (the review's key) first, and again
        after a lost answer. Only GitHub Apps may create check runs; a token that may
        not is refused with 403 (ForgePermissionDenied), and the commit status stays."""
        validate_sha(head_sha)
        base = self._repo(ref.repo).url
        body = _check_run_body(head_sha, review)
        what = f"create the {review.name} check run on {head_sha[:12]}"
        create_once(
            lambda: int(json.loads(self._raw("POST", f"{base}/check-runs", what, body=body))["id"]),
            lambda: self._find_check_run(base, head_sha, review),
            look_first=True,
        )

    def _find_check_run(self, base: str, head_sha: str, review: GateReview) -> int | None:
        query = urllib.parse.urlencode({"check_name": review.name, "filter": "all"})
        data = json.loads(
            self._raw(
                "GET",
                f"{base}/commits/{head_sha}/check-runs?{query}",
                f"read the check runs of {head_sha[:12]}",
            )
        )
        for run in data.get("check_runs") or []:
            if run.get("external_id") == review.key:
                return int(run["id"])
        return None


def _annotation(a: Annotation) -> dict[str, Any]:
    return {
        "path": a.path,
        "start_line": a.line,
        "end_line": a.line,
        "annotation_level": a.level,
        "title": scrub(a.title)[:255],
        "message": scrub(a.message)[:64000],
    }


def _check_run_body(head_sha: str, review: GateReview) -> dict[str, Any]:
    annotations = review.annotations[:MAX_ANNOTATIONS]
    summary = scrub(review.summary)
    if len(review.annotations) > MAX_ANNOTATIONS:
        more = len(review.annotations) - MAX_ANNOTATIONS
        summary += f"\n\n{more} more findings are in the report."
    body: dict[str, Any] = {
        "name": review.name,
        "head_sha": head_sha,
        "external_id": review.key,
        "status": "completed",
        # Only a verified patch succeeds; an unverified one (nothing blocked it, no test
        # shows the fix) is "neutral", which GitHub shows as neither pass nor fail.
        "conclusion": (
            "success" if review.passed else "neutral" if review.unverified else "failure"
        ),
        "output": {
            "title": scrub(review.title)[:255],
            "summary": summary[:65535],  # GitHub's limit for output.summary
            "annotations": [_annotation(a) for a in annotations],
        },
    }
    if review.details_url:
        body["details_url"] = review.details_url
    return body
