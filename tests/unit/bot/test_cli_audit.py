"""The CLI's admin commands write the same audit rows as the dashboard's actions, naming
who acted: the OS user, or ``--actor`` with the OS user beside it (issue #32, item 6)."""

from __future__ import annotations

import getpass
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from bot import cli
from bot.cli import main
from bot.settings import load_settings
from bot.store.audit import AuditEntry, recent
from bot.store.db import Database
from bot.store.jobs import JobStore
from tests.support import score_heldout

OS_USER = "ops-user"


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("RIBBIT_DATA_DIR", str(tmp_path))
    monkeypatch.setattr(getpass, "getuser", lambda: OS_USER)
    return tmp_path


@pytest.fixture
def db(env: Path) -> Iterator[Database]:
    database = Database(load_settings().effective_database_url)
    database.migrate()
    yield database
    database.dispose()


def rows(db: Database) -> list[tuple[str, str, str, str, str | None]]:
    entries: list[AuditEntry] = recent(db)
    return [(e.actor, e.action, e.target, e.outcome, e.detail) for e in reversed(entries)]


def run(*args: str) -> str:
    result = CliRunner().invoke(main, list(args))
    assert result.exit_code == 0, result.output
    return result.output


def test_pause_and_resume_are_audited_with_the_os_user(db: Database) -> None:
    run("pause")
    run("pause", "--repo", "gitlab:acme/x")
    run("resume")
    assert rows(db) == [
        ("ops-user (cli)", "pause", "*", "ok", "paused everything"),
        ("ops-user (cli)", "pause", "gitlab:acme/x", "ok", "paused gitlab:acme/x"),
        ("ops-user (cli)", "resume", "*", "ok", "resumed everything; 0 held job(s) dispatched"),
    ]


def test_actor_names_who_acted_and_the_os_user_stays_beside_it(db: Database) -> None:
    run("pause", "--actor", "alice")
    run("resume", "--repo", "acme/app", "--actor", "bob")
    run("pause", "--actor", OS_USER)  # naming oneself adds nothing
    assert [(r[0], r[1], r[2]) for r in rows(db)] == [
        ("alice (cli, os user ops-user)", "pause", "*"),
        ("bob (cli, os user ops-user)", "resume", "github:acme/app"),
        ("ops-user (cli)", "pause", "*"),
    ]


@pytest.mark.parametrize(
    "actor", ["alice (session) from 10.0.0.1", "", "bob\nok", "a" * 65, "-x", "<b>"]
)
def test_an_actor_that_could_pass_for_another_entry_is_refused(db: Database, actor: str) -> None:
    result = CliRunner().invoke(main, ["pause", "--actor", actor])
    assert result.exit_code == 2 and "an admin's name" in result.output
    assert rows(db) == []
    assert JobStore(db).paused_scopes() == []


def test_db_upgrade_is_audited(env: Path, db: Database) -> None:
    assert run("db", "upgrade", "--actor", "carol").startswith("database at revision ")
    [(actor, action, target, outcome, detail)] = rows(db)
    assert (actor, action, target, outcome) == (
        "carol (cli, os user ops-user)",
        "db-upgrade",
        "schema",
        "ok",
    )
    assert detail is not None and detail.startswith("at revision ")


def test_a_failed_action_is_audited_as_an_error(
    db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*_a: object, **_k: object) -> None:
        raise RuntimeError("database went away")

    monkeypatch.setattr(JobStore, "pause", broken)
    result = CliRunner().invoke(main, ["pause", "--actor", "alice"])
    assert result.exit_code != 0
    assert rows(db) == [
        (
            "alice (cli, os user ops-user)",
            "pause",
            "*",
            "error",
            "RuntimeError: database went away",
        )
    ]


def test_an_os_user_without_a_name_is_its_uid(monkeypatch: pytest.MonkeyPatch) -> None:
    def nameless() -> str:
        raise OSError("no passwd entry")

    monkeypatch.setattr(getpass, "getuser", nameless)
    monkeypatch.setattr(cli.os, "getuid", lambda: 1000)
    assert cli.cli_actor(None) == "uid 1000 (cli)"
    assert cli.cli_actor("  ") == "uid 1000 (cli)"
    assert cli.cli_actor("dana") == "dana (cli, os user uid 1000)"


STATE_CHANGING = (
    ["pause"],
    ["resume"],
    ["db", "upgrade"],
    ["model", "promote"],
    ["model", "rollback"],
    ["data", "delete"],
    ["data", "prune"],
    ["data", "visibility"],
    ["prs", "rejudge"],
)


@pytest.mark.parametrize("path", STATE_CHANGING, ids=" ".join)
def test_the_actor_option_is_on_every_state_changing_command(path: list[str]) -> None:
    import click

    ctx = click.Context(main)
    command: click.Command | None = main
    for name in path:
        assert isinstance(command, click.Group)
        command = command.get_command(ctx, name)
    assert command is not None
    assert "actor" in {p.name for p in command.params}, path


# -- the trainer's state-changing commands, audited the same way -----------------------------


def test_model_promote_and_rollback_are_audited(db: Database) -> None:
    from trainer.registry import register

    register(db, "v1", base_model="base", adapter_path="/a/v1", heldout_pass_rate=0.5)
    register(db, "v2", base_model="base", adapter_path="/a/v2", heldout_pass_rate=0.4)
    # Promotion needs per-environment results that beat the base, then the promoted (#33).
    score_heldout(db, "base:base", [0] * 40)
    score_heldout(db, "v1", [1] * 20 + [0] * 20)
    score_heldout(db, "v2", [1] * 16 + [0] * 24)
    assert "promoted v1" in run("model", "promote", "v1", "--actor", "alice")
    refused = CliRunner().invoke(main, ["model", "promote", "v2"])
    assert refused.exit_code != 0 and "v2 is not better than v1" in refused.output
    assert "now serving the base model" in run("model", "rollback")
    audited = rows(db)
    assert [(r[0], r[1], r[2], r[3]) for r in audited] == [
        ("alice (cli, os user ops-user)", "promote", "model:v1", "ok"),
        ("ops-user (cli)", "promote", "model:v2", "error"),
        ("ops-user (cli)", "rollback", "model line:default", "ok"),
    ]
    assert audited[1][4] is not None and "v2 is not better than v1" in audited[1][4]
    assert "one-sided sign test p = 0.0000" in str(audited[0][4])


def test_data_delete_visibility_and_prune_are_audited(
    db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    run("data", "delete", "--forge", "github", "--repo", "acme/b", "--yes", "--actor", "bob")
    run("data", "visibility", "--forge", "gitlab", "--repo", "acme/c", "--public")
    monkeypatch.setenv("RIBBIT_TRAINING__RETENTION_DAYS", "30")
    run("data", "prune")
    assert [(r[0], r[1], r[2], r[3]) for r in rows(db)] == [
        ("bob (cli, os user ops-user)", "delete-data", "github:acme/b", "ok"),
        ("ops-user (cli)", "visibility", "gitlab:acme/c", "ok"),
        ("ops-user (cli)", "prune-data", "*", "ok"),
    ]
