"""Branch names the bot creates, and the check every ref from outside must pass.

Issue titles are untrusted text; they end up in a git ref, so the slug keeps
only ``[a-z0-9-]`` and the full name is validated again before git sees it.
"""

from __future__ import annotations

import re
import unicodedata

BRANCH_PREFIX = "ribbit/"
_SLUG_MAX = 40
# A conservative subset of git-check-ref-format: no "..", "@{", control chars,
# spaces, "~^:?*[\\", no leading "-" or "/", no trailing "/", "." or ".lock".
_SAFE_REF = re.compile(r"^(?!-)(?!/)[A-Za-z0-9._/-]{1,200}$")


class UnsafeRefError(ValueError):
    """A branch or ref name that is not safe to hand to git."""


def slugify(title: str, max_len: int = _SLUG_MAX) -> str:
    """Lowercase ascii words joined by ``-``; empty titles give ``issue``."""
    ascii_title = unicodedata.normalize("NFKD", title).encode("ascii", "ignore").decode("ascii")
    words = re.findall(r"[a-z0-9]+", ascii_title.lower())
    slug = ""
    for word in words:
        candidate = f"{slug}-{word}" if slug else word
        if len(candidate) > max_len:
            if not slug:
                slug = word[:max_len]
            break
        slug = candidate
    return slug or "issue"


def branch_name_for_issue(number: int, title: str) -> str:
    """``ribbit/issue-<n>-<slug>``: the branch the bot pushes its fix for issue ``n`` to."""
    if number < 1:
        raise ValueError(f"issue number must be positive, got {number}")
    name = f"{BRANCH_PREFIX}issue-{number}-{slugify(title)}"
    return validate_branch_name(name)


def validate_branch_name(name: str) -> str:
    """Return ``name`` if git would accept it as a branch and it cannot be read as an option."""
    if (
        not _SAFE_REF.fullmatch(name)  # match's $ also matches before a final newline
        or ".." in name
        or "//" in name
        or "@{" in name
        or name.endswith(("/", ".", ".lock"))
        or any(part.startswith(".") or part.endswith(".lock") for part in name.split("/"))
        or name == "HEAD"
    ):
        raise UnsafeRefError(f"not a safe branch name: {name!r}")
    return name


_SHA = re.compile(r"^[0-9a-f]{40}([0-9a-f]{24})?$")


def validate_sha(sha: str) -> str:
    """A full hex commit id (SHA-1 or SHA-256), nothing else."""
    if not _SHA.fullmatch(sha):
        raise UnsafeRefError(f"not a full commit sha: {sha!r}")
    return sha


def validate_repo_path(path: str) -> str:
    """A relative file path inside a repository: no absolute paths, no ``..``, no NUL."""
    parts = path.split("/")
    if (
        not path
        or path.startswith("/")
        or "\0" in path
        or "\\" in path
        or any(part in ("", ".", "..") for part in parts)
    ):
        raise UnsafeRefError(f"not a safe repository path: {path!r}")
    return path
