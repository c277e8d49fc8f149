"""The local forge: one HTTP server on 127.0.0.1 speaking GitHub REST v3, GitLab v4 and
git smart HTTP, with a Python control API for tests.

URLs (``forge.url`` is ``http://127.0.0.1:PORT``)::

    {url}/api/v3/...                    GitHub REST (PyGithub base_url)
    {url}/gitlab/api/v4/...             GitLab REST (python-gitlab url={url}/gitlab)
    {url}/git/{github|gitlab}/{path}.git   git clone/push (Basic auth, token as password)

Every request needs a known token (``Authorization: token|Bearer``,
``PRIVATE-TOKEN`` or Basic for git); unknown or missing ones get 401, private
repositories are 404 to outsiders, writes need a write role (403).
"""

from __future__ import annotations

import base64
import contextlib
import json
import re
import shutil
import subprocess
import threading
import time
import urllib.parse
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from werkzeug.serving import BaseWSGIServer, WSGIRequestHandler, make_server
from werkzeug.wrappers import Request, Response

from tests.forge import git_http, github_api, gitlab_api, webhooks
from tests.forge.github_api import ApiError
from tests.forge.state import (
    ROLE_RANK,
    CommentRec,
    ForgeKind,
    IssueRec,
    PullRec,
    RepoRec,
    ReviewCommentRec,
    ReviewRec,
    Role,
    User,
    new_id,
    now,
)
from tests.support import serving

PER_PAGE: dict[str, int] = {"github": 30, "gitlab": 20}


class _QuietHandler(WSGIRequestHandler):
    """No access log: tests read ``LocalForge.requests`` instead."""

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        return None


@dataclass
class Fault:
    """What the next ``count`` matching requests get instead of (or after) an answer."""

    method: str | None
    pattern: re.Pattern[str]
    count: int
    status: int | None = 500
    after: bool = False  # process the request, then lose the answer
    headers: dict[str, str] = field(default_factory=dict)
    body: str = '{"message": "Server Error"}'
    delay_s: float = 0.0
    # hold: the request waits at the door (reached is set) until release is set, so a test
    # can act (kill a worker) at exactly that step, with no timing involved.
    reached: threading.Event = field(default_factory=threading.Event)
    release: threading.Event | None = None

    def matches(self, method: str, path: str) -> bool:
        return (
            self.count > 0
            and (self.method is None or self.method == method)
            and bool(self.pattern.search(path))
        )

    def response(self) -> Response:
        return Response(
            self.body,
            status=self.status or 500,
            headers=self.headers,
            content_type="application/json",
        )


@dataclass(frozen=True)
class LoggedRequest:
    method: str
    path: str
    status: int


@dataclass
class Installation:
    id: int
    app_id: int
    repos: list[str]
    bot_login: str
    token_lifetime_s: int = 3600
    tokens_minted: int = 0
    # What the App may do in the installation's repositories (GitHub's permission names).
    permissions: dict[str, str] = field(
        default_factory=lambda: {
            "issues": "write",
            "contents": "write",
            "pull_requests": "write",
            "statuses": "write",
        }
    )


@dataclass
class Ctx:
    forge: LocalForge
    request: Request
    kind: ForgeKind
    user: User | None

    def require_user(self) -> User:
        if self.user is None:
            raise ApiError(401, "Bad credentials" if self.kind == "github" else "401 Unauthorized")
        return self.user


class LocalForge:
    """A GitHub + GitLab stand-in on loopback, backed by real bare git repositories."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.lock = threading.RLock()
        self._github = github_api.GitHubApi(self)
        self._gitlab = gitlab_api.GitLabApi(self)
        self._server: BaseWSGIServer = make_server(
            "127.0.0.1", 0, self._wsgi, threaded=True, request_handler=_QuietHandler
        )
        self._serving = contextlib.ExitStack()
        self.url = self._serving.enter_context(serving(self._server))
        self.reset()

    # -- lifecycle ------------------------------------------------------------

    def reset(self) -> None:
        """Forget everything (users, repos, faults, webhooks); the server keeps running."""
        with self.lock:
            self.users: dict[str, User] = {}
            self.repos: dict[tuple[str, str], RepoRec] = {}
            self.faults: list[Fault] = []
            self.requests: list[LoggedRequest] = []
            self.apps: dict[int, str] = {}
            self.installations: dict[int, Installation] = {}
            # Manifests an operator confirmed on "github.com", by the code the redirect carries.
            self.app_manifests: dict[str, dict[str, Any]] = {}
            self.webhook_deliveries: list[webhooks.Delivery] = []
            self.github_webhook: tuple[str, str] | None = None
            self.gitlab_webhook: tuple[str, str] | None = None
            self._token_expiry: dict[str, datetime] = {}
            self._installation_tokens: dict[str, str] = {}
            for folder in ("git", "seed"):
                if (self.root / folder).exists():
                    shutil.rmtree(self.root / folder)
            (self.root / "git").mkdir(parents=True)

    def close(self) -> None:
        self._serving.close()

    @property
    def github_api_url(self) -> str:
        return f"{self.url}/api/v3"

    @property
    def gitlab_url(self) -> str:
        return f"{self.url}/gitlab"

    def git_url(self, kind: ForgeKind, full_name: str) -> str:
        return f"{self.url}/git/{kind}/{full_name}.git"

    # -- control API: users, repos, permissions ---------------------------------

    def add_user(self, login: str, *, token: str | None = None, kind: str = "User") -> User:
        with self.lock:
            user = User(
                login=login,
                id=new_id(),
                token=token or f"tok_{uuid.uuid4().hex}",
                kind="Bot" if kind == "Bot" else "User",
            )
            self.users[login] = user
            return user

    def create_repo(
        self,
        kind: ForgeKind,
        full_name: str,
        *,
        source: Path | None = None,
        files: dict[str, str] | None = None,
        default_branch: str = "main",
        private: bool = True,
        owner_role_for: str | None = None,
    ) -> RepoRec:
        """A bare repository filled from a local git repo ``source`` (all branches) or from
        ``files`` committed on ``default_branch``."""
        bare = self.root / "git" / kind / f"{full_name}.git"
        bare.parent.mkdir(parents=True, exist_ok=True)
        env = {
            "GIT_CONFIG_GLOBAL": "/dev/null",
            "GIT_CONFIG_NOSYSTEM": "1",
            "PATH": "/usr/bin:/bin",
            "GIT_AUTHOR_NAME": "Seed",
            "GIT_AUTHOR_EMAIL": "seed@localhost",
            "GIT_COMMITTER_NAME": "Seed",
            "GIT_COMMITTER_EMAIL": "seed@localhost",
        }
        subprocess.run(
            ["git", "init", "-q", "--bare", "-b", default_branch, str(bare)], check=True, env=env
        )
        if source is None:
            seed = self.root / "seed" / kind / full_name
            seed.mkdir(parents=True)
            subprocess.run(
                ["git", "init", "-q", "-b", default_branch], cwd=seed, check=True, env=env
            )
            for rel, text in (files or {"README.md": "# seed\n"}).items():
                (seed / rel).parent.mkdir(parents=True, exist_ok=True)
                (seed / rel).write_text(text)
            subprocess.run(["git", "add", "-A"], cwd=seed, check=True, env=env)
            subprocess.run(["git", "commit", "-q", "-m", "initial"], cwd=seed, check=True, env=env)
            source = seed
        subprocess.run(
            ["git", "push", "-q", str(bare), "refs/heads/*:refs/heads/*"],
            cwd=source,
            check=True,
            env=env,
        )
        with self.lock:
            repo = RepoRec(
                forge=kind,
                full_name=full_name,
                id=new_id(),
                bare=bare,
                default_branch=default_branch,
                private=private,
            )
            self.repos[(kind, full_name)] = repo
            return repo

    def repo(self, kind: ForgeKind, full_name: str) -> RepoRec:
        return self.repos[(kind, full_name)]

    def add_collaborator(self, kind: ForgeKind, full_name: str, login: str, role: Role) -> None:
        with self.lock:
            if login not in self.users:
                self.add_user(login)
            self.repo(kind, full_name).roles[login] = role

    # -- control API: GitHub App --------------------------------------------------

    def register_app(self, app_id: int, public_key_pem: str) -> None:
        self.apps[app_id] = public_key_pem

    def confirm_app_manifest(self, manifest: dict[str, Any]) -> str:
        """What github.com does when the operator confirms a posted manifest: the code its
        redirect to ``manifest["redirect_url"]`` carries (one use)."""
        code = uuid.uuid4().hex
        self.app_manifests[code] = manifest
        return code

    def add_installation(
        self,
        installation_id: int,
        app_id: int,
        repos: list[str],
        *,
        bot_login: str = "ribbit[bot]",
        token_lifetime_s: int = 3600,
    ) -> Installation:
        installation = Installation(installation_id, app_id, repos, bot_login, token_lifetime_s)
        self.installations[installation_id] = installation
        return installation

    def mint_installation_token(self, installation: Installation) -> User:
        with self.lock:
            installation.tokens_minted += 1
            token = github_api.new_installation_token()
            user = self.users.get(installation.bot_login)
            if user is None:
                user = self.add_user(installation.bot_login, token=token, kind="Bot")
            self._token_expiry[token] = datetime.now(UTC) + timedelta(
                seconds=installation.token_lifetime_s
            )
            self._installation_tokens[token] = user.login
            for full_name in installation.repos:
                self.repo("github", full_name).roles.setdefault(user.login, "write")
            return User(login=user.login, id=user.id, token=token, kind="Bot")

    # -- control API: issues, comments, reviews (each may send a webhook) ------------

    def create_issue(
        self,
        kind: ForgeKind,
        full_name: str,
        *,
        title: str,
        body: str = "",
        author: str,
        labels: tuple[str, ...] = (),
    ) -> IssueRec:
        with self.lock:
            repo = self.repo(kind, full_name)
            issue = IssueRec(
                number=repo.next_issue_number(),
                id=new_id(),
                title=title,
                body=body,
                author=author,
                labels=list(labels),
            )
            repo.issues[issue.number] = issue
            return issue

    def add_label(
        self, kind: ForgeKind, full_name: str, number: int, label: str, *, actor: str
    ) -> webhooks.Delivery | None:
        with self.lock:
            repo = self.repo(kind, full_name)
            issue = repo.issues[number]
            previous = list(issue.labels)
            if label not in issue.labels:
                issue.labels.append(label)
            issue.updated_at = now()
        return webhooks.issue_labeled(self, repo, issue, label, actor, previous)

    def comment_as(
        self, kind: ForgeKind, full_name: str, number: int, *, author: str, body: str
    ) -> tuple[CommentRec, webhooks.Delivery | None]:
        with self.lock:
            repo = self.repo(kind, full_name)
            issue = repo.issues[number]
            comment = self.add_comment_record(issue, author, body)
        return comment, webhooks.comment_created(self, repo, issue, comment)

    def comment_on_pull_as(
        self, kind: ForgeKind, full_name: str, number: int, *, author: str, body: str
    ) -> tuple[CommentRec, webhooks.Delivery | None]:
        """A conversation comment on a PR/MR (GitHub issue_comment on the PR, GitLab Note Hook
        with noteable_type MergeRequest)."""
        with self.lock:
            repo = self.repo(kind, full_name)
            pr = repo.pulls[number]
            comment = self.add_comment_record(pr, author, body)
        return comment, webhooks.comment_created(self, repo, pr, comment)

    def submit_review(
        self,
        kind: ForgeKind,
        full_name: str,
        number: int,
        *,
        author: str,
        state: str,
        body: str = "",
        comments: tuple[tuple[str, int, str], ...] = (),
    ) -> tuple[ReviewRec, webhooks.Delivery | None]:
        """``state``: APPROVED, CHANGES_REQUESTED or COMMENTED; comments: (path, line, body)."""
        with self.lock:
            repo = self.repo(kind, full_name)
            pr = repo.pulls[number]
            self.refresh_pull(repo, pr)
            review = ReviewRec(
                id=new_id(),
                author=author,
                state=state,  # type: ignore[arg-type]
                body=body,
                commit_id=pr.head_sha,
                submitted_at=now(),
            )
            pr.reviews.append(review)
            for path, line, text in comments:
                pr.review_comments.append(
                    ReviewCommentRec(
                        id=new_id(),
                        review_id=review.id,
                        author=author,
                        body=text,
                        path=path,
                        line=line,
                        commit_id=pr.head_sha,
                        created_at=now(),
                        diff_hunk=f"@@ -{line},1 +{line},1 @@",
                    )
                )
        return review, webhooks.review_submitted(self, repo, pr, review)

    def merge_pull_request(
        self, kind: ForgeKind, full_name: str, number: int, *, actor: str
    ) -> webhooks.Delivery | None:
        """A real merge commit on the base branch, then the close webhook."""
        with self.lock:
            repo = self.repo(kind, full_name)
            pr = repo.pulls[number]
            self.refresh_pull(repo, pr)
            base_now = repo.branch_sha(pr.base)
            assert base_now is not None
            tree = repo.git("merge-tree", "--write-tree", base_now, pr.head_sha).split()[0]
            merge = repo.git(
                "commit-tree",
                tree,
                "-p",
                base_now,
                "-p",
                pr.head_sha,
                "-m",
                f"Merge pull request #{number} from {pr.head}",
            ).strip()
            repo.git("update-ref", f"refs/heads/{pr.base}", merge, base_now)
            pr.merged, pr.merged_by, pr.merge_commit_sha = True, actor, merge
            pr.state, pr.merged_at, pr.closed_at, pr.updated_at = "closed", now(), now(), now()
        return webhooks.pull_closed(self, repo, pr, actor)

    def close_pull_request(
        self, kind: ForgeKind, full_name: str, number: int, *, actor: str
    ) -> webhooks.Delivery | None:
        with self.lock:
            repo = self.repo(kind, full_name)
            pr = repo.pulls[number]
            pr.state, pr.closed_at, pr.updated_at = "closed", now(), now()
        return webhooks.pull_closed(self, repo, pr, actor)

    # -- control API: faults ------------------------------------------------------

    def fail_next(
        self,
        path_regex: str,
        *,
        count: int = 1,
        status: int | None = 500,
        method: str | None = None,
        after: bool = False,
        headers: dict[str, str] | None = None,
        body: str | None = None,
        delay_s: float = 0.0,
        hold: bool = False,
    ) -> Fault:
        """The next ``count`` requests whose path matches get ``status`` instead of an answer.

        ``after``: the request is processed first (the answer is lost, not the work).
        ``delay_s``: wait that long first (or, with ``after``, between the work and the
        answer); with ``status=None`` the real answer follows the delay.
        ``hold``: the request waits until ``fault.release`` is set; ``fault.reached`` is set
        when it arrives.
        """
        fault = Fault(
            method,
            re.compile(path_regex),
            count,
            status,
            after,
            headers or {},
            body if body is not None else '{"message": "Server Error"}',
            delay_s,
            release=threading.Event() if hold else None,
        )
        with self.lock:
            self.faults.append(fault)
        return fault

    def rate_limit_next(
        self,
        kind: ForgeKind,
        path_regex: str,
        *,
        mode: str = "primary",
        wait_s: int = 120,
        count: int = 1,
    ) -> Fault:
        """GitHub primary (403 + X-RateLimit-Remaining: 0 + X-RateLimit-Reset), secondary
        (403 + Retry-After) or a GitLab 429 with Retry-After."""
        if kind == "gitlab":
            return self.fail_next(
                path_regex,
                count=count,
                status=429,
                headers={
                    "Retry-After": str(wait_s),
                    "RateLimit-Reset": str(int(time.time()) + wait_s),
                },
                body='{"message": "429 Too Many Requests"}',
            )
        if mode == "primary":
            reset = str(int(time.time()) + wait_s)
            return self.fail_next(
                path_regex,
                count=count,
                status=403,
                headers={
                    "X-RateLimit-Limit": "5000",
                    "X-RateLimit-Remaining": "0",
                    "X-RateLimit-Used": "5000",
                    "X-RateLimit-Reset": reset,
                },
                body='{"message": "API rate limit exceeded for user ID 1.", '
                '"documentation_url": "https://docs.github.com/rest/overview/rate-limits"}',
            )
        return self.fail_next(
            path_regex,
            count=count,
            status=403,
            headers={"Retry-After": str(wait_s)},
            body='{"message": "You have exceeded a secondary rate limit. '
            'Please wait a few minutes before you try again."}',
        )

    # -- control API: reading state back -----------------------------------------

    def comments(self, kind: ForgeKind, full_name: str, number: int) -> list[CommentRec]:
        return list(self.repo(kind, full_name).issues[number].comments)

    def pulls(self, kind: ForgeKind, full_name: str) -> list[PullRec]:
        repo = self.repo(kind, full_name)
        for pr in repo.pulls.values():
            self.refresh_pull(repo, pr)
        return list(repo.pulls.values())

    def branches(self, kind: ForgeKind, full_name: str) -> dict[str, str]:
        return self.repo(kind, full_name).branches()

    def request_count(self, method: str, path_regex: str) -> int:
        pattern = re.compile(path_regex)
        return sum(1 for r in self.requests if r.method == method and pattern.search(r.path))

    def configure_webhooks(
        self, *, github: tuple[str, str] | None = None, gitlab: tuple[str, str] | None = None
    ) -> None:
        """(bot URL, secret) per forge; GitHub signs with the secret, GitLab sends it."""
        self.github_webhook = github
        self.gitlab_webhook = gitlab

    # -- records shared by both dialects ------------------------------------------

    def add_comment_record(self, issue: IssueRec | PullRec, author: str, body: str) -> CommentRec:
        with self.lock:
            comment = CommentRec(
                id=new_id(), author=author, body=body, created_at=now(), updated_at=now()
            )
            issue.comments.append(comment)
            issue.updated_at = now()
            return comment

    def edit_comment_record(self, comment: CommentRec, body: str) -> None:
        with self.lock:
            if body != comment.body:
                comment.history.append(comment.body)
                comment.body = body
            comment.updated_at = now()

    def add_pull_record(
        self,
        repo: RepoRec,
        author: str,
        title: str,
        body: str,
        head: str,
        base: str,
        *,
        draft: bool,
    ) -> PullRec:
        with self.lock:
            head_sha, base_sha = repo.branch_sha(head), repo.branch_sha(base)
            assert head_sha is not None and base_sha is not None
            pr = PullRec(
                number=repo.next_pull_number(),
                id=new_id(),
                title=title,
                body=body,
                author=author,
                head=head,
                base=base,
                head_sha=head_sha,
                base_sha=base_sha,
                draft=draft,
            )
            repo.pulls[pr.number] = pr
            return pr

    def refresh_pull(self, repo: RepoRec, pr: PullRec) -> None:
        """An open PR follows its head branch, as on the real forges."""
        if pr.state == "open":
            sha = repo.branch_sha(pr.head)
            if sha:
                pr.head_sha = sha

    # -- HTTP -------------------------------------------------------------------

    def _wsgi(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        request = Request(environ)
        raw = (
            environ.get("RAW_URI")
            or environ.get("REQUEST_URI")
            or urllib.parse.quote(environ.get("PATH_INFO", ""))
        )
        path = raw.split("?", 1)[0]
        response = self._handle(request, path)
        with self.lock:
            self.requests.append(LoggedRequest(request.method, path, response.status_code))
        return response(environ, start_response)

    def _take_fault(self, method: str, path: str) -> Fault | None:
        with self.lock:
            for fault in self.faults:
                if fault.matches(method, path):
                    fault.count -= 1
                    return fault
        return None

    def _handle(self, request: Request, path: str) -> Response:
        fault = self._take_fault(request.method, path)
        if fault is None:
            return self._dispatch(request, path)
        fault.reached.set()
        if fault.release is not None:
            fault.release.wait(timeout=600)  # bounded, so a forgotten release ends the thread
        if not fault.after:
            time.sleep(fault.delay_s)
            return fault.response() if fault.status is not None else self._dispatch(request, path)
        # after: the forge does the work, then the answer is slow or lost.
        response = self._dispatch(request, path)
        time.sleep(fault.delay_s)
        return fault.response() if fault.status is not None else response

    def _user_for(self, token: str | None) -> User | None:
        if not token:
            return None
        expiry = self._token_expiry.get(token)
        if expiry is not None:
            if expiry < datetime.now(UTC):
                return None
            login = self._installation_tokens[token]
            user = self.users[login]
            return User(login=login, id=user.id, token=token, kind="Bot")
        return next((u for u in self.users.values() if u.token == token), None)

    def _dispatch(self, request: Request, path: str) -> Response:
        if path.startswith("/api/v3/"):
            return self._api("github", request, path.removeprefix("/api/v3"))
        if path.startswith("/gitlab/api/v4/"):
            return self._api("gitlab", request, path.removeprefix("/gitlab/api/v4"))
        match = re.match(r"^/git/(github|gitlab)/(.+?\.git)/(.*)$", path)
        if match:
            return self._git(request, match.group(1), match.group(2), match.group(3))
        return Response("not found", status=404)

    def _api(self, kind: ForgeKind, request: Request, path: str) -> Response:
        auth = request.headers.get("Authorization", "")
        token = request.headers.get("PRIVATE-TOKEN") if kind == "gitlab" else None
        if not token and auth.split(" ", 1)[0].lower() in ("token", "bearer"):
            token = auth.split(" ", 1)[1] if " " in auth else None
        ctx = Ctx(self, request, kind, self._user_for(token))
        api = self._github if kind == "github" else self._gitlab
        err = github_api.error if kind == "github" else gitlab_api.error
        # An App's JWT (header.claims.signature) is no user's token: the App endpoints
        # (/app, /app/..., a repository's /installation) verify it themselves.
        app_jwt = kind == "github" and token is not None and token.count(".") == 2
        if token and ctx.user is None and not app_jwt:
            return err(401, "Bad credentials" if kind == "github" else "401 Unauthorized")
        for method, pattern, handler in api.routes:
            match = re.fullmatch(pattern, path)
            if match and method == request.method:
                try:
                    with self.lock:
                        response = handler(
                            ctx, {k: urllib.parse.unquote(v) for k, v in match.groupdict().items()}
                        )
                except ApiError as exc:
                    return err(exc.status, exc.message, exc.headers)
                prefix = "/api/v3" if kind == "github" else "/gitlab/api/v4"
                return self._paginate(kind, request, response, f"{self.url}{prefix}{path}")
        return err(404, "Not Found")

    def _paginate(
        self, kind: ForgeKind, request: Request, response: Response, base: str
    ) -> Response:
        """Lists come a page at a time, as on the real forges (GitHub 30, GitLab 20 per page),
        with the Link header (both) and X-Page/X-Next-Page/X-Total headers (GitLab)."""
        if request.method != "GET" or response.mimetype != "application/json":
            return response
        items = json.loads(response.get_data())
        if not isinstance(items, list):
            return response
        per_page = max(1, min(100, int(request.args.get("per_page") or PER_PAGE[kind])))
        page = max(1, int(request.args.get("page") or 1))
        pages = max(1, -(-len(items) // per_page))
        chunk = items[(page - 1) * per_page : page * per_page]

        def link(number: int) -> str:
            query = {**request.args.to_dict(), "page": str(number), "per_page": str(per_page)}
            return f"{base}?{urllib.parse.urlencode(query)}"

        rels = {"first": 1, "last": pages}
        if page < pages:
            rels["next"] = page + 1
        if page > 1:
            rels["prev"] = page - 1
        headers = {"Link": ", ".join(f'<{link(n)}>; rel="{rel}"' for rel, n in rels.items())}
        if kind == "gitlab":
            headers.update(
                {
                    "X-Page": str(page),
                    "X-Per-Page": str(per_page),
                    "X-Total": str(len(items)),
                    "X-Total-Pages": str(pages),
                    "X-Next-Page": str(page + 1) if page < pages else "",
                    "X-Prev-Page": str(page - 1) if page > 1 else "",
                }
            )
        return Response(
            json.dumps(chunk),
            status=response.status_code,
            headers=headers,
            content_type=response.content_type,
        )

    def _git(self, request: Request, kind: str, repo_path: str, rest: str) -> Response:
        challenge = {"WWW-Authenticate": 'Basic realm="local-forge"'}
        auth = request.headers.get("Authorization", "")
        user: User | None = None
        if auth.startswith("Basic "):
            try:
                _, _, password = base64.b64decode(auth[6:]).decode().partition(":")
            except ValueError:
                password = ""
            user = self._user_for(password)
        if user is None:
            return Response("authentication required", status=401, headers=challenge)
        full_name = repo_path.removesuffix(".git")
        repo = self.repos.get((kind, full_name))
        if repo is None:
            return Response("not found", status=404)
        role = repo.role_of(user.login)
        if ROLE_RANK[role] < ROLE_RANK["read"]:
            return Response("not found", status=404)
        if git_http.needs_write(request, rest) and ROLE_RANK[role] < ROLE_RANK["write"]:
            return Response("permission denied", status=403)
        return git_http.serve(request, self.root / "git", f"{kind}/{repo_path}", rest, user.login)
