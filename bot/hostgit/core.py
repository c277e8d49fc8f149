"""The hardened core of host git: every ``git`` Ribbit runs on the host runs here.

Every checkout the bot, the worker or the trainer touches may hold untrusted content
(an issue's repository, a model's patch, a sandbox's export), so every host git runs:

- with no hooks and no fsmonitor (both run programs named by the checkout);
- with no system or user config (filter drivers, pagers, helpers live there) and
  ``HOME`` pointing nowhere;
- with an environment built from an allow-list, so no secret of the process leaks
  into git or the programs it starts;
- with no prompt (a prompt would hang a worker) and a bounded time.

Config is passed through ``GIT_CONFIG_COUNT``/``GIT_CONFIG_KEY_n``/``GIT_CONFIG_VALUE_n``
rather than ``-c``: a value (the forge's auth header) never shows in argv, where ``ps``
and git's own error messages would show it.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TypedDict, Unpack

GIT_TIMEOUT_S = 300

# Command-level config overrides the checkout's own .git/config.
_HARDENING: tuple[tuple[str, str], ...] = (
    ("core.hooksPath", os.devnull),
    ("core.fsmonitor", "false"),
)
# Some checkouts are owned by another uid than the process (a sandbox's, a clone made
# as root); git refuses them unless told. Only callers that need it ask for it.
_ANY_OWNER = ("safe.directory", "*")
_DEFAULT_PATH = "/usr/bin:/bin"


class GitError(RuntimeError):
    """A host git command failed or ran out of time; the message says which and why.
    The one error of the host-git family: every caller catches this."""


class GitTimeout(GitError):
    """A host git command ran past its time limit (and was killed)."""


def identity(name: str, email: str) -> dict[str, str]:
    """The author and committer variables for commits made as ``name``."""
    return {
        "GIT_AUTHOR_NAME": name,
        "GIT_AUTHOR_EMAIL": email,
        "GIT_COMMITTER_NAME": name,
        "GIT_COMMITTER_EMAIL": email,
    }


def git_env(
    *,
    config: Iterable[tuple[str, str]] = (),
    any_owner: bool = True,
    inherit: Iterable[str] = (),
    extra: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The whole environment of one host git: the allow-list, the hardening config plus
    ``config``, the variables named in ``inherit`` copied from this process (e.g. TLS
    settings for a clone over HTTPS) and ``extra`` (identity, dates)."""
    env = {key: os.environ[key] for key in inherit if key in os.environ}
    env.update(
        {
            "PATH": os.environ.get("PATH", _DEFAULT_PATH),
            "HOME": os.devnull,
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_CONFIG_GLOBAL": os.devnull,
            "GIT_TERMINAL_PROMPT": "0",
            "GIT_ASKPASS": "/bin/false",
            "SSH_ASKPASS": "/bin/false",
        }
    )
    # A fixed identity, so nothing falls back to the host's user and hostname (reflogs,
    # the odd commit); callers that commit as someone pass ``extra``.
    env.update(identity("ribbit", "ribbit@localhost"))
    pairs = [*_HARDENING, *([_ANY_OWNER] if any_owner else []), *config]
    env["GIT_CONFIG_COUNT"] = str(len(pairs))
    for index, (key, value) in enumerate(pairs):
        env[f"GIT_CONFIG_KEY_{index}"] = key
        env[f"GIT_CONFIG_VALUE_{index}"] = value
    # Identity and dates only: they cannot turn the hardening off.
    for key, value in (extra or {}).items():
        if not key.startswith(("GIT_AUTHOR_", "GIT_COMMITTER_")):
            raise ValueError(f"not an identity variable: {key}")
        env[key] = value
    return env


def run_git(
    cwd: Path | None,
    *args: str,
    stdin: bytes | None = None,
    identity: Mapping[str, str] | None = None,
    config: Iterable[tuple[str, str]] = (),
    any_owner: bool = True,
    inherit: Iterable[str] = (),
    timeout: float = GIT_TIMEOUT_S,
) -> subprocess.CompletedProcess[bytes]:
    """Run host git once and return what it did, whatever its exit status (for callers
    that read a failure as an answer); raises :class:`GitTimeout` past ``timeout``.
    ``identity`` sets the author/committer (see :func:`identity`)."""
    env = git_env(config=config, any_owner=any_owner, inherit=inherit, extra=identity)
    try:
        return subprocess.run(
            ["git", *args],
            cwd=cwd,
            env=env,
            input=stdin,
            capture_output=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired:
        # from None: the expired command's context adds nothing the message lacks.
        raise GitTimeout(f"git {args[0]} timed out after {timeout:g}s") from None


class GitOptions(TypedDict, total=False):
    """:func:`run_git`'s keyword arguments as a TypedDict: what :func:`git_ok` takes as
    ``**options`` and passes on, so mypy checks each against run_git's own parameters
    (where the defaults live)."""

    stdin: bytes | None
    identity: Mapping[str, str] | None
    config: Iterable[tuple[str, str]]
    any_owner: bool
    inherit: Iterable[str]
    timeout: float


def git_ok(cwd: Path | None, *args: str, **options: Unpack[GitOptions]) -> bytes:
    """Host git's stdout; :class:`GitError` when it fails or runs out of time. Takes what
    :func:`run_git` takes."""
    proc = run_git(cwd, *args, **options)
    if proc.returncode != 0:
        reason = proc.stderr.decode(errors="replace").strip()
        raise GitError(f"git {args[0]} failed: {reason}")
    return proc.stdout
