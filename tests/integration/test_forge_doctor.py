"""`ribbit doctor`'s forge checks against the local forge: the credentials' identity and
their permission on a named repository, on GitHub (token and App) and GitLab."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from bot.cli import main
from bot.doctor_check import Check
from bot.forge_doctor import forge_checks
from bot.forges.base import FORGE_NAMES, ForgeName, RepoRef
from bot.settings import Settings
from tests.integration.test_forge_app_auth import _app_settings, _key_pair
from tests.plugins.forge import ForgeWorld, settings_for

pytestmark = pytest.mark.integration


def _by_name(checks: list[Check]) -> dict[str, Check]:
    return {c.name: c for c in checks}


def _only(settings: Settings, kind: ForgeName) -> Settings:
    """``settings`` with the other forge's token taken away, so only ``kind`` is checked."""
    other = "gitlab" if kind == "github" else "github"
    section = getattr(settings, other).model_copy(update={"token": None})
    return settings.model_copy(update={other: section})


@pytest.mark.parametrize("kind", FORGE_NAMES)
def test_forge_doctor_reports_identity_and_write_access(
    forge_world: ForgeWorld, tmp_path: Path, kind: ForgeName
) -> None:
    world = forge_world
    settings = settings_for(
        world.forge, tmp_path, github_token=world.bot.token, gitlab_token=world.bot.token
    )

    checks = _by_name(forge_checks(_only(settings, kind), [world.repo(kind)]))

    assert checks[f"{kind} credentials"] == Check(
        f"{kind} credentials", "ok", "authenticated as ribbit-bot"
    )
    access = checks[f"{kind} access to {world.repo(kind).full_name}"]
    assert access.status == "ok"
    assert access.detail == ("write" if kind == "github" else "Developer (30)")
    label = checks[f"{kind} label on {world.repo(kind).full_name}"]
    assert (label.status, label.detail.split(":")[0]) == ("warn", "'ribbit' is missing")
    assert "/ribbit help" in label.detail
    assert set(checks) == {f"{kind} credentials", access.name, label.name}

    world.forge.repo(kind, world.repo(kind).full_name).labels["ribbit"] = "0e8a16"
    again = _by_name(forge_checks(_only(settings, kind), [world.repo(kind)]))
    assert again[label.name] == Check(label.name, "ok", "'ribbit' exists")


@pytest.mark.parametrize("kind", FORGE_NAMES)
def test_forge_doctor_bad_token_is_one_line_with_the_remedy(
    forge_world: ForgeWorld, tmp_path: Path, kind: ForgeName
) -> None:
    world = forge_world
    settings = settings_for(
        world.forge, tmp_path, github_token="ghp_revoked0000", gitlab_token="glpat-revoked000"
    )

    checks = forge_checks(_only(settings, kind), [world.repo(kind)])

    assert [c.status for c in checks] == ["fail"]
    assert "answered 401" in checks[0].detail
    token_var = f"RIBBIT_{kind.upper()}__TOKEN"
    assert f"set a new one in {token_var}" in checks[0].detail
    assert "\n" not in checks[0].detail and "revoked0" not in checks[0].detail


@pytest.mark.parametrize("kind", FORGE_NAMES)
def test_forge_doctor_webhook_secret_without_token_fails(
    forge_world: ForgeWorld, tmp_path: Path, kind: ForgeName
) -> None:
    settings = settings_for(forge_world.forge, tmp_path, github_token=None, gitlab_token=None)
    secret = {"webhook_secret" if kind == "github" else "webhook_token": "s" * 40}
    section = getattr(settings, kind).model_copy(update=secret)
    settings = settings.model_copy(update={kind: section})

    checks = forge_checks(settings)

    [check] = checks  # the other forge has neither secret nor token: not configured
    assert check.name == f"{kind} credentials" and check.status == "fail"
    assert check.detail.startswith("webhooks are accepted but every job will fail: set ")
    assert f"RIBBIT_{kind.upper()}__TOKEN" in check.detail


@pytest.mark.parametrize("kind", FORGE_NAMES)
def test_forge_doctor_no_write_permission_on_the_named_repo(
    forge_world: ForgeWorld, tmp_path: Path, kind: ForgeName
) -> None:
    world = forge_world
    world.forge.add_collaborator(kind, world.repo(kind).full_name, "otto", "read")
    settings = settings_for(
        world.forge, tmp_path, github_token=world.outsider.token, gitlab_token=world.outsider.token
    )

    checks = _by_name(forge_checks(_only(settings, kind), [world.repo(kind)]))

    access = checks[f"{kind} access to {world.repo(kind).full_name}"]
    assert access.status == "fail"
    if kind == "github":
        assert access.detail == "read: give the account the write role"
    else:
        assert access.detail == "Reporter (20): make the user a Developer or above"
    # The token is otto's, not the bot's: said, with the setting to change.
    assert checks[f"{kind} bot login"].status == "warn"


@pytest.mark.parametrize("kind", FORGE_NAMES)
def test_forge_doctor_repository_the_account_cannot_see(
    forge_world: ForgeWorld, tmp_path: Path, kind: ForgeName
) -> None:
    world = forge_world
    settings = settings_for(
        world.forge, tmp_path, github_token=world.outsider.token, gitlab_token=world.outsider.token
    )

    checks = _by_name(forge_checks(_only(settings, kind), [world.repo(kind)]))

    access = checks[f"{kind} access to {world.repo(kind).full_name}"]
    assert access.status == "fail" and access.detail.startswith("none: ")


def test_forge_doctor_unreachable_forge_is_one_line(tmp_path: Path) -> None:
    settings = Settings.model_validate(
        {
            "data_dir": tmp_path,
            # Port 9 on loopback: nothing listens, the connection is refused at once.
            "github": {"api_url": "http://127.0.0.1:9/api/v3", "token": "ghp_x"},
            "gitlab": {"url": "http://127.0.0.1:9", "token": "glpat-x"},
        }
    )

    checks = forge_checks(settings)

    assert [(c.name, c.status) for c in checks] == [
        ("github credentials", "fail"),
        ("gitlab credentials", "fail"),
    ]
    assert "GitHub unreachable" in checks[0].detail
    assert "check RIBBIT_GITHUB__API_URL" in checks[0].detail
    assert "check RIBBIT_GITLAB__URL" in checks[1].detail


def test_forge_doctor_github_app_installation_permissions(
    forge_world: ForgeWorld, tmp_path: Path
) -> None:
    world = forge_world
    key_file, public_pem = _key_pair(tmp_path, "app")
    world.forge.register_app(4242, public_pem)
    installation = world.forge.add_installation(77, 4242, [world.github.full_name])
    settings = _app_settings(world, tmp_path, key_file)
    elsewhere = RepoRef("github", "acme/other")
    world.forge.create_repo("github", elsewhere.full_name, files={"a": "b"})

    checks = _by_name(forge_checks(settings, [world.github, elsewhere]))

    assert (
        checks["github credentials"].detail
        == "authenticated as GitHub App ribbit-app-4242 (id 4242)"
    )
    granted = checks[f"github access to {world.github.full_name}"]
    assert granted.status == "ok"
    assert "contents: write" in granted.detail
    assert checks["github access to acme/other"].detail == (
        "not installed: install the App on the repository"
    )
    # The label is read as the installation: one more token minted, no error.
    assert checks[f"github label on {world.github.full_name}"].status == "warn"
    assert installation.tokens_minted == 1

    installation.permissions["pull_requests"] = "read"
    again = _by_name(forge_checks(settings, [world.github]))
    assert again[f"github access to {world.github.full_name}"].detail.endswith(
        "grant the App write on pull_requests"
    )


def test_doctor_cli_names_repositories_and_prints_the_checks_as_json(
    forge_world: ForgeWorld, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    world = forge_world
    for name, value in {
        "RIBBIT_DATA_DIR": str(tmp_path / "data"),
        "RIBBIT_GITHUB__API_URL": world.forge.github_api_url,
        "RIBBIT_GITHUB__TOKEN": world.bot.token,
        "RIBBIT_GITHUB__BOT_LOGIN": "ribbit-bot",
        "RIBBIT_GITLAB__URL": world.forge.gitlab_url,
        "RIBBIT_GITLAB__TOKEN": world.outsider.token,
        "RIBBIT_GITLAB__BOT_USERNAME": "otto",
    }.items():
        monkeypatch.setenv(name, value)

    result = CliRunner().invoke(
        main, ["doctor", "--json", "--repo", world.github.full_name, "--repo", str(world.gitlab)]
    )

    checks: dict[str, Any] = {c["name"]: c for c in json.loads(result.output)}
    assert checks["github access to acme/widgets"]["status"] == "ok"
    assert checks["gitlab access to acme/tools/widgets"]["status"] == "fail"
    assert result.exit_code == 1


def test_doctor_cli_refuses_a_malformed_repository() -> None:
    result = CliRunner().invoke(main, ["doctor", "--repo", "not a repo"])
    assert result.exit_code == 2 and "'--repo'" in result.output
