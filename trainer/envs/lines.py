"""Training data for one model line (bot/model_lines.py): only the outcomes and
environments of the line's repositories.

An environment knows its repository (``repo``) and its forge (``provenance.forge``): from
the outcome it was built from, or as the admin stated them (`ribbit envs build --forge
--name`, `envs import --forge`). Its line follows that repository, exactly as the
repository's outcomes and jobs do. One without a forge belongs to no line and trains
nothing: its origin is not known, so it could be any team's private code.
"""

from __future__ import annotations

from collections.abc import Iterable

from bot.forges.base import RepoRef, forge_name
from bot.model_lines import repo_line
from bot.settings import TrainingDataSettings
from bot.store.db import Database
from bot.store.tables import Outcome
from trainer.envs.schema import Environment
from trainer.store import TrainerStore


def line_repos(db: Database, cfg: TrainingDataSettings, line: str) -> list[RepoRef]:
    """The repositories with recorded outcomes whose data may train ``line``."""
    pairs = TrainerStore(db).outcome_repos()
    refs = [RepoRef(forge_name(forge), repo) for forge, repo in pairs]
    return [r for r in refs if repo_line(db, cfg, r) == line]


def line_outcomes(db: Database, cfg: TrainingDataSettings, line: str) -> list[Outcome]:
    """The recorded outcomes ``line`` may train on."""
    allowed = {(r.forge, r.full_name) for r in line_repos(db, cfg, line)}
    rows = TrainerStore(db).outcomes()
    return [o for o in rows if (o.forge, o.repo) in allowed]


def line_environments(
    db: Database, cfg: TrainingDataSettings, line: str, envs: Iterable[Environment]
) -> list[Environment]:
    """The environments among ``envs`` that ``line`` may train on."""
    lines: dict[tuple[str, str], str | None] = {}
    chosen: list[Environment] = []
    for env in envs:
        forge = env.provenance.forge
        if forge is None:
            continue
        key = (forge, env.repo)
        if key not in lines:
            lines[key] = repo_line(db, cfg, RepoRef(forge_name(forge), env.repo))
        if lines[key] == line:
            chosen.append(env)
    return chosen


def line_heldout(
    db: Database, cfg: TrainingDataSettings, line: str, envs: Iterable[Environment]
) -> list[Environment]:
    """The environments among ``envs`` that ``line`` is scored on: its own held-out ones,
    so one team's candidate is never scored (nor promoted) on another team's data."""
    return line_environments(db, cfg, line, [e for e in envs if e.split == "heldout"])
