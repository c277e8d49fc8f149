"""GitHub App authentication against the local forge: app key -> JWT -> installation
token (verified with the app's public key), cached per installation, refreshed near expiry."""

from __future__ import annotations

from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from bot.forges import make_forge
from bot.forges.base import ForgePermissionDenied, IssueRef
from bot.settings import Settings
from tests.fakes import commit_files, git
from tests.plugins.forge import ForgeWorld

pytestmark = pytest.mark.integration
APP_ID = 4242
INSTALLATION_ID = 77


def _key_pair(tmp_path: Path, name: str) -> tuple[Path, str]:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    path = tmp_path / f"{name}.pem"
    path.write_bytes(pem)
    public = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return path, public.decode()


def _app_settings(world: ForgeWorld, tmp_path: Path, key_file: Path) -> Settings:
    return Settings.model_validate(
        {
            "data_dir": tmp_path / "data",
            "github": {
                "api_url": world.forge.github_api_url,
                "app_id": APP_ID,
                "private_key_file": key_file,
                "write_interval_s": 0,
                "retry_backoff_s": 0.01,
            },
        }
    )


def test_forge_github_app_installation_token_works_for_api_and_git(
    forge_world: ForgeWorld, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    world = forge_world
    key_file, public_pem = _key_pair(tmp_path, "app")
    world.forge.register_app(APP_ID, public_pem)
    installation = world.forge.add_installation(INSTALLATION_ID, APP_ID, [world.github.full_name])
    issue = world.forge.create_issue("github", world.github.full_name, title="t", author="maya")
    settings = _app_settings(world, tmp_path, key_file)

    forge = make_forge(settings, "github", installation_id=INSTALLATION_ID)
    ref = IssueRef(world.github, issue.number)
    forge.get_issue(ref)
    forge.post_comment(ref, "hello from the app")
    forge.clone(world.github, tmp_path / "c")
    git(tmp_path / "c", "checkout", "-q", "-b", "ribbit/issue-1-app")
    commit_files(tmp_path / "c", {"a.txt": "a\n"}, "a")
    forge.push(world.github, tmp_path / "c", "ribbit/issue-1-app")
    # A second forge for the same installation (the next job) reuses the cached token.
    make_forge(settings, "github", installation_id=INSTALLATION_ID).get_issue(ref)

    assert forge.bot_login == "ribbit[bot]"
    assert [
        c.author for c in world.forge.comments("github", world.github.full_name, issue.number)
    ] == ["ribbit[bot]"]
    assert "ribbit/issue-1-app" in world.forge.branches("github", world.github.full_name)
    assert installation.tokens_minted == 1
    minted = [t for t in world.forge._installation_tokens]
    assert len(minted) == 1
    assert minted[0] not in caplog.text
    assert minted[0] not in (tmp_path / "c" / ".git" / "config").read_text()


def test_forge_github_app_token_is_refreshed_before_it_expires(
    forge_world: ForgeWorld, tmp_path: Path
) -> None:
    world = forge_world
    key_file, public_pem = _key_pair(tmp_path, "short")
    world.forge.register_app(APP_ID, public_pem)
    # Tokens that live less than PyGithub's 20 s refresh margin are renewed on every use.
    installation = world.forge.add_installation(
        INSTALLATION_ID + 1, APP_ID, [world.github.full_name], token_lifetime_s=5
    )
    forge = make_forge(
        _app_settings(world, tmp_path, key_file), "github", installation_id=INSTALLATION_ID + 1
    )

    forge.default_branch(world.github)
    forge.default_branch(world.github)

    assert installation.tokens_minted >= 2


def test_forge_github_app_with_the_wrong_key_is_refused(
    forge_world: ForgeWorld, tmp_path: Path
) -> None:
    world = forge_world
    _, public_pem = _key_pair(tmp_path, "registered")
    wrong_key, _ = _key_pair(tmp_path, "wrong")
    world.forge.register_app(APP_ID, public_pem)
    world.forge.add_installation(INSTALLATION_ID + 2, APP_ID, [world.github.full_name])
    forge = make_forge(
        _app_settings(world, tmp_path, wrong_key), "github", installation_id=INSTALLATION_ID + 2
    )

    with pytest.raises(ForgePermissionDenied, match="401"):
        forge.default_branch(world.github)
