"""Running a `ribbit` command group in process, as an operator would at a shell."""

from __future__ import annotations

from click.testing import CliRunner, Result

from bot.cli import main


def run(group: str, *args: str) -> Result:
    return CliRunner().invoke(main, [group, *args])


def ok(group: str, *args: str) -> str:
    """The output of a command that must succeed."""
    result = run(group, *args)
    assert result.exit_code == 0, result.output
    return result.output


def refused(group: str, *args: str) -> str:
    """The output of a command that must refuse: exit 1 with a message, no traceback."""
    result = run(group, *args)
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    return result.output
