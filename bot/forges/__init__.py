"""Forge clients behind one interface; :func:`make_forge` builds the configured one, and
:func:`forge_factory` is that builder as the seam a process passes to what talks to forges
(``Runtime.forges``; a test passes a fake instead).

- base.py: the :class:`Forge` protocol and the records it passes (issues, pull requests,
  comments, statuses, reviews), the errors, the gates' status name.
- github.py (PyGithub), gitlab.py (python-gitlab): the two clients. What they share is
  here once: http_errors.py (one error ladder), retries.py (HTTP retries and rate limits),
  create_once.py with markers.py (a POST whose answer was lost creates nothing twice),
  git.py (clone and push with the token in the environment only, through bot/hostgit/).
- credentials.py: who the configured credentials are on each forge and their permission
  on a repository (what `ribbit doctor` asks, with no Forge client built).
- branches.py: the bot's branch names and the check every outside ref passes;
  sanitize.py: text from the model or a patch made inert before it reaches the forge
  (mentions, closing references, HTML, links, images, quick actions; titles one line);
  redact.py: secrets kept out of logs and comments.

Nothing here imports Flask, so the worker can use it too.
"""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Protocol

from bot.forges.base import (
    Forge,
    ForgeError,
    ForgeName,
    ForgeNotFound,
    ForgePermissionDenied,
    ForgeUnavailable,
)
from bot.forges.branches import branch_name_for_issue

if TYPE_CHECKING:
    from bot.settings import Settings

__all__ = [
    "Forge",
    "ForgeError",
    "ForgeFactory",
    "ForgeName",
    "ForgeNotFound",
    "ForgePermissionDenied",
    "ForgeUnavailable",
    "branch_name_for_issue",
    "forge_factory",
    "make_forge",
]


class ForgeFactory(Protocol):
    """Builds the client for a forge; ``installation_id``: a GitHub App's installation."""

    def __call__(self, forge: ForgeName, *, installation_id: int | None = None) -> Forge: ...


def forge_factory(settings: Settings) -> ForgeFactory:
    """The deployment's forge clients, as ``settings`` configure them."""
    return partial(make_forge, settings)


def make_forge(
    settings: Settings, forge: ForgeName, *, installation_id: int | None = None
) -> Forge:
    """The forge client for ``forge`` as ``settings`` configure it.

    GitHub: the App (app_id + private_key_file) for ``installation_id`` when
    both are given, else the personal access token. GitLab: its token and URL.
    """
    if forge == "github":
        return _make_github(settings, installation_id)
    if forge == "gitlab":
        return _make_gitlab(settings)
    raise ForgeError(f"unknown forge {forge!r}")


def _make_github(settings: Settings, installation_id: int | None) -> Forge:
    from github import Auth

    from bot.forges.github import GitHubForge, installation_auth

    gh = settings.github
    auth: Auth.Token | Auth.AppInstallationAuth
    if gh.app_id is not None and gh.private_key_file is not None and installation_id is not None:
        try:
            private_key = gh.private_key_file.read_text()
        except OSError as exc:
            raise ForgeError(
                f"RIBBIT_GITHUB__PRIVATE_KEY_FILE={gh.private_key_file}: cannot read it "
                f"({exc.strerror})"
            ) from None
        auth = installation_auth(gh.api_url, gh.app_id, private_key, installation_id)
    elif gh.token is not None and gh.token.get_secret_value():
        auth = Auth.Token(gh.token.get_secret_value())
    elif gh.app_id is not None:
        raise ForgeError(
            "GitHub App is configured but the event carries no installation id, "
            "and RIBBIT_GITHUB__TOKEN is not set"
        )
    else:
        raise ForgeError(
            "GitHub has no credentials: set RIBBIT_GITHUB__TOKEN, or "
            "RIBBIT_GITHUB__APP_ID with RIBBIT_GITHUB__PRIVATE_KEY_FILE"
        )
    return GitHubForge(
        api_url=gh.api_url,
        auth=auth,
        bot_login=gh.bot_login,
        write_interval_s=gh.write_interval_s,
        retry_backoff=gh.retry_backoff_s,
        timeout_s=gh.http_timeout_s,
    )


def _make_gitlab(settings: Settings) -> Forge:
    from bot.forges.gitlab import GitLabForge

    gl = settings.gitlab
    if gl.token is None or not gl.token.get_secret_value():
        raise ForgeError("GitLab has no credentials: set RIBBIT_GITLAB__TOKEN")
    return GitLabForge(
        url=gl.url,
        token=gl.token.get_secret_value(),
        bot_username=gl.bot_username,
        retry_backoff=gl.retry_backoff_s,
        timeout_s=gl.http_timeout_s,
    )
