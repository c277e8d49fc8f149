from __future__ import annotations

import base64

import pytest

from bot.forges.base import ForgeError, ForgeNotFound, ForgePermissionDenied, ForgeUnavailable
from bot.forges.git import GitCredentials, _classify, check_remote_url, forge_git_env


def test_git_env_scopes_the_header_to_the_forge_and_disables_hooks() -> None:
    env = forge_git_env(
        "https://gitlab.example.com/group/proj.git", GitCredentials("oauth2", "tkn-1")
    )
    pairs = {
        env[f"GIT_CONFIG_KEY_{i}"]: env[f"GIT_CONFIG_VALUE_{i}"]
        for i in range(int(env["GIT_CONFIG_COUNT"]))
    }
    header = pairs["http.https://gitlab.example.com/.extraHeader"]
    assert header == "Authorization: Basic " + base64.b64encode(b"oauth2:tkn-1").decode()
    assert pairs["core.hooksPath"] == "/dev/null"
    assert pairs["credential.helper"] == ""
    assert env["GIT_TERMINAL_PROMPT"] == "0"
    assert env["GIT_CONFIG_GLOBAL"] == "/dev/null"


def test_git_env_does_not_inherit_unrelated_secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RIBBIT_GITHUB__TOKEN", "should-not-pass")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "nope")
    env = forge_git_env("https://github.com/a/b.git", None)
    assert "should-not-pass" not in env.values()
    assert "AWS_SECRET_ACCESS_KEY" not in env


@pytest.mark.parametrize(
    "url",
    [
        "https://user:pw@github.com/a/b.git",
        "ssh://github.com/a/b",
        "file:///etc",
        "https://tok@github.com/a/b.git",
        "ext::sh -c x",
    ],
)
def test_check_remote_url_refuses_credentials_and_other_schemes(url: str) -> None:
    with pytest.raises(ForgeError):
        check_remote_url(url)


@pytest.mark.parametrize(
    ("stderr", "kind"),
    [
        ("fatal: unable to access 'x': The requested URL returned error: 503", ForgeUnavailable),
        (
            "fatal: unable to access 'x': Failed to connect to h port 1: Connection refused",
            ForgeUnavailable,
        ),
        ("remote: Not Found\nfatal: repository 'http://h/x.git/' not found", ForgeNotFound),
        (
            "fatal: unable to access 'x': The requested URL returned error: 403",
            ForgePermissionDenied,
        ),
        (
            "fatal: could not read Username for 'http://h': terminal prompts disabled",
            ForgePermissionDenied,
        ),
        ("fatal: something else", ForgeError),
    ],
)
def test_git_failures_are_classified(stderr: str, kind: type[ForgeError]) -> None:
    assert type(_classify(stderr, "clone")) is kind
