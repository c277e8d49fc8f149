"""`ribbit pause` and `ribbit resume` as an operator types them: a repository name is
checked before anything is paused (issue #36 item 6)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from bot.cli import main
from bot.forges.base import RepoRef, parse_repo_ref


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("RIBBIT_DATA_DIR", str(tmp_path))
    return tmp_path


def paused_scopes() -> list[str]:
    from bot.runtime import Runtime
    from bot.settings import load_settings

    rt = Runtime.open(load_settings())
    try:
        return rt.store.paused_scopes()
    finally:
        rt.close()


@pytest.mark.parametrize(
    ("text", "forge", "expected"),
    [
        ("acme/app", "github", RepoRef("github", "acme/app")),
        ("gitlab:acme/tools/w", "github", RepoRef("gitlab", "acme/tools/w")),
        ("acme/tools/w", "gitlab", RepoRef("gitlab", "acme/tools/w")),
        ("acme/.github", "github", RepoRef("github", "acme/.github")),
        (" acme/my_app-2.x ", "github", RepoRef("github", "acme/my_app-2.x")),
    ],
)
def test_repo_names_the_forms_an_operator_types(text: str, forge: str, expected: RepoRef) -> None:
    assert parse_repo_ref(text, forge) == expected  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "text",
    [
        "not a repo",
        "acme",
        "acme/",
        "/app",
        "acme/app/extra",  # GitHub has no subgroups
        "acme/../app",
        "acme/-app",
        "bitbucket:acme/app",
        "github:",
        "acme/a" + "p" * 300,
    ],
)
def test_repo_names_refused(text: str) -> None:
    with pytest.raises(ValueError, match="is not"):
        parse_repo_ref(text)


@pytest.mark.parametrize("command", ["pause", "resume"])
@pytest.mark.parametrize("repo", ["not a repo", "bitbucket:acme/app", "acme"])
def test_cli_killswitch_refuses_a_name_no_repository_has(
    env: Path, command: str, repo: str
) -> None:
    result = CliRunner().invoke(main, [command, "--repo", repo])
    assert result.exit_code == 2, result.output
    assert "Invalid value for '--repo'" in result.output
    assert "Traceback" not in result.output
    assert paused_scopes() == []


def test_cli_killswitch_takes_the_forge_from_the_option_or_the_prefix(env: Path) -> None:
    runner = CliRunner()
    assert (
        runner.invoke(main, ["pause", "--repo", "acme/tools/w", "--forge", "gitlab"]).exit_code == 0
    )
    assert runner.invoke(main, ["pause", "--repo", "github:acme/app"]).exit_code == 0
    assert sorted(paused_scopes()) == ["github:acme/app", "gitlab:acme/tools/w"]
    # The prefix wins over --forge, as it always did.
    result = runner.invoke(main, ["resume", "--repo", "github:acme/app", "--forge", "gitlab"])
    assert result.exit_code == 0, result.output
    assert paused_scopes() == ["gitlab:acme/tools/w"]


def test_cli_killswitch_as_json(env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sent: list[list[str]] = []
    monkeypatch.setattr("bot.queue.JobQueue.dispatch", lambda _queue, ids: sent.append(ids))
    runner = CliRunner()
    paused = runner.invoke(main, ["pause", "--repo", "gitlab:acme/tools/w", "--json"])
    assert json.loads(paused.output) == {
        "paused": "gitlab:acme/tools/w",
        "message": "paused gitlab:acme/tools/w",
    }
    assert json.loads(runner.invoke(main, ["pause", "--json"]).output) == {
        "paused": "*",
        "message": "paused everything",
    }
    assert json.loads(runner.invoke(main, ["resume", "--json"]).output) == {
        "resumed": "*",
        "dispatched": [],
        "message": "resumed everything; 0 held job(s) dispatched",
    }
    held = _held_job("gitlab", "acme/tools/w")
    resumed = runner.invoke(
        main, ["resume", "--repo", "acme/tools/w", "--forge", "gitlab", "--json"]
    )
    assert json.loads(resumed.output) == {
        "resumed": "gitlab:acme/tools/w",
        "dispatched": [held],
        "message": "resumed gitlab:acme/tools/w; 1 held job(s) dispatched",
    }
    assert sent == [[], [held]]


def _held_job(forge: str, repo: str) -> str:
    from bot.runtime import Runtime
    from bot.settings import load_settings
    from bot.store.jobs import JobSpec

    rt = Runtime.open(load_settings())
    try:
        with rt.db.session() as s:
            job = rt.store.create(
                s, JobSpec(kind="solve", forge=forge, repo=repo, issue_number=3), held=True
            )
            assert job is not None
            return job.id
    finally:
        rt.close()
