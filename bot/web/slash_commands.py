"""Parsing `/ribbit <command> [text]` out of a comment. The text after the command is data
for the agent's prompt; it is never interpolated into a shell command or a path."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

CommandName = Literal["retry", "stop", "revise", "explain", "help"]
KNOWN: tuple[CommandName, ...] = ("retry", "stop", "revise", "explain", "help")
MAX_INSTRUCTIONS = 8_000


@dataclass(frozen=True)
class Command:
    name: CommandName
    text: str = ""
    unknown: str | None = None  # the word given, when it was not a known command


def parse_command(body: str, prefix: str = "/ribbit") -> Command | None:
    """The first line that starts with ``prefix`` is the command; None if there is none.

    Only a line *starting* with the prefix counts, so quoting someone's command
    ("> /ribbit stop") in a reply does not run it.
    """
    lines = body.splitlines()
    for index, line in enumerate(lines):
        stripped = line.strip()
        if not stripped.startswith(prefix):
            continue
        rest = stripped[len(prefix) :]
        if rest and not rest[0].isspace():
            continue  # "/ribbitx" is not ours
        words = rest.split(maxsplit=1)
        word = words[0].lower() if words else "help"
        inline = words[1] if len(words) > 1 else ""
        following = "\n".join(lines[index + 1 :]).strip()
        text = "\n".join(part for part in (inline, following) if part)[:MAX_INSTRUCTIONS]
        if word in KNOWN:
            return Command(name=word, text=text)
        return Command(name="help", unknown=word[:40])
    return None
