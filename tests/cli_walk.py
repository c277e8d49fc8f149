"""Every command the ``ribbit`` group offers, walked through its lazy group so the ones
other packages register as entry points are reached too: for the tests that hold a rule
over all of them (tests/unit/bot/test_cli_flags.py, test_cli_errors.py)."""

from __future__ import annotations

from collections.abc import Iterator

import click


def _walk(
    group: click.Group, ctx: click.Context, path: tuple[str, ...]
) -> Iterator[tuple[tuple[str, ...], click.Command]]:
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        assert command is not None, name
        yield (*path, name), command
        if isinstance(command, click.Group):
            yield from _walk(command, click.Context(command, parent=ctx), (*path, name))


def cli_commands() -> dict[tuple[str, ...], click.Command]:
    """Each command and group by its path under ``ribbit`` (``("envs", "build")``)."""
    from bot.cli import main

    return dict(_walk(main, click.Context(main), ()))


def leaf_commands() -> dict[tuple[str, ...], click.Command]:
    """The commands that run something (not the groups that hold them)."""
    return {p: c for p, c in cli_commands().items() if not isinstance(c, click.Group)}
