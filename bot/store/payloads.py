"""What a job carries besides its issue and pull request: one typed record per job kind.

Intake writes them (bot/web/handlers/), the worker's pipelines read them (worker/pipelines/),
and both go through this module, so no reader has to know how another kind's payload
is spelled. They are stored in the ``jobs.instructions`` column in the forms that column
has always held (plain text, a JSON command, ``bot``/``human``), so every stored job
reads back the same after an upgrade and no migration rewrites rows:

======== ====================== ===================================================
kind     payload                stored as
======== ====================== ===================================================
solve    :class:`PersonAsks`    the text (``/ribbit retry <text>``)
revise   :class:`PersonAsks`    the text (a review's body, ``/ribbit revise <text>``)
help     :class:`UnknownWord`   the word that was not a command
command  :class:`CommandOrder`  JSON ``{"command", "target", "text"}``
outcome  :class:`OutcomeOf`     ``bot`` (the bot's PR closed) or ``human`` (a person's fix)
explain  none
======== ====================== ===================================================
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Literal, get_args

OrderName = Literal["stop", "retry", "revise"]


class PayloadError(ValueError):
    """A stored payload that its job's kind cannot read."""


@dataclass(frozen=True)
class PersonAsks:
    """What a person asked the agent to do, in their words (a retry's text, a review)."""

    text: str


@dataclass(frozen=True)
class UnknownWord:
    """The word after ``/ribbit`` that is no command, for the help reply to name."""

    word: str


@dataclass(frozen=True)
class CommandOrder:
    """A ``/ribbit stop|retry|revise`` that the worker carries out once it has checked
    the person's write access (intake cannot ask the forge)."""

    name: OrderName
    target: str | None  # the active job it stops or supersedes, if there was one
    text: str = ""  # what follows the command, handed to the new job


@dataclass(frozen=True)
class OutcomeOf:
    """Whose pull request closed: the bot's draft, or a person's fix for an issue the
    bot worked on."""

    author: Literal["bot", "human"]


JobPayload = PersonAsks | UnknownWord | CommandOrder | OutcomeOf


def _payload_type(kind: str) -> type[JobPayload] | None:
    """The record a job of ``kind`` carries (None: it carries nothing)."""
    # The job-kind table names each kind's record, so it imports this module: read late.
    from bot.store.kinds import PAYLOAD_FOR_KIND

    return PAYLOAD_FOR_KIND.get(kind)


def encode_payload(kind: str, payload: JobPayload | None) -> str | None:
    """The column value for ``payload`` on a job of ``kind``; refuses a payload of
    another kind's type (a bug at the caller, caught before it is stored)."""
    if payload is None:
        return None
    expected = _payload_type(kind)
    if not isinstance(payload, expected or ()):
        raise PayloadError(f"a {kind} job carries no {type(payload).__name__}")
    if isinstance(payload, PersonAsks):
        return payload.text or None
    if isinstance(payload, UnknownWord):
        return payload.word or None
    if isinstance(payload, OutcomeOf):
        return payload.author
    return json.dumps({"command": payload.name, "target": payload.target, "text": payload.text})


def decode_payload(kind: str, stored: str | None) -> JobPayload | None:
    """The typed payload of a job of ``kind`` from its column value; raises
    :class:`PayloadError` for a value that kind cannot hold (a hand-edited row)."""
    expected = _payload_type(kind)
    if expected is None or stored is None:
        return None
    if expected is PersonAsks:
        return PersonAsks(stored) if stored.strip() else None
    if expected is UnknownWord:
        return UnknownWord(stored) if stored else None
    if expected is OutcomeOf:
        if stored not in ("bot", "human"):
            raise PayloadError(f"an outcome job names {stored!r}, not bot or human")
        return OutcomeOf(stored)  # type: ignore[arg-type]
    try:
        data = json.loads(stored)
        name, target = data["command"], data["target"]
        text = data.get("text") or ""
    except (ValueError, KeyError, TypeError):
        raise PayloadError("malformed command job") from None
    if name not in get_args(OrderName):
        raise PayloadError(f"unknown command {name!r}")
    if target is not None and not isinstance(target, str):
        raise PayloadError("malformed command job")
    if not isinstance(text, str):
        raise PayloadError("malformed command job")
    return CommandOrder(name, target, text)
