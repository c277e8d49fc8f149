"""Keep secrets out of text that leaves the process: logs, exception messages, comments.

``redact`` replaces every known secret (and the Basic-auth encodings git sends
them in) with ``***``. ``RedactingFilter`` does the same to log records; it
reads a live :class:`SecretRegistry`, so tokens minted after start-up (GitHub
App installation tokens) are covered as soon as they exist.
"""

from __future__ import annotations

import base64
import logging
import threading
from collections.abc import Iterable

MASK = "***"
# Shorter values would mask ordinary words; real tokens are far longer.
_MIN_SECRET_LEN = 6


def _variants(secret: str) -> set[str]:
    """The secret and the forms it travels in (Basic auth header values)."""
    found = {secret}
    for user in ("x-access-token", "oauth2"):
        found.add(base64.b64encode(f"{user}:{secret}".encode()).decode())
    return found


def redact(text: str, secrets: Iterable[str]) -> str:
    """``text`` with every secret (and its Basic-auth encodings) replaced by ``***``."""
    values: set[str] = set()
    for secret in secrets:
        if secret and len(secret) >= _MIN_SECRET_LEN:
            values |= _variants(secret)
    # Longest first so a secret that contains another is masked whole.
    for value in sorted(values, key=len, reverse=True):
        text = text.replace(value, MASK)
    return text


class SecretRegistry:
    """A thread-safe set of secret values that grows as tokens are minted."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        self._lock = threading.Lock()
        self._secrets: set[str] = {s for s in secrets if s}

    def add(self, secret: str) -> None:
        if secret:
            with self._lock:
                self._secrets.add(secret)

    def values(self) -> list[str]:
        with self._lock:
            return list(self._secrets)

    def redact(self, text: str) -> str:
        return redact(text, self.values())


#: Process-wide registry: forges register every token they use or mint here.
SECRETS = SecretRegistry()


def scrub(text: str) -> str:
    """``text`` for the forge (comments, PR bodies, statuses) with every known secret
    masked: model output and gate logs could quote one that leaked somewhere."""
    return SECRETS.redact(text)


class RedactingFilter(logging.Filter):
    """Masks secrets in a record's message and arguments (and exception text)."""

    def __init__(self, registry: SecretRegistry = SECRETS) -> None:
        super().__init__()
        self._registry = registry

    def filter(self, record: logging.LogRecord) -> bool:
        secrets = self._registry.values()
        if not secrets:
            return True
        message = record.getMessage()
        clean = redact(message, secrets)
        if clean != message:
            record.msg = clean
            record.args = None
        if record.exc_info and record.exc_info[1] is not None:
            exc_text = logging.Formatter().formatException(record.exc_info)
            record.exc_text = redact(exc_text, secrets)
            record.exc_info = None
        return True


def install_redacting_filter(
    logger: logging.Logger | None = None, registry: SecretRegistry = SECRETS
) -> RedactingFilter:
    """Attach one filter to ``logger`` (root by default) and each of its handlers.

    Logger filters only see records logged on that very logger, not ones
    propagated from children, so the handlers get it too. Handlers added later
    need ``handler.addFilter(returned_filter)``.
    """
    target = logger or logging.getLogger()
    filt = RedactingFilter(registry)
    target.addFilter(filt)
    for handler in target.handlers:
        handler.addFilter(filt)
    return filt
