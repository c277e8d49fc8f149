"""What a revision names in a host checkout: its HEAD, a sha, a person's revision, the
nearest tag. Each answer comes from the hardened core (core.py)."""

from __future__ import annotations

import re
from pathlib import Path

from bot.hostgit.core import GitError, git_ok, run_git

_SHA = re.compile(r"^[0-9a-fA-F]{7,40}$")
# What rev-parse prints for a commit: a full SHA-1 or SHA-256 object name.
_FULL_SHA = re.compile(r"[0-9a-f]{40,64}")


def head_commit(repo: Path) -> str | None:
    """The commit checkout ``repo`` is at (None when it is not a git checkout)."""
    try:
        proc = run_git(repo, "rev-parse", "--verify", "-q", "HEAD^{commit}", timeout=30)
    except (OSError, GitError):
        return None
    sha = proc.stdout.decode(errors="replace").strip()
    return sha if proc.returncode == 0 and _FULL_SHA.fullmatch(sha) else None


def resolve_commit(repo: Path, rev: str, *, any_owner: bool = True) -> str:
    """The full sha of ``rev``, which must look like a sha (never an option or a path)."""
    if not _SHA.fullmatch(rev):
        raise GitError(f"{rev!r} is not a commit sha")
    out = git_ok(
        repo, "rev-parse", "--verify", "--end-of-options", f"{rev}^{{commit}}", any_owner=any_owner
    )
    return out.decode().strip()


def revision_commit(repo: Path, rev: str) -> str:
    """The full sha of the commit a person's revision names (``f51a53b``, ``main~2``,
    ``v1.2^``) in their own repository; never read as an option (``--end-of-options``).
    For revisions typed at the command line, not ones from a forge or a patch."""
    proc = run_git(
        repo, "rev-parse", "--verify", "--quiet", "--end-of-options", f"{rev}^{{commit}}"
    )
    sha = proc.stdout.decode(errors="replace").strip()
    if proc.returncode != 0 or not _FULL_SHA.fullmatch(sha):
        raise GitError(f"{rev!r} names no commit in {repo}")
    return sha


def latest_tag(repo: Path, commit: str = "HEAD", *, any_owner: bool = True) -> str | None:
    """The nearest tag at ``commit``: the version the task text's footer shows, as
    SWE-bench's ``version`` (None without one). One home for the solve job, ``ribbit
    run`` and the environment builder, so all three show the model the same footer."""
    try:
        tag = git_ok(repo, "describe", "--tags", "--abbrev=0", commit, any_owner=any_owner)
    except GitError:
        return None
    return tag.decode(errors="replace").strip() or None
