"""`ribbit doctor`'s forge checks: each configured forge's credentials asked of the forge
(who they are, and their permission on the repositories the operator names), each failure
one line saying what to do next.

A forge counts as configured when its webhook secret or its credentials are set: a secret
with no credentials accepts webhooks whose every job then fails, so it is an error here."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from bot.doctor_check import Check
from bot.forges.base import (
    FORGE_NAMES,
    ForgeError,
    ForgeName,
    ForgePermissionDenied,
    ForgeUnavailable,
    RepoRef,
)
from bot.settings import Settings


@dataclass(frozen=True)
class _ForgeTerms:
    """How the operator names one forge's settings, for the remedies."""

    credentials: str  # what to set when there are none
    url_var: str
    token_var: str


_TERMS: dict[ForgeName, _ForgeTerms] = {
    "github": _ForgeTerms(
        "set RIBBIT_GITHUB__TOKEN, or RIBBIT_GITHUB__APP_ID with RIBBIT_GITHUB__PRIVATE_KEY_FILE",
        "RIBBIT_GITHUB__API_URL",
        "RIBBIT_GITHUB__TOKEN",
    ),
    "gitlab": _ForgeTerms("set RIBBIT_GITLAB__TOKEN", "RIBBIT_GITLAB__URL", "RIBBIT_GITLAB__TOKEN"),
}


def _has_credentials(s: Settings, forge: ForgeName) -> bool:
    if forge == "gitlab":
        return s.gitlab.token is not None and bool(s.gitlab.token.get_secret_value())
    gh = s.github
    has_token = gh.token is not None and bool(gh.token.get_secret_value())
    return has_token or gh.private_key_file is not None


def _has_webhook_secret(s: Settings, forge: ForgeName) -> bool:
    return (s.github.webhook_secret if forge == "github" else s.gitlab.webhook_token) is not None


def _remedy(s: Settings, forge: ForgeName, exc: ForgeError) -> str:
    terms = _TERMS[forge]
    if isinstance(exc, ForgeUnavailable):
        return f"{exc}; check {terms.url_var} and that this host can reach it"
    if isinstance(exc, ForgePermissionDenied):
        if forge == "github" and s.github.private_key_file is not None:
            return f"{exc}; check RIBBIT_GITHUB__APP_ID and the App's private key file"
        return f"{exc}; the token is wrong, expired or revoked: set a new one in {terms.token_var}"
    return str(exc)


def forge_checks(s: Settings, repos: Sequence[RepoRef] = ()) -> list[Check]:
    """The checks of every forge that is configured or that a named repository is on."""
    checks: list[Check] = []
    for forge in FORGE_NAMES:
        named = [r for r in repos if r.forge == forge]
        if named or _has_credentials(s, forge) or _has_webhook_secret(s, forge):
            checks += _one_forge(s, forge, named)
    return checks


def _one_forge(s: Settings, forge: ForgeName, repos: Sequence[RepoRef]) -> list[Check]:
    name = f"{forge} credentials"
    if not _has_credentials(s, forge):
        why = (
            "webhooks are accepted but every job will fail"
            if _has_webhook_secret(s, forge)
            else "none set"
        )
        return [Check(name, "fail", f"{why}: {_TERMS[forge].credentials}")]
    from bot.forges import credentials

    identity_of: Callable[[], credentials.Identity]
    if forge == "github":
        identity_of = lambda: credentials.github_identity(s.github)  # noqa: E731
    else:
        identity_of = lambda: credentials.gitlab_identity(s.gitlab)  # noqa: E731
    try:
        identity = identity_of()
    except ForgeError as exc:
        # Without an identity, a permission check would fail the same way: one line.
        return [Check(name, "fail", _remedy(s, forge, exc))]
    checks = [Check(name, "ok", f"authenticated as {identity.who}")]
    expected = s.github.bot_login if forge == "github" else s.gitlab.bot_username
    if identity.login is not None and identity.login != expected:
        var = "RIBBIT_GITHUB__BOT_LOGIN" if forge == "github" else "RIBBIT_GITLAB__BOT_USERNAME"
        checks.append(
            Check(
                f"{forge} bot login",
                "warn",
                f"the token is {identity.login} but {var} is {expected}: the bot would answer "
                f"its own comments; set {var}={identity.login}",
            )
        )
    for repo in repos:
        checks += _access(s, repo)
    return checks


def _access(s: Settings, repo: RepoRef) -> list[Check]:
    """The permission on ``repo``, then (where it is enough) whether its label is there."""
    from bot.forges import credentials

    name = f"{repo.forge} access to {repo.full_name}"
    try:
        if repo.forge == "github":
            access = credentials.github_access(s.github, repo)
        else:
            access = credentials.gitlab_access(s.gitlab, repo)
    except ForgeError as exc:
        return [Check(name, "fail", _remedy(s, repo.forge, exc))]
    if not access.enough:
        return [Check(name, "fail", f"{access.level}: {access.lacking}")]
    return [Check(name, "ok", access.level), _label(s, repo)]


def _label(s: Settings, repo: RepoRef) -> Check:
    from bot.forges import credentials

    name = f"{repo.forge} label on {repo.full_name}"
    try:
        if repo.forge == "github":
            found = credentials.github_has_label(s.github, repo, s.label)
        else:
            found = credentials.gitlab_has_label(s.gitlab, repo, s.label)
    except ForgeError as exc:
        return Check(name, "warn", _remedy(s, repo.forge, exc))
    if found:
        return Check(name, "ok", f"{s.label!r} exists")
    # Not an error: the first job creates it (worker/first_contact.py).
    return Check(
        name,
        "warn",
        f"{s.label!r} is missing: Ribbit creates it with the repository's first job (a "
        "`/ribbit help` comment on any issue starts one), or create it by hand",
    )
