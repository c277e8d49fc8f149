"""The process's logs: one JSON object a line (with job and delivery ids) for a log
collector, text lines for a person at a terminal; secrets redacted either way."""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime
from typing import Literal, TextIO

from bot.settings import Settings

REDACTED = "[REDACTED]"


class RedactSecrets(logging.Filter):
    """Replaces every configured secret value in a record's message and arguments."""

    def __init__(self, secrets: list[str]) -> None:
        super().__init__()
        # Longest first, so a secret that contains another is replaced whole.
        self.secrets = sorted({s for s in secrets if len(s) >= 4}, key=len, reverse=True)

    def redact(self, text: str) -> str:
        for secret in self.secrets:
            text = text.replace(secret, REDACTED)
        return text

    def filter(self, record: logging.LogRecord) -> bool:
        if self.secrets:
            record.msg = self.redact(record.getMessage())
            record.args = None
            if record.exc_info and record.exc_info[1] is not None:
                record.exc_text = self.redact(logging.Formatter().formatException(record.exc_info))
                record.exc_info = None
        return True


class JsonFormatter(logging.Formatter):
    FIELDS = ("job_id", "delivery_id", "forge", "repo")

    def format(self, record: logging.LogRecord) -> str:
        data = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(),
            "level": record.levelname,
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for name in self.FIELDS:
            value = getattr(record, name, None)
            if value is not None:
                data[name] = value
        if record.exc_info:
            data["exc"] = self.formatException(record.exc_info)
        elif record.exc_text:
            data["exc"] = record.exc_text
        return json.dumps(data, default=str)


class QuietSchemaChecks(logging.Filter):
    """Alembic's set-up lines ("Context impl SQLiteImpl.", "Will assume non-transactional
    DDL.", its plugins) come at INFO each time a process checks the schema, which every
    worker pool process does when it opens the database for its first task (the sweep,
    every 30 s): nothing an operator acts on, so they count as DEBUG. The lines of a
    migration that runs ("Running upgrade 0015 -> 0016") stay INFO."""

    SETUP = ("Context impl ", "Will assume ")

    def __init__(self, level: int | str) -> None:
        super().__init__()
        self.level = logging.getLevelName(level) if isinstance(level, str) else level

    def filter(self, record: logging.LogRecord) -> bool:
        setup = record.name == "alembic.runtime.plugins" or (
            record.name == "alembic.runtime.migration"
            and isinstance(record.msg, str)
            and record.msg.startswith(self.SETUP)
        )
        if setup and record.levelno == logging.INFO:
            record.levelno, record.levelname = logging.DEBUG, "DEBUG"
        return not setup or record.levelno >= self.level


TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def line_format(settings: Settings, stream: TextIO) -> Literal["json", "text"]:
    """RIBBIT_LOG_FORMAT, where ``auto`` means text for a person at a terminal and JSON
    for everything else (a pipe, a file, a container's log collector)."""
    if settings.log_format != "auto":
        return settings.log_format
    isatty = getattr(stream, "isatty", None)
    return "text" if callable(isatty) and isatty() else "json"


def configure_logging(settings: Settings, stream: TextIO | None = None) -> None:
    """The process's one log handler, on ``stream`` (stderr by default)."""
    stream = stream if stream is not None else sys.stderr
    handler = logging.StreamHandler(stream)
    handler.addFilter(QuietSchemaChecks(settings.log_level))
    handler.addFilter(RedactSecrets(settings.secret_values()))
    if line_format(settings, stream) == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter(TEXT_FORMAT))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(settings.log_level)
