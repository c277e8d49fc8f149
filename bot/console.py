"""What the ``ribbit`` commands print, through rich: colour and progress only when the
output is a terminal (and NO_COLOR is unset), plain text for pipes, files and scripts.

Consoles are made per call, never at import: a command's stdout may be swapped (tests,
``ribbit ... | tee``) after this module is loaded. Markup is off: repository names,
failure reasons and logs are other people's text, and ``[link=...]`` in them must print
as it is, not be interpreted.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager

import click
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)
from rich.text import Text

STATE_STYLES = {
    "queued": "cyan",
    "held": "yellow",
    "running": "blue",
    "succeeded": "green",
    "passed": "green",
    "merged": "green",
    "failed": "red",
    "closed": "red",
    "cancelled": "magenta",
}


def stdout() -> Console:
    return Console(highlight=False, markup=False, emoji=False, soft_wrap=True)


def stderr() -> Console:
    return Console(stderr=True, highlight=False, markup=False, emoji=False, soft_wrap=True)


def styled(text: str, state: str | None = None, *, style: str | None = None) -> Text:
    """``text`` in the colour of ``state`` (or ``style``); plain where colour is off."""
    return Text(text, style=style or STATE_STYLES.get(state or "", ""))


def line(*parts: str | Text) -> None:
    """One line on stdout, from plain and styled parts."""
    out = Text()
    for part in parts:
        out.append(part)
    stdout().print(out)


def echo_json(value: object) -> None:
    """What a ``--json`` command prints on stdout: ``value`` indented by two, as the
    listings (``jobs``, ``model list``, ``envs list``) always printed, so every command's
    object reads alike. Through click, not rich: no wrapping or colour may touch it."""
    click.echo(json.dumps(value, indent=2))


def empty(message: str) -> None:
    """Say that there is nothing to list (and what would make something), never print
    nothing at all."""
    stdout().print(Text(message, style="dim"))


class Steps:
    """A running progress display (a no-op off a terminal)."""

    def __init__(self, progress: Progress | None, task: TaskID | None) -> None:
        self._progress, self._task = progress, task

    def doing(self, what: str) -> None:
        if self._progress is not None and self._task is not None:
            self._progress.update(self._task, description=what)

    def advance(self, what: str | None = None) -> None:
        if self._progress is not None and self._task is not None:
            self._progress.update(self._task, advance=1, description=what)


@contextmanager
def progress(description: str, total: int | None = None) -> Iterator[Steps]:
    """A bar (``total`` steps) or a spinner with the elapsed time, on stderr while the
    work runs. Off a terminal nothing is shown: scripts read stdout, often as JSON."""
    console = stderr()
    if not console.is_terminal:
        yield Steps(None, None)
        return
    columns = [SpinnerColumn(), TextColumn("{task.description}")]
    if total is not None:
        columns += [BarColumn(), MofNCompleteColumn()]
    columns.append(TimeElapsedColumn())
    with Progress(*columns, console=console, transient=True) as bar:
        yield Steps(bar, bar.add_task(description, total=total))
