"""The process's log lines (bot/logs.py): text for a person at a terminal, JSON for a
collector, either forced by RIBBIT_LOG_FORMAT; a schema check says nothing at INFO
(issue #36 item 6)."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.logs import configure_logging
from bot.settings import Settings, load_settings
from bot.store.db import Database


class Stream(io.StringIO):
    """A stderr that is, or is not, a terminal."""

    def __init__(self, terminal: bool) -> None:
        super().__init__()
        self.terminal = terminal

    def isatty(self) -> bool:
        return self.terminal


@pytest.fixture(autouse=True)
def _restore_root_logger() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


def _settings(tmp_path: Path, **overrides: object) -> Settings:
    return load_settings(data_dir=tmp_path, **overrides)


def _one_line(settings: Settings, stream: Stream) -> str:
    configure_logging(settings, stream)
    logging.getLogger("ribbit.test").warning("disk %s full", "/data")
    return stream.getvalue()


@pytest.mark.parametrize(
    ("log_format", "terminal", "expect_json"),
    [
        ("auto", True, False),
        ("auto", False, True),
        ("json", True, True),
        ("text", False, False),
    ],
)
def test_logs_text_on_a_terminal_json_elsewhere_unless_forced(
    tmp_path: Path, log_format: str, terminal: bool, expect_json: bool
) -> None:
    out = _one_line(_settings(tmp_path, log_format=log_format), Stream(terminal))
    if expect_json:
        record = json.loads(out)
        assert (record["level"], record["msg"]) == ("WARNING", "disk /data full")
    else:
        assert out.rstrip().endswith(" WARNING ribbit.test: disk /data full")
        assert not out.startswith("{")


def test_logs_auto_is_the_default_and_a_stream_without_isatty_gets_json(tmp_path: Path) -> None:
    settings = _settings(tmp_path)
    assert settings.log_format == "auto"
    configure_logging(settings, io.StringIO())  # type: ignore[arg-type]
    stream = logging.getLogger().handlers[0].stream  # type: ignore[attr-defined]
    logging.getLogger("ribbit.test").warning("hello")
    assert json.loads(stream.getvalue())["msg"] == "hello"


def test_logs_a_schema_check_says_nothing_at_info_a_migration_does(tmp_path: Path) -> None:
    stream = Stream(terminal=False)
    configure_logging(_settings(tmp_path, log_level="INFO"), stream)
    db = Database(f"sqlite:///{tmp_path / 'ribbit.db'}")
    try:
        db.migrate()
        migrated = stream.getvalue()
        stream.seek(0)
        stream.truncate()
        db.schema()
        db.schema()
    finally:
        db.dispose()
    assert "Running upgrade" in migrated
    assert "Context impl" not in migrated and "setup plugin" not in migrated
    assert stream.getvalue() == ""


def test_logs_schema_check_lines_are_kept_at_debug(tmp_path: Path) -> None:
    stream = Stream(terminal=False)
    configure_logging(_settings(tmp_path, log_level="DEBUG"), stream)
    logging.getLogger("alembic.runtime.migration").info("Context impl %s.", "SQLiteImpl")
    records = [json.loads(line) for line in stream.getvalue().splitlines()]
    assert [(r["level"], r["msg"]) for r in records] == [("DEBUG", "Context impl SQLiteImpl.")]
