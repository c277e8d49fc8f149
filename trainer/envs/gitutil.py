"""The few git operations the trainer runs on the host (never inside a checkout's hooks)."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

_SHA = re.compile(r"^[0-9a-fA-F]{7,40}$")
# No user or system config, no hooks, no prompts: a repo under test cannot run code here.
_ENV = {
    "GIT_CONFIG_GLOBAL": "/dev/null",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_TERMINAL_PROMPT": "0",
    "GIT_AUTHOR_NAME": "ribbit-trainer",
    "GIT_AUTHOR_EMAIL": "trainer@ribbit.invalid",
    "GIT_COMMITTER_NAME": "ribbit-trainer",
    "GIT_COMMITTER_EMAIL": "trainer@ribbit.invalid",
}


class GitError(RuntimeError):
    pass


def run_git(cwd: Path, *args: str, input_text: str | None = None) -> str:
    proc = subprocess.run(
        ["git", "-c", "core.hooksPath=/dev/null", *args],
        cwd=cwd,
        env={**os.environ, **_ENV},
        capture_output=True,
        text=True,
        input=input_text,
        check=False,
    )
    if proc.returncode != 0:
        raise GitError(f"git {' '.join(args[:2])} failed: {proc.stderr.strip()[:500]}")
    return proc.stdout


def resolve_commit(repo: Path, rev: str) -> str:
    """The full sha of ``rev``, which must look like a sha (never an option or a path)."""
    if not _SHA.match(rev):
        raise GitError(f"{rev!r} is not a commit sha")
    return run_git(repo, "rev-parse", "--verify", "--end-of-options", f"{rev}^{{commit}}").strip()


def clone_at(source: Path | str, dest: Path, commit: str) -> Path:
    """A private clone of ``source`` (a repo or a bundle) checked out at ``commit``."""
    run_git(Path.cwd(), "clone", "-q", "--no-hardlinks", "--end-of-options", str(source), str(dest))
    run_git(dest, "checkout", "-q", "--detach", commit)
    return dest
