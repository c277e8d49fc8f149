"""The audit trail of the `ribbit` commands that change state: who is acting
(``--actor`` beside the OS user) and the audit row each action writes, as a dashboard
action does (bot/web/admin). The worker's and trainer's commands use it too."""

from __future__ import annotations

import getpass
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import click

from bot.settings import ADMIN_NAME

if TYPE_CHECKING:
    from bot.store.db import Database

F = TypeVar("F", bound=Callable[..., Any])


def _actor_name(_ctx: click.Context, _param: click.Parameter, value: str | None) -> str | None:
    # An admin's name, as RIBBIT_ADMIN_TOKENS allows: nothing that could pass in the audit
    # log for another entry ("alice (session) from 10.0.0.1").
    if value is not None and not ADMIN_NAME.match(value):
        raise click.BadParameter("letters, digits, _ . @ - only (an admin's name)")
    return value


def actor_option(command: F) -> F:
    """``--actor NAME`` on a command that changes state: who is acting, for the audit log."""
    return click.option(
        "--actor",
        default=None,
        callback=_actor_name,
        help="Who is acting, for the audit log (default: your OS user name, which is "
        "recorded either way).",
    )(command)


def _os_user() -> str:
    try:
        return getpass.getuser()
    except (OSError, KeyError):  # a container's uid with no passwd entry and no $USER
        return f"uid {os.getuid()}"


def cli_actor(given: str | None) -> str:
    """The audit log's actor for a CLI command: the OS user, or ``--actor`` with the OS
    user beside it (a name typed on the command line proves nothing by itself)."""
    user = _os_user()
    name = (given or "").strip()[:64]
    if name and name != user:
        return f"{name} (cli, os user {user})"
    return f"{user} (cli)"


def audited(db: Database, actor: str, action: str, target: str, run: Callable[[], str]) -> str:
    """Run ``run`` (which says what it did) and write its audit row, as a dashboard action
    is (bot/web/admin): ok with its message, or error with what it raised, raised again. The
    trainer's commands (`ribbit model promote`, `ribbit data delete`...) use it too."""
    from bot.store import audit

    try:
        message = run()
    except Exception as exc:
        audit.record(
            db,
            actor=actor,
            action=action,
            target=target,
            outcome="error",
            detail=f"{type(exc).__name__}: {exc}"[:2000],
        )
        raise
    audit.record(db, actor=actor, action=action, target=target, outcome="ok", detail=message)
    return message
