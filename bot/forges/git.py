"""Real git clone and push with credentials passed only through the environment.

The token goes into an ``http.<url>.extraHeader`` set through
``GIT_CONFIG_COUNT``/``GIT_CONFIG_KEY_n``/``GIT_CONFIG_VALUE_n``: it is never in
argv (visible in ``ps``), in a URL (printed by git in errors) or in
``.git/config`` (left behind in the checkout). The header is scoped to the
forge's URL prefix so git sends it nowhere else, even if a checkout's config
rewrites URLs or adds submodules. Hooks are disabled: the checkout may have
been written to by untrusted code.
"""

from __future__ import annotations

import base64
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from bot import hostgit
from bot.forges.base import ForgeError, ForgeNotFound, ForgePermissionDenied, ForgeUnavailable
from bot.forges.branches import validate_branch_name
from bot.forges.redact import redact
from bot.retrying import retry, stop_after_attempts, wait_full_jitter

# Clones and pushes cross the network: longer than host git's local default.
FORGE_GIT_TIMEOUT_S = 600
# What a clone over HTTPS needs from this process: the locale and the TLS trust store.
_INHERIT = ("LANG", "LC_ALL", "TMPDIR", "SSL_CERT_FILE", "SSL_CERT_DIR")
_ATTEMPTS = 3


@dataclass(frozen=True)
class GitCredentials:
    """Basic-auth pair for git over HTTPS, as forges expect it."""

    username: str
    token: str

    def header(self) -> str:
        pair = base64.b64encode(f"{self.username}:{self.token}".encode()).decode()
        return f"Authorization: Basic {pair}"


def check_remote_url(url: str) -> str:
    """An http(s) URL without user info: nothing secret can hide in it."""
    parts = urlsplit(url)
    if parts.scheme not in ("https", "http") or not parts.hostname:
        raise ForgeError(f"refusing a non-HTTP(S) git remote: {parts.scheme}://{parts.hostname}")
    if parts.username or parts.password or "@" in parts.netloc:
        raise ForgeError("refusing a git remote URL with credentials in it")
    return url


def _url_prefix(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}/"


def forge_git_env(url: str, credentials: GitCredentials | None) -> dict[str, str]:
    """Environment for one git command against ``url``: host git's hardened one, with
    every protocol but HTTP(S) refused, no credential helper, the auth header scoped to
    the forge and the TLS settings of this process."""
    return hostgit.git_env(
        config=_remote_config(url, credentials), any_owner=False, inherit=_INHERIT
    )


def _remote_config(url: str, credentials: GitCredentials | None) -> list[tuple[str, str]]:
    config: list[tuple[str, str]] = [
        ("credential.helper", ""),
        ("protocol.allow", "never"),
        ("protocol.https.allow", "always"),
        ("protocol.http.allow", "always"),
    ]
    if credentials is not None:
        config.append((f"http.{_url_prefix(url)}.extraHeader", credentials.header()))
    return config


def _classify(stderr: str, what: str) -> ForgeError:
    lowered = stderr.lower()
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    # git ends with hints; the line that says what went wrong starts with fatal/error.
    detail = next(
        (line for line in lines if line.startswith(("fatal:", "error:"))),
        lines[-1] if lines else "no output",
    )
    message = f"git {what} failed: {detail}"
    if "[rejected]" in lowered or "non-fast-forward" in lowered or "fetch first" in lowered:
        return ForgeError(
            f"git {what} rejected: the remote branch has commits this checkout "
            "lacks, and the bot never force-pushes"
        )
    if any(code in lowered for code in ("error: 500", "error: 502", "error: 503", "error: 504")):
        return ForgeUnavailable(message)
    if any(
        s in lowered
        for s in (
            "could not resolve host",
            "connection refused",
            "timed out",
            "failed to connect",
            "connection reset",
            "early eof",
            "the remote end hung up",
        )
    ):
        return ForgeUnavailable(message)
    if "error: 404" in lowered or "not found" in lowered:
        return ForgeNotFound(message)
    if any(
        s in lowered
        for s in (
            "error: 401",
            "error: 403",
            "authentication failed",
            "could not read username",
            "permission",
            "denied",
        )
    ):
        return ForgePermissionDenied(message)
    return ForgeError(message)


def run_forge_git(
    args: list[str],
    *,
    url: str,
    credentials: GitCredentials | None,
    cwd: Path | None = None,
    what: str,
) -> str:
    """Run host git once against the forge at ``url``; failures become Forge errors with
    secrets masked (what a forge client promises its callers)."""
    secrets = [credentials.token] if credentials else []
    try:
        proc = hostgit.run_git(
            cwd,
            *args,
            config=_remote_config(url, credentials),
            any_owner=False,
            inherit=_INHERIT,
            timeout=FORGE_GIT_TIMEOUT_S,
        )
    except hostgit.GitTimeout as exc:
        raise ForgeUnavailable(f"git {what} timed out after {FORGE_GIT_TIMEOUT_S}s") from exc
    stdout = proc.stdout.decode(errors="replace")
    stderr = proc.stderr.decode(errors="replace")
    if proc.returncode != 0:
        # from None: the CalledProcess context would carry the environment's header.
        raise _classify(redact(f"{stderr}\n{stdout}", secrets), what) from None
    return stdout


def with_retries(
    action: Callable[[], None],
    *,
    cleanup: Callable[[], None] | None = None,
    attempts: int = _ATTEMPTS,
    base_delay: float = 0.5,
) -> None:
    """Retry ``action`` on ForgeUnavailable with exponential backoff and full jitter."""
    retry(
        action,
        retry_on=(ForgeUnavailable,),
        stop=stop_after_attempts(attempts),
        wait=wait_full_jitter(base_delay),
        before_retry=None if cleanup is None else lambda _exc: cleanup(),
    )


def clone(
    url: str, dest: Path, credentials: GitCredentials | None, *, branch: str | None = None
) -> None:
    """``git clone`` ``url`` into ``dest`` (which must not exist or be empty)."""
    check_remote_url(url)
    args = ["clone", "--quiet", "--no-recurse-submodules"]
    if branch is not None:
        args += ["--branch", validate_branch_name(branch)]
    args += ["--", url, str(dest)]

    def remove_partial() -> None:
        shutil.rmtree(dest, ignore_errors=True)

    with_retries(lambda: _run_clone(args, url, credentials), cleanup=remove_partial)


def _run_clone(args: list[str], url: str, credentials: GitCredentials | None) -> None:
    run_forge_git(args, url=url, credentials=credentials, what="clone")


def push(url: str, workdir: Path, branch: str, credentials: GitCredentials | None) -> None:
    """Push local ``branch`` to the same branch at ``url``; never forced.

    The URL is given explicitly rather than read from the checkout's remote,
    which untrusted code may have rewritten.
    """
    check_remote_url(url)
    validate_branch_name(branch)
    refspec = f"refs/heads/{branch}:refs/heads/{branch}"
    args = ["push", "--quiet", "--no-verify", "--porcelain", "--", url, refspec]
    with_retries(lambda: _run_push(args, url, workdir, credentials))


def _run_push(args: list[str], url: str, workdir: Path, credentials: GitCredentials | None) -> None:
    run_forge_git(args, url=url, credentials=credentials, cwd=workdir, what="push")
