"""Who the configured credentials are on each forge, and what they may do on a repository.

What `ribbit doctor` asks the forges: a token that is missing, revoked or too weak shows
here, before a job clones, comments or opens a draft and fails. Each question is one or
two requests with no retries worth waiting for (the operator is at the terminal), and
every failure is a :class:`~bot.forges.base.ForgeError` with a token-free message.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import gitlab
from github import Auth, Github, GithubException, GithubIntegration, UnknownObjectException
from gitlab.exceptions import GitlabError

from bot.forges.base import ForgeError, ForgeNotFound, RepoRef
from bot.forges.http_errors import mapped_errors, status_error
from bot.forges.redact import SECRETS, redact
from bot.forges.retries import retry_policy

if TYPE_CHECKING:
    from bot.settings import GitHubSettings, GitLabSettings

# What a job does on the repository (push a branch, open a draft, comment, set a status)
# needs GitHub's write role; an App needs these permissions at "write" in its installation
# (bot/github_app_setup.py's manifest asks for them).
GITHUB_APP_NEEDS = ("contents", "pull_requests", "issues", "statuses")
# GitLab's Developer role: push a non-protected branch, open a merge request, comment.
GITLAB_DEVELOPER = 30
_GITLAB_ROLES = {10: "Guest", 15: "Planner", 20: "Reporter", 30: "Developer", 40: "Maintainer"}
# One quick retry: an operator waiting at the terminal wants the answer, not a backoff.
_RETRY = retry_policy(total=1, backoff_factor=0)


@dataclass(frozen=True)
class Identity:
    """Who the forge says the credentials are."""

    who: str  # for the operator: "ribbit-bot", "GitHub App ribbit (id 42)"
    login: str | None  # the account comments come from; None for an App (installation bot)


@dataclass(frozen=True)
class RepoAccess:
    """What the credentials may do on one repository, and whether a job can work there."""

    repo: RepoRef
    level: str  # in the forge's words: "write", "Developer (30)", "contents: write, ..."
    enough: bool
    lacking: str = ""  # when not enough: what to grant


@contextmanager
def _github_errors(what: str) -> Iterator[None]:
    def to_error(exc: GithubException) -> ForgeError:
        data = exc.data
        message = str(data.get("message") or "") if isinstance(data, dict) else str(data or "")
        headers = dict(exc.headers or {})
        message = redact(message, SECRETS.values())
        return status_error("GitHub", what, exc.status, message, headers, rate_limited=False)

    with mapped_errors("GitHub", what, GithubException, to_error):
        yield


@contextmanager
def _gitlab_errors(what: str) -> Iterator[None]:
    def to_error(exc: GitlabError) -> ForgeError:
        message = redact(str(exc.error_message or ""), SECRETS.values())
        return status_error("GitLab", what, exc.response_code or 0, message, {}, rate_limited=False)

    with mapped_errors("GitLab", what, GitlabError, to_error):
        yield


def _private_key(gh: GitHubSettings) -> str:
    assert gh.private_key_file is not None
    try:
        return gh.private_key_file.read_text()
    except OSError as exc:
        raise ForgeError(
            f"RIBBIT_GITHUB__PRIVATE_KEY_FILE={gh.private_key_file}: cannot read it "
            f"({exc.strerror})"
        ) from None


def _app(gh: GitHubSettings) -> GithubIntegration:
    assert gh.app_id is not None
    auth = Auth.AppAuth(gh.app_id, _private_key(gh))
    return GithubIntegration(
        auth=auth, base_url=gh.api_url.rstrip("/"), timeout=gh.http_timeout_s, retry=_RETRY
    )


def _token_client(gh: GitHubSettings) -> Github:
    assert gh.token is not None
    token = gh.token.get_secret_value()
    SECRETS.add(token)
    return Github(
        auth=Auth.Token(token),
        base_url=gh.api_url.rstrip("/"),
        timeout=gh.http_timeout_s,
        retry=_RETRY,
    )


def github_uses_app(gh: GitHubSettings) -> bool:
    """The App when it is configured: what the worker uses for events that name one."""
    return gh.app_id is not None and gh.private_key_file is not None


def github_identity(gh: GitHubSettings) -> Identity:
    """GET /app with the App's JWT, else GET /user with the token."""
    if github_uses_app(gh):
        with _github_errors("read the GitHub App (GET /app)"):
            app = _app(gh).get_app()
            return Identity(f"GitHub App {app.slug} (id {gh.app_id})", None)
    with _github_errors("read the token's user (GET /user)"):
        return Identity(login := _token_client(gh).get_user().login, login)


def github_access(gh: GitHubSettings, repo: RepoRef) -> RepoAccess:
    """The App's installation permissions on ``repo``, else the token's role on it."""
    owner, name = repo.full_name.split("/", 1)
    if github_uses_app(gh):
        try:
            with _github_errors(f"find the App's installation on {repo.full_name}"):
                permissions = _app(gh).get_repo_installation(owner, name).permissions
        except ForgeNotFound:
            return RepoAccess(repo, "not installed", False, "install the App on the repository")
        return _app_access(repo, permissions or {})
    try:
        with _github_errors(f"read {repo.full_name}"):
            granted = _token_client(gh).get_repo(repo.full_name).permissions
    except ForgeNotFound:
        # GitHub answers 404, not 403, for a private repository the account cannot see.
        return RepoAccess(repo, "none", False, "give the account the write role")
    level = next(
        (
            role
            for role in ("admin", "maintain", "push", "triage", "pull")
            if getattr(granted, role)
        ),
        "none",
    )
    level = {"push": "write", "pull": "read"}.get(level, level)
    enough = bool(granted.push)
    return RepoAccess(repo, level, enough, "" if enough else "give the account the write role")


def github_has_label(gh: GitHubSettings, repo: RepoRef, name: str) -> bool:
    """Whether ``repo`` has the label ``name``, read as the App's installation or the token."""
    owner, repo_name = repo.full_name.split("/", 1)
    with _github_errors(f"read the label {name} of {repo.full_name}"):
        if github_uses_app(gh):
            app = _app(gh)
            installation = app.get_repo_installation(owner, repo_name).id
            client = app.get_github_for_installation(installation)
        else:
            client = _token_client(gh)
        try:
            client.get_repo(repo.full_name).get_label(name)
        except UnknownObjectException:
            return False
    return True


def _app_access(repo: RepoRef, permissions: dict[str, Any]) -> RepoAccess:
    shown = ", ".join(f"{p}: {permissions.get(p, 'none')}" for p in GITHUB_APP_NEEDS)
    short = [p for p in GITHUB_APP_NEEDS if permissions.get(p) != "write"]
    lacking = "" if not short else "grant the App write on " + ", ".join(short)
    return RepoAccess(repo, shown, not short, lacking)


def _gitlab_client(gl: GitLabSettings) -> gitlab.Gitlab:
    assert gl.token is not None
    token = gl.token.get_secret_value()
    SECRETS.add(token)
    return gitlab.Gitlab(
        gl.url.rstrip("/"),
        private_token=token,
        timeout=gl.http_timeout_s,
        retry_transient_errors=False,
    )


def gitlab_identity(gl: GitLabSettings) -> Identity:
    """python-gitlab's auth(): GET /user with the token."""
    client = _gitlab_client(gl)
    with _gitlab_errors("read the token's user (GET /user)"):
        client.auth()
    assert client.user is not None
    return Identity(client.user.username, client.user.username)


def gitlab_access(gl: GitLabSettings, repo: RepoRef) -> RepoAccess:
    """The token's user's access level on the project, inherited from groups included."""
    client = _gitlab_client(gl)
    project = "/projects/" + urllib.parse.quote(repo.full_name, safe="")
    with _gitlab_errors("read the token's user (GET /user)"):
        client.auth()
    assert client.user is not None
    try:
        with _gitlab_errors(f"read {repo.full_name}"):
            client.http_get(project)
            member = client.http_get(f"{project}/members/all/{client.user.id}")
    except ForgeNotFound:
        return RepoAccess(repo, "none", False, "add the user to the project as Developer")
    level = int(member.get("access_level") or 0) if isinstance(member, dict) else 0
    named = f"{_GITLAB_ROLES.get(level, 'Owner' if level >= 50 else 'none')} ({level})"
    enough = level >= GITLAB_DEVELOPER
    return RepoAccess(repo, named, enough, "" if enough else "make the user a Developer or above")


def gitlab_has_label(gl: GitLabSettings, repo: RepoRef, name: str) -> bool:
    """Whether the project has the label ``name``."""
    project = "/projects/" + urllib.parse.quote(repo.full_name, safe="")
    try:
        with _gitlab_errors(f"read the label {name} of {repo.full_name}"):
            _gitlab_client(gl).http_get(f"{project}/labels/{urllib.parse.quote(name, safe='')}")
    except ForgeNotFound:
        return False
    return True
