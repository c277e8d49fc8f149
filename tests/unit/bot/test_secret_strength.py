"""Weak shared secrets are refused when settings are built, which every `ribbit` process
does first (issue #32, item 6): placeholders, short values and patterns, for every
secret the operator picks, with the variable named and a way to generate one."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from bot.secret_strength import HOW_TO_GENERATE, MIN_SECRET_CHARS, secret_weakness
from bot.settings import SettingsError, load_settings
from tests.support import GITHUB_SECRET, GITLAB_TOKEN, LINK_SECRET, OTHER_SECRET

ROOT = Path(__file__).resolve().parents[3]

# Each shared secret: (the variable an operator sets, the overrides that set it).
SECRETS: dict[str, Any] = {
    "RIBBIT_ADMIN_TOKEN": lambda v: {"admin_token": v},
    "RIBBIT_ADMIN_TOKENS__ALICE": lambda v: {"admin_tokens": {"alice": v}},
    "RIBBIT_GITHUB__WEBHOOK_SECRET": lambda v: {"github": {"webhook_secret": v}},
    "RIBBIT_GITLAB__WEBHOOK_TOKEN": lambda v: {"gitlab": {"webhook_token": v}},
    "RIBBIT_REVIEWER__LINK_SECRET": lambda v: {"reviewer": {"link_secret": v}},
}

PLACEHOLDERS = [
    "CHANGE-ME",
    "changeme",
    "change_me",
    "secret",
    "password",
    "example",
    "It's a Secret to Everybody",  # GitHub's documentation's example
    # Long enough, but a placeholder all the same (as an operator might pad one).
    "CHANGE-ME-" + GITHUB_SECRET,
    GITHUB_SECRET + "-changeme",
    "our-ribbit-webhook-secret-for-production-2026",
    "Password!Password!Password!Password!",
    "https://ribbit.example.com/admin/token/0001",
    # Letters that look like the plain ones (fullwidth, mathematical bold).
    "\uff23\uff28\uff21\uff2e\uff27\uff25-\uff2d\uff25-" + GITHUB_SECRET,
    "\U0001d42c\U0001d41e\U0001d41c\U0001d42b\U0001d41e\U0001d42d-" + GITHUB_SECRET,
]
PATTERNS = [
    "x" * 40,
    "ab" * 20,
    "abc" * 11,
    "0123456789abcdefghijklmnopqrstuvwxyz",
    "aabbccddeeffgghhiijjkkllmmnnooppqq",
    "ZYXWVUTSRQPONMLKJIHGFEDCBAzyxwvutsrq",
]
# As the generators an operator is told of make them (fixed here: a test never draws).
GENERATED = [
    GITHUB_SECRET,  # secrets.token_urlsafe(32)
    "fed4583558bc444b70cddd5678f217b9",  # secrets.token_hex(16): the least a generator gives
    "532ff09b84a7665d60b31d5477acabdd0f3a33c691cb7dd17412d0f9e80058d9",  # openssl rand -hex 32
    "YcAlfH4iVfZnYyh9igHHOZrq8gbHrEs4",  # randAlphaNum 32 (the Helm chart)
]


def build(overrides: dict[str, Any], tmp_path: Path) -> Any:
    return load_settings(data_dir=tmp_path, **overrides)


@pytest.mark.parametrize("variable", sorted(SECRETS))
@pytest.mark.parametrize("value", PLACEHOLDERS)
def test_a_placeholder_is_refused_naming_the_variable_and_how_to_generate(
    variable: str, value: str, tmp_path: Path
) -> None:
    with pytest.raises(SettingsError) as caught:
        build(SECRETS[variable](value), tmp_path)
    message = str(caught.value)
    assert f"{variable} looks like a placeholder" in message
    assert HOW_TO_GENERATE in message
    assert "Value error" not in message and message.count(f"{variable} ") == 1
    if len(value) > len("placeholder"):  # it names the word it found, never the value
        assert value not in message


@pytest.mark.parametrize("variable", sorted(SECRETS))
@pytest.mark.parametrize("value", ["xxx", "x" * 31, "s3cret", "hunter2"])
def test_a_short_value_is_refused(variable: str, value: str, tmp_path: Path) -> None:
    with pytest.raises(SettingsError, match=rf"{variable} is {len(value)} characters long"):
        build(SECRETS[variable](value), tmp_path)


@pytest.mark.parametrize("variable", sorted(SECRETS))
def test_a_secret_one_character_too_short_is_refused(variable: str, tmp_path: Path) -> None:
    short = GITHUB_SECRET[: MIN_SECRET_CHARS - 1]
    with pytest.raises(SettingsError, match=rf"{variable} is 31 characters long; it needs"):
        build(SECRETS[variable](short), tmp_path)
    assert build(SECRETS[variable](GITHUB_SECRET[:MIN_SECRET_CHARS]), tmp_path) is not None


@pytest.mark.parametrize("variable", sorted(SECRETS))
@pytest.mark.parametrize("value", PATTERNS)
def test_a_pattern_is_refused(variable: str, value: str, tmp_path: Path) -> None:
    with pytest.raises(SettingsError, match=rf"{variable} is a pattern"):
        build(SECRETS[variable](value), tmp_path)


@pytest.mark.parametrize("value", GENERATED)
def test_generated_secrets_are_accepted(value: str, tmp_path: Path) -> None:
    assert secret_weakness(value) is None
    for variable in SECRETS:
        build(SECRETS[variable](value), tmp_path)


def test_the_tests_own_secrets_are_strong() -> None:
    for value in (GITHUB_SECRET, GITLAB_TOKEN, LINK_SECRET, OTHER_SECRET):
        assert secret_weakness(value) is None


def _chart_secret_values() -> list[tuple[str, str]]:
    found = []
    for values_file in sorted((ROOT / "deploy" / "helm" / "ribbit").glob("values*.yaml")):
        data = yaml.safe_load(values_file.read_text()) or {}
        string_data = (data.get("secrets") or {}).get("stringData") or {}
        found += [(f"{values_file.name}:{key}", str(v)) for key, v in string_data.items()]
    return found


def test_no_secret_the_repository_documents_would_start() -> None:
    """Whatever value the chart, the compose file or the READMEs show for a shared secret
    is refused (an operator who copies one gets an error, not a guessable dashboard)."""
    shown = _chart_secret_values()
    assignment = re.compile(
        r"(RIBBIT_(?:ADMIN_TOKENS?\w*|\w*WEBHOOK_(?:SECRET|TOKEN)|REVIEWER__LINK_SECRET))"
        r"\s*[=:]\s*['\"]?([^\s'\"`]+)"
    )
    for doc in ("README.md", "deploy/README.md", "deploy/compose.yaml"):
        for name, value in assignment.findall((ROOT / doc).read_text()):
            if value not in {"...", "$"} and not value.startswith(("$", "<", "/")):
                shown.append((f"{doc}:{name}", value))
    for where, value in shown:
        if "ribbit_database_url" in where:
            continue
        assert secret_weakness(value) is not None, f"{where} shows a usable secret"


def test_the_chart_ships_no_placeholder_secret() -> None:
    assert _chart_secret_values() == []


def test_named_admins_tokens_are_secrets_and_must_differ(tmp_path: Path) -> None:
    settings = build({"admin_tokens": {"alice": GITHUB_SECRET, "bob": GITLAB_TOKEN}}, tmp_path)
    assert {GITHUB_SECRET, GITLAB_TOKEN} <= set(settings.secret_values())
    assert GITHUB_SECRET not in repr(settings)
    with pytest.raises(SettingsError, match="admins 'alice' and 'bob' have the same token"):
        build({"admin_tokens": {"alice": GITHUB_SECRET, "bob": GITHUB_SECRET}}, tmp_path)
    with pytest.raises(SettingsError, match="have the same token"):
        build({"admin_token": GITHUB_SECRET, "admin_tokens": {"bob": GITHUB_SECRET}}, tmp_path)


def test_named_admins_cannot_take_the_shared_tokens_name_or_an_odd_one(tmp_path: Path) -> None:
    with pytest.raises(SettingsError, match="give that admin another name"):
        build({"admin_token": GITHUB_SECRET, "admin_tokens": {"admin": GITLAB_TOKEN}}, tmp_path)
    # Alone, "admin" is no one else's name.
    assert build({"admin_tokens": {"admin": GITLAB_TOKEN}}, tmp_path) is not None
    for odd in ("", "al ice", "<b>", "a" * 65, "-x"):
        with pytest.raises(SettingsError, match="admin name"):
            build({"admin_tokens": {odd: GITLAB_TOKEN}}, tmp_path)


def test_named_admins_from_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RIBBIT_ADMIN_TOKENS__ALICE", GITHUB_SECRET)
    monkeypatch.setenv("RIBBIT_ADMIN_TOKENS__BOB", GITLAB_TOKEN)
    settings = load_settings(data_dir=tmp_path)
    assert {k: v.get_secret_value() for k, v in settings.admin_tokens.items()} == {
        "alice": GITHUB_SECRET,
        "bob": GITLAB_TOKEN,
    }
    monkeypatch.setenv("RIBBIT_ADMIN_TOKENS__BOB", "CHANGE-ME")
    with pytest.raises(SettingsError, match="RIBBIT_ADMIN_TOKENS__BOB looks like a placeholder"):
        load_settings(data_dir=tmp_path)


def test_a_blank_admin_token_is_unset(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RIBBIT_ADMIN_TOKEN", "  ")
    assert load_settings(data_dir=tmp_path).admin_token is None


def test_named_admins_from_a_container_secret_file(tmp_path: Path) -> None:
    from bot.settings import Settings

    secrets_dir = tmp_path / "secrets"
    secrets_dir.mkdir()
    (secrets_dir / "ribbit_admin_tokens").write_text(f'{{"alice": "{GITHUB_SECRET}"}}\n')
    settings = Settings(_secrets_dir=secrets_dir, data_dir=tmp_path)  # type: ignore[call-arg]
    assert settings.admin_tokens["alice"].get_secret_value() == GITHUB_SECRET
