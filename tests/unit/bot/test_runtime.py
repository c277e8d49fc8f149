"""The one place processes open the database (bot/runtime.py): the schema is checked at
start, upgraded only by `ribbit db upgrade` or where RIBBIT_DATABASE_AUTO_UPGRADE allows,
and upgrades run together take turns. Real SQLite files throughout; PostgreSQL's side is
in tests/integration/test_store_postgres.py."""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from sqlalchemy import create_engine, inspect, text

from bot.cli import main
from bot.runtime import Runtime, SchemaNotCurrent, open_database, upgrade_database
from bot.settings import Settings, load_settings
from bot.store.db import Database, alembic_config, head_revision

ROOT = Path(__file__).resolve().parents[3]


def _settings(tmp_path: Path, **overrides: object) -> Settings:
    return load_settings(data_dir=tmp_path, **overrides)


def _tables(settings: Settings) -> set[str]:
    engine = create_engine(settings.effective_database_url)
    try:
        return set(inspect(engine).get_table_names())
    finally:
        engine.dispose()


def _migrate_to(settings: Settings, revision: str) -> None:
    from alembic import command

    db = Database(settings.effective_database_url)
    try:
        command.upgrade(alembic_config(db.engine), revision)
    finally:
        db.dispose()


def _previous_revision() -> str:
    from alembic.script import ScriptDirectory

    down = ScriptDirectory.from_config(alembic_config()).get_revision(head_revision())
    assert down is not None and isinstance(down.down_revision, str)
    return down.down_revision


def test_auto_upgrade_is_on_for_sqlite_and_off_for_postgresql(tmp_path: Path) -> None:
    assert _settings(tmp_path).effective_database_auto_upgrade is True
    pg = _settings(tmp_path, database_url="postgresql+psycopg://u@h/db")
    assert pg.effective_database_auto_upgrade is False
    assert _settings(tmp_path, database_auto_upgrade=False).effective_database_auto_upgrade is False
    forced = _settings(
        tmp_path, database_url="postgresql+psycopg://u@h/db", database_auto_upgrade=True
    )
    assert forced.effective_database_auto_upgrade is True


def test_the_embedded_default_upgrades_itself_at_start(tmp_path: Path) -> None:
    settings = _settings(tmp_path)
    rt = Runtime.open(settings)
    try:
        assert rt.db.schema().current == head_revision()
        assert rt.store.list() == []
    finally:
        rt.close()


def test_a_new_database_is_refused_without_auto_upgrade_and_left_untouched(
    tmp_path: Path,
) -> None:
    settings = _settings(tmp_path, database_auto_upgrade=False)
    with pytest.raises(SchemaNotCurrent) as refused:
        open_database(settings)
    message = str(refused.value)
    assert f"sqlite:///{tmp_path / 'ribbit.db'} has no schema yet" in message
    assert f"needs revision {head_revision()}: run `ribbit db upgrade` first" in message
    assert _tables(settings) == set()


def test_a_schema_behind_is_refused_or_upgraded_as_the_setting_says(tmp_path: Path) -> None:
    older = _previous_revision()
    settings = _settings(tmp_path, database_auto_upgrade=False)
    _migrate_to(settings, older)
    with pytest.raises(SchemaNotCurrent, match=f"is at revision {older} and this Ribbit needs"):
        open_database(settings)
    assert Database(settings.effective_database_url).schema().current == older
    upgraded = open_database(_settings(tmp_path, database_auto_upgrade=True))
    assert upgraded.schema().current == head_revision()
    upgraded.dispose()
    open_database(settings).dispose()  # at head: opens without upgrading


@pytest.mark.parametrize("auto_upgrade", [True, False])
def test_a_schema_from_a_newer_ribbit_is_refused_even_with_auto_upgrade(
    tmp_path: Path, auto_upgrade: bool
) -> None:
    settings = _settings(tmp_path, database_auto_upgrade=auto_upgrade)
    upgrade_database(settings)
    engine = create_engine(settings.effective_database_url)
    with engine.begin() as conn:
        conn.execute(text("UPDATE alembic_version SET version_num = '9999'"))
    engine.dispose()
    with pytest.raises(SchemaNotCurrent, match="revision 9999, which this Ribbit does not have"):
        open_database(settings)


def test_cli_commands_refuse_with_the_step_to_take_and_no_traceback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RIBBIT_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("RIBBIT_DATABASE_AUTO_UPGRADE", "false")
    for argv in (["jobs"], ["pause"], ["serve", "--no-worker"]):
        result = CliRunner().invoke(main, argv)
        assert result.exit_code == 1, (argv, result.output)
        assert isinstance(result.exception, SystemExit), (argv, result.exception)
        assert "run `ribbit db upgrade` first" in result.output, argv
    assert _tables(load_settings()) == set()
    upgraded = CliRunner().invoke(main, ["db", "upgrade"])
    assert upgraded.output.strip() == f"database at revision {head_revision()}"
    assert CliRunner().invoke(main, ["jobs"]).exit_code == 0


def test_doctor_fails_the_database_check_with_the_step_to_take(tmp_path: Path) -> None:
    from bot.doctor import run_checks

    checks = {c.name: c for c in run_checks(_settings(tmp_path, database_auto_upgrade=False))}
    assert checks["database"].status == "fail"
    assert "run `ribbit db upgrade` first" in checks["database"].detail


def _ribbit(data_dir: Path, *args: str) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RIBBIT_")}
    env.update(RIBBIT_DATA_DIR=str(data_dir), RIBBIT_DATABASE_AUTO_UPGRADE="false")
    return subprocess.Popen(
        [sys.executable, "-m", "bot", *args],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_a_web_process_on_an_old_schema_exits_1_naming_the_upgrade(tmp_path: Path) -> None:
    proc = _ribbit(tmp_path, "serve", "--no-worker", "--port", "0")
    try:
        out, err = proc.communicate(timeout=120)
    finally:
        proc.kill()  # a server that did start would serve on
    assert proc.returncode == 1, out + err
    assert "Traceback" not in err
    assert "run `ribbit db upgrade` first" in err


def test_an_upgrade_waits_for_the_one_running_and_then_finds_it_done(tmp_path: Path) -> None:
    """The lock `ribbit db upgrade` takes on SQLite, held here as a first upgrade would
    hold it: the second says it waits, touches nothing until the lock is free, then
    migrates."""
    settings = _settings(tmp_path)
    db_path = tmp_path / "ribbit.db"
    with open(f"{db_path}-migrate.lock", "a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        second = _ribbit(tmp_path, "db", "upgrade")
        assert second.stderr is not None
        # Wait for the event (the upgrade queued on the lock), not for a time.
        for said in second.stderr:
            if "waiting for another process's schema upgrade" in said:
                break
        else:
            pytest.fail(f"the upgrade never waited (exit {second.wait()})")
        assert second.poll() is None
        assert "alembic_version" not in _tables(settings)
        fcntl.flock(held, fcntl.LOCK_UN)
        out, err = second.communicate(timeout=120)
    assert second.returncode == 0, err
    assert out.strip() == f"database at revision {head_revision()}"


def test_upgrades_started_together_all_succeed(tmp_path: Path) -> None:
    """Without the lock, each would find no version table and create the schema, and all
    but one would fail on tables that already exist."""
    upgrades = [_ribbit(tmp_path, "db", "upgrade") for _ in range(3)]
    outputs = [p.communicate(timeout=120) for p in upgrades]
    assert [p.returncode for p in upgrades] == [0, 0, 0], outputs
    assert {out.strip() for out, _ in outputs} == {f"database at revision {head_revision()}"}


def test_db_check_says_where_the_schema_stands_and_never_upgrades(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RIBBIT_DATA_DIR", str(tmp_path))  # SQLite: auto-upgrade on, ignored
    behind = CliRunner().invoke(main, ["db", "check"])
    assert behind.exit_code == 1 and "run `ribbit db upgrade` first" in behind.output
    assert _tables(load_settings()) == set()
    CliRunner().invoke(main, ["db", "upgrade"])
    at_head = CliRunner().invoke(main, ["db", "check"])
    assert at_head.exit_code == 0
    assert at_head.output.strip() == f"database at revision {head_revision()}"
    as_json = CliRunner().invoke(main, ["db", "check", "--json"])
    assert as_json.exit_code == 0
    assert json.loads(as_json.output) == {"revision": head_revision(), "at_head": True}


def test_db_check_waits_for_an_upgrade_running_elsewhere(tmp_path: Path) -> None:
    """What a pod's init container does while the deployment's upgrade Job runs: the
    upgrade lands during the wait (here: at the second look)."""
    from bot.runtime import POLL_S, wait_for_schema

    settings = _settings(tmp_path)
    now = [0.0]
    sleeps: list[float] = []

    def sleep(seconds: float) -> None:
        sleeps.append(seconds)
        now[0] += seconds
        upgrade_database(settings)  # the Job finishes while the check sleeps

    assert wait_for_schema(settings, 60, sleep=sleep, clock=lambda: now[0]) == head_revision()
    assert sleeps == [POLL_S]


def test_db_check_gives_up_after_its_wait(tmp_path: Path) -> None:
    from bot.runtime import POLL_S, wait_for_schema

    now = [0.0]

    def sleep(seconds: float) -> None:
        now[0] += seconds

    with pytest.raises(SchemaNotCurrent, match="has no schema yet"):
        wait_for_schema(_settings(tmp_path), 5 * POLL_S, sleep=sleep, clock=lambda: now[0])
    assert now[0] == 5 * POLL_S


def test_db_check_refuses_a_newer_schema_at_once_whatever_its_wait(tmp_path: Path) -> None:
    """Waiting cannot bring a schema from a newer Ribbit back to this one's head."""
    from bot.runtime import wait_for_schema

    settings = _settings(tmp_path)
    upgrade_database(settings)
    engine = create_engine(settings.effective_database_url)
    with engine.begin() as conn:
        conn.execute(text("UPDATE alembic_version SET version_num = '9999'"))
    engine.dispose()
    now = [0.0]

    def sleep(seconds: float) -> None:
        now[0] += seconds

    with pytest.raises(SchemaNotCurrent, match="revision 9999, which this Ribbit does not have"):
        wait_for_schema(settings, 60, sleep=sleep, clock=lambda: now[0])
    assert now[0] == 0.0
