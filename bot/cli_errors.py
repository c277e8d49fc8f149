"""How a failed `ribbit` command reads to an operator: one line, ``Error: what (remedy)``,
exit 1, never a traceback, unless asked for with ``--debug`` (or RIBBIT_DEBUG=1).

The failures a deployment meets before any bug (the database or the broker unreachable,
a data directory that cannot be written, settings that cannot work) each name the
setting to change. Anything else is still one line, with the exception's type and the
way to see its traceback: a bug report wants the traceback, an operator's terminal does
not. Every message passes through ``redact``: a URL's password and the configured
secrets never reach the terminal, which may be a shared log.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

from bot.settings import Settings, SettingsError

DEBUG_ENV = "RIBBIT_DEBUG"
DEBUG_HELP = f"Show the traceback of a failure instead of one line (or set {DEBUG_ENV}=1)."


def debugging(flag: bool) -> bool:
    """``--debug`` given, or RIBBIT_DEBUG set to a true value."""
    return flag or os.environ.get(DEBUG_ENV, "").strip().lower() in {"1", "true", "yes", "on"}


def known_failure(exc: BaseException, settings: Settings | None) -> str | None:
    """The line for a failure a deployment meets before any bug, naming its remedy; None
    for any other."""
    for cause in _chain(exc):
        for explain in EXPLAINERS:
            message = explain(cause, settings)
            if message is not None:
                return redact(message, settings)
    return None


def describe_failure(exc: BaseException, settings: Settings | None) -> str:
    """The one line an operator reads for ``exc`` (without click's ``Error: ``)."""
    known = known_failure(exc, settings)
    if known is not None:
        return known
    first = _first_line(exc) or "(no message)"
    return redact(
        f"{type(exc).__name__}: {first} (unexpected; run again with --debug or "
        f"{DEBUG_ENV}=1 for the traceback, and report it)",
        settings,
    )


def _chain(exc: BaseException) -> Iterator[BaseException]:
    """``exc`` and what it was raised from or during: a driver's error is often the cause
    of the one that reached the command."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0].strip() if text else ""


# -- the known failures ---------------------------------------------------------------------


def _settings_error(exc: BaseException, _settings: Settings | None) -> str | None:
    return str(exc) if isinstance(exc, SettingsError) else None


def _database_error(exc: BaseException, settings: Settings | None) -> str | None:
    from sqlalchemy.exc import DBAPIError, OperationalError

    if not isinstance(exc, OperationalError):
        return None
    orig = exc.orig if isinstance(exc, DBAPIError) and exc.orig is not None else exc
    url = settings.effective_database_url if settings is not None else None
    where = f"the database {safe_url(url)}" if url else "the database"
    detail = _first_line(orig) or type(orig).__name__
    if url is not None and url.startswith("sqlite"):
        remedy = "check that RIBBIT_DATA_DIR (or RIBBIT_DATABASE_URL) names a writable place"
    else:
        remedy = (
            "check RIBBIT_DATABASE_URL, and that PostgreSQL is running and accepts "
            "connections from this host"
        )
    return f"cannot use {where}: {detail} ({remedy})"


def _database_driver_error(exc: BaseException, _settings: Settings | None) -> str | None:
    if isinstance(exc, ModuleNotFoundError) and (exc.name or "").split(".")[0] == "psycopg":
        return (
            "RIBBIT_DATABASE_URL names PostgreSQL, and its driver is not installed "
            "(pip install 'ribbit[postgres]')"
        )
    return None


def _broker_error(exc: BaseException, settings: Settings | None) -> str | None:
    from kombu.exceptions import OperationalError

    if not isinstance(exc, OperationalError):
        return None
    url = settings.effective_broker_url if settings is not None else None
    where = f"the broker {safe_url(url)}" if url else "the broker"
    return (
        f"cannot reach {where}: {_first_line(exc) or type(exc).__name__} (check "
        "RIBBIT_BROKER_URL, and that Redis is running and accepts connections from this host)"
    )


def _data_dir_error(exc: BaseException, settings: Settings | None) -> str | None:
    if not isinstance(exc, OSError) or not exc.filename:
        return None
    path = Path(os.fsdecode(exc.filename))
    reason = exc.strerror or type(exc).__name__
    data_dir = settings.data_dir if settings is not None else None
    if data_dir is None or not _related(path, data_dir):
        return f"{reason}: {path}"
    what = "the data directory" if path == data_dir else f"{path} in the data directory"
    return (
        f"cannot create or write {what} {data_dir if path != data_dir else path}: {reason} "
        "(set RIBBIT_DATA_DIR to a directory this user can create and write)"
    )


def _related(path: Path, data_dir: Path) -> bool:
    """``path`` is the data directory, inside it, or one of the folders above it that
    creating it needs."""
    return path == data_dir or data_dir in path.parents or path in data_dir.parents


EXPLAINERS: tuple[Callable[[BaseException, Settings | None], str | None], ...] = (
    _settings_error,
    _database_error,
    _database_driver_error,
    _broker_error,
    _data_dir_error,
)


# -- what never reaches the terminal ----------------------------------------------------------


def safe_url(url: str) -> str:
    """``url`` with its password masked (what a message may show of a connection URL)."""
    from kombu.utils.url import maybe_sanitize_url

    return str(maybe_sanitize_url(url, mask="***"))


def redact(message: str, settings: Settings | None) -> str:
    if settings is None:
        return message
    secrets = [*settings.secret_values(), *_passwords(settings)]
    for secret in sorted({s for s in secrets if len(s) >= 4}, key=len, reverse=True):
        message = message.replace(secret, "***")
    return message


def _passwords(settings: Settings) -> list[str]:
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    found = []
    for url in (settings.effective_database_url, settings.effective_broker_url):
        try:
            password = make_url(url).password
        except (ArgumentError, ValueError):
            continue
        if password:
            found.append(str(password))
    return found
