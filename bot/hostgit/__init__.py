"""Host git: the one way Ribbit runs ``git`` on the host, and its one error type.

Every checkout the bot, the worker or the trainer touches may hold untrusted content, so
every host git goes through the hardened core; nothing else in Ribbit starts ``git`` on
the host. Every failure of the family is a :class:`GitError` (a timeout is its subclass
:class:`GitTimeout`); callers catch that, and translate it where their own layer has a
word for it (a forge error, a gate's failed tree, a sandbox error).

- core.py: the hardened core: the environment (allow-list, no hooks, no user or system
  config, ``safe.directory`` only on request), :func:`run_git` (what git did, whatever
  its exit status) and :func:`git_ok` (its stdout, or GitError), the error types.
- revisions.py: what a revision names (HEAD, a sha, a person's revision, the nearest tag).
- checkouts.py: private clones at a commit and the host diff of a sandbox's exported tree.

The forges' clone and push with credentials (bot/forges/git.py) run through the core too.
"""

from __future__ import annotations

from bot.hostgit.checkouts import clone_at, detached_clone, host_diff
from bot.hostgit.core import (
    GIT_TIMEOUT_S,
    GitError,
    GitTimeout,
    git_env,
    git_ok,
    identity,
    run_git,
)
from bot.hostgit.revisions import head_commit, latest_tag, resolve_commit, revision_commit

__all__ = [
    "GIT_TIMEOUT_S",
    "GitError",
    "GitTimeout",
    "clone_at",
    "detached_clone",
    "git_env",
    "git_ok",
    "head_commit",
    "host_diff",
    "identity",
    "latest_tag",
    "resolve_commit",
    "revision_commit",
    "run_git",
]
