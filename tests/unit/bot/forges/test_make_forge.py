from __future__ import annotations

from pathlib import Path

import pytest

from bot.forges import Forge, ForgeError, make_forge
from bot.forges.github import GitHubForge
from bot.forges.gitlab import GitLabForge
from bot.forges.markers import find_marked, with_marker
from bot.settings import Settings


def test_make_forge_without_credentials_says_what_to_set(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path)
    with pytest.raises(ForgeError, match="RIBBIT_GITHUB__TOKEN"):
        make_forge(settings, "github")
    with pytest.raises(ForgeError, match="RIBBIT_GITLAB__TOKEN"):
        make_forge(settings, "gitlab")


def test_make_forge_app_needs_an_installation_or_a_token(tmp_path: Path) -> None:
    key = tmp_path / "key.pem"
    key.write_text("not used")
    settings = Settings.model_validate(
        {"data_dir": tmp_path, "github": {"app_id": 1, "private_key_file": key}}
    )
    with pytest.raises(ForgeError, match="installation"):
        make_forge(settings, "github")
    missing = Settings.model_validate(
        {"data_dir": tmp_path, "github": {"app_id": 1, "private_key_file": tmp_path / "x.pem"}}
    )
    with pytest.raises(ForgeError, match="PRIVATE_KEY_FILE"):
        make_forge(missing, "github", installation_id=5)


def test_make_forge_builds_each_client(tmp_path: Path) -> None:
    settings = Settings.model_validate(
        {
            "data_dir": tmp_path,
            "github": {"token": "ghp_x" * 4, "bot_login": "bot"},
            "gitlab": {"token": "glpat-x" * 3, "url": "https://gitlab.example.com"},
        }
    )
    github = make_forge(settings, "github")
    gitlab = make_forge(settings, "gitlab")
    assert isinstance(github, GitHubForge) and github.bot_login == "bot"
    assert isinstance(gitlab, GitLabForge) and gitlab.bot_login == "ribbit-bot"
    assert github.name == "github" and gitlab.name == "gitlab"
    assert isinstance(github, Forge) and isinstance(gitlab, Forge)


def test_markers_find_only_their_own_comment() -> None:
    body = with_marker("hello", "0" * 32)
    assert find_marked([(1, "hello"), (2, body)], "0" * 32) == 2
    assert find_marked([(2, body)], "1" * 32) is None
