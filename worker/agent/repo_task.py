"""What a repository contributes to its agent's episode: the ``.ribbit.yml`` overrides
of the deployment's agent limits, and the repository's own instructions (opt-in). Used
alike by the solve job and ``ribbit run``, so both give the model the same episode."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from worker.repo_config import RepoConfig
from worker.settings import AgentSettings


def agent_limits(base: AgentSettings, config: RepoConfig) -> AgentSettings:
    """Deployment defaults overridden by the repo's .ribbit.yml where it sets a value."""
    overrides = {k: v for k, v in config.agent.model_dump().items() if v is not None}
    # A repo may shorten the wall clock, never lengthen it: the job's time limit and the
    # broker's visibility timeout are derived from the deployment's budget.
    if "max_minutes" in overrides:
        overrides["max_minutes"] = min(overrides["max_minutes"], base.max_minutes)
    return base.model_copy(update=overrides)


def repo_instructions(config: RepoConfig, checkout: Path) -> str | None:
    """The repo's own instructions for the agent, only when it opted in: the
    ``prompt.instructions`` key, else a top-level AGENTS.md (never through a symlink)."""
    if not config.prompt.include_repo_context:
        return None
    if config.prompt.instructions:
        return config.prompt.instructions
    try:
        fd = os.open(checkout / "AGENTS.md", os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
            return None
        return fh.read(64 * 1024).decode(errors="replace")
