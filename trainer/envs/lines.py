"""Training data for one model line (bot/model_lines.py): only the outcomes and
environments of the line's repositories.

An environment knows its repository (``repo``) and, when built from an outcome, its forge
(``provenance.forge``). One without a forge was built or imported by an admin by hand
(`ribbit envs build`, `envs import`); it counts for the ``default`` line only, so a named
line never trains on data whose origin is not recorded.
"""

from __future__ import annotations

from collections.abc import Iterable

from bot.forges.base import RepoRef, forge_name
from bot.model_lines import DEFAULT_LINE, repo_line
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
            if line == DEFAULT_LINE:
                chosen.append(env)
            continue
        key = (forge, env.repo)
        if key not in lines:
            lines[key] = repo_line(db, cfg, RepoRef(forge_name(forge), env.repo))
        if lines[key] == line:
            chosen.append(env)
    return chosen
