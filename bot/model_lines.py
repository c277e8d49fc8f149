"""Model lines: which repositories' outcomes may train which model, and which model a
repository's jobs are served by.

A line is named in settings (``training.lines``) with the repositories that belong to it,
``forge:owner/name``. The rules, safest first:

- A private repository belongs to a line only where it is named exactly; a glob never
  pulls one in, and a repository whose visibility Ribbit has not recorded counts as private.
- A public repository belongs to the first line that names it exactly, else to the first
  whose glob matches it, else (``public_repos = "default_line"``) to the ``default`` line.
- A repository in no line trains nothing and is served the base model.

Training for a line uses only the outcomes and environments of its repositories, and a
job asks for the promoted version of its repository's line, so repo A's patches never
come from a model trained on repo B unless an admin put both in one line.
"""

from __future__ import annotations

from fnmatch import fnmatchcase

from bot.forges.base import RepoRef
from bot.settings import TrainingDataSettings
from bot.store.db import Database
from bot.store.jobs import JobStore

DEFAULT_LINE = "default"


def line_for(cfg: TrainingDataSettings, key: RepoRef, *, private: bool | None) -> str | None:
    """The line ``key`` belongs to, or None. ``private`` None means not known: private."""
    # Both forges resolve owner and repository names case-insensitively.
    name = str(key).casefold()
    for line, entries in cfg.lines.items():
        # A glob entry is never an exact listing, even for a repository named like it.
        if any(e.casefold() == name and not _is_glob(e) for e in entries):
            return line
    if private is not False:
        return None
    for line, entries in cfg.lines.items():
        if any(_is_glob(e) and fnmatchcase(name, e.casefold()) for e in entries):
            return line
    return DEFAULT_LINE if cfg.public_repos == "default_line" else None


def _is_glob(entry: str) -> bool:
    return any(c in entry for c in "*?[")


def known_lines(cfg: TrainingDataSettings) -> list[str]:
    return [DEFAULT_LINE, *[n for n in cfg.lines if n != DEFAULT_LINE]]


def visibility(db: Database, key: RepoRef) -> bool | None:
    """Whether ``key`` is private, as recorded; None where never recorded."""
    return JobStore(db).visibility(key.forge, key.full_name)


def repo_line(db: Database, cfg: TrainingDataSettings, key: RepoRef) -> str | None:
    return line_for(cfg, key, private=visibility(db, key))


def set_visibility(db: Database, key: RepoRef, *, private: bool) -> None:
    JobStore(db).set_visibility(key.forge, key.full_name, private=private)
