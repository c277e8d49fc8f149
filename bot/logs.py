"""Structured logs: one JSON object a line, with job and delivery ids, secrets redacted."""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime

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


def configure_logging(settings: Settings) -> None:
    handler = logging.StreamHandler()
    handler.addFilter(RedactSecrets(settings.secret_values()))
    if settings.log_format == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(settings.log_level)
