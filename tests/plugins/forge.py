"""Fixtures for the forge area: the local forge (tests/forge/) and Settings pointing at it.

``local_forge`` is one server for the whole session, reset before each test
(fast: no new process or port). ``forge_world`` seeds it with the cast most
tests need: the bot, a maintainer, an outsider, and one repository per forge.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from bot.forges.base import ForgeName, RepoRef
from bot.settings import GitHubSettings, GitLabSettings
from tests.forge.server import LocalForge
from tests.forge.state import User
from worker.settings import WorkerSettings

BOT_LOGIN = "ribbit-bot"
GITHUB_REPO = "acme/widgets"
GITLAB_REPO = "acme/tools/widgets"  # nested group: exercises %2F-encoded project ids
SEED_FILES = {
    "README.md": "# widgets\n",
    "widgets/__init__.py": "def add(a, b):\n    return a - b\n",
    ".ribbit.yml": "test: python -m pytest -q\nlabels: [bot]\nreviewers: [maya]\n",
}


@dataclass(frozen=True)
class ForgeWorld:
    forge: LocalForge
    bot: User
    maintainer: User
    outsider: User
    github: RepoRef
    gitlab: RepoRef

    def repo(self, kind: ForgeName) -> RepoRef:
        return self.github if kind == "github" else self.gitlab


@pytest.fixture(scope="session")
def local_forge_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalForge]:
    forge = LocalForge(tmp_path_factory.mktemp("local-forge"))
    try:
        yield forge
    finally:
        forge.close()


@pytest.fixture
def local_forge(local_forge_server: LocalForge) -> LocalForge:
    """The session's local forge, emptied for this test."""
    local_forge_server.reset()
    return local_forge_server


@pytest.fixture
def forge_world(local_forge: LocalForge) -> ForgeWorld:
    forge = local_forge
    bot = forge.add_user(BOT_LOGIN)
    maintainer = forge.add_user("maya")
    outsider = forge.add_user("otto")
    pairs: tuple[tuple[ForgeName, str], ...] = (("github", GITHUB_REPO), ("gitlab", GITLAB_REPO))
    for kind, full_name in pairs:
        forge.create_repo(kind, full_name, files=SEED_FILES)
        forge.add_collaborator(kind, full_name, BOT_LOGIN, "write")
        forge.add_collaborator(kind, full_name, "maya", "maintain")
    return ForgeWorld(
        forge,
        bot,
        maintainer,
        outsider,
        RepoRef("github", GITHUB_REPO),
        RepoRef("gitlab", GITLAB_REPO),
    )


def settings_for(
    forge: LocalForge,
    data_dir: Path,
    *,
    github_token: str | None,
    gitlab_token: str | None,
    http_timeout_s: int = 30,
    **github: object,
) -> WorkerSettings:
    """Settings (the worker's) aimed at the local forge, with retries fast enough for tests."""
    github_section: dict[str, Any] = {
        "api_url": forge.github_api_url,
        "token": github_token,
        "bot_login": BOT_LOGIN,
        "write_interval_s": 0,
        "retry_backoff_s": 0.01,
        "http_timeout_s": http_timeout_s,
        **github,
    }
    return WorkerSettings(
        data_dir=data_dir,
        github=GitHubSettings(**github_section),
        gitlab=GitLabSettings(
            url=forge.gitlab_url,
            token=gitlab_token,  # type: ignore[arg-type]
            bot_username=BOT_LOGIN,
            retry_backoff_s=0.01,
            http_timeout_s=http_timeout_s,
        ),
    )


@pytest.fixture
def forge_settings(forge_world: ForgeWorld, tmp_path: Path) -> WorkerSettings:
    """Settings whose GitHub and GitLab sections point at the seeded local forge as the bot."""
    return settings_for(
        forge_world.forge,
        tmp_path / "data",
        github_token=forge_world.bot.token,
        gitlab_token=forge_world.bot.token,
    )
