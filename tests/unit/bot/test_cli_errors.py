"""A failed `ribbit` command as an operator reads it: one `Error:` line naming what to
change, exit 1, no traceback and no password (issue #36 item 6); the traceback with
--debug or RIBBIT_DEBUG=1."""

from __future__ import annotations

from pathlib import Path

import click
import pytest
from click.testing import CliRunner, Result

from bot.cli import main
from bot.cli_errors import describe_failure
from bot.cli_options import RepoRefType
from bot.settings import Settings
from tests.cli_walk import leaf_commands

UNREACHABLE = "postgresql://u:secret-pw@127.0.0.1:1/x"
# Commands from each package that open the database first thing.
DATABASE_COMMANDS = [
    ["jobs"],
    ["jobs", "show", "abc"],
    ["pause"],
    ["resume", "--repo", "acme/w"],
    ["db", "check"],
    ["db", "upgrade"],
    ["outcomes"],
    ["model", "list"],
    ["model", "rollback"],
    ["data", "list"],
]


@pytest.fixture(autouse=True)
def _no_debug(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RIBBIT_DEBUG", raising=False)


def one_line_error(args: list[str]) -> str:
    """The error line of a command that must fail the operator's way."""
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 1, (args, result.output)
    assert isinstance(result.exception, SystemExit), (args, result.exception)
    assert "Traceback" not in result.output, args
    errors = [line for line in result.output.splitlines() if line.startswith("Error: ")]
    assert len(errors) == 1, (args, result.output)
    return errors[0]


@pytest.mark.parametrize("args", DATABASE_COMMANDS, ids=" ".join)
def test_cli_errors_an_unreachable_database_is_one_line_without_its_password(
    args: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RIBBIT_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("RIBBIT_DATABASE_URL", UNREACHABLE)
    error = one_line_error(args)
    assert "postgresql://u:***@127.0.0.1:1/x" in error
    assert "RIBBIT_DATABASE_URL" in error
    assert "secret-pw" not in CliRunner().invoke(main, args).output


@pytest.mark.parametrize("args", [*DATABASE_COMMANDS, ["notify"]], ids=" ".join)
def test_cli_errors_a_data_dir_under_a_file_is_one_line_naming_it(
    args: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "a-file").write_text("")
    data_dir = tmp_path / "a-file" / "ribbit"
    monkeypatch.setenv("RIBBIT_DATA_DIR", str(data_dir))
    monkeypatch.setenv("RIBBIT_NOTIFY__WEBHOOK_URL", "http://127.0.0.1:1/hook")
    error = one_line_error(args)
    assert f"the data directory {data_dir}" in error, error
    assert "RIBBIT_DATA_DIR" in error


def test_cli_errors_an_unexpected_failure_is_one_line_with_the_way_to_see_more(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RIBBIT_DATA_DIR", str(tmp_path))

    def broken(*_args: object, **_kwargs: object) -> None:
        raise RuntimeError("the store fell over\nsecond line")

    monkeypatch.setattr("bot.cli.Runtime.open", broken)
    error = one_line_error(["jobs"])
    assert error.startswith("Error: RuntimeError: the store fell over (unexpected; run again")
    assert "--debug" in error


@pytest.mark.parametrize(
    ("args", "env"), [(["--debug", "jobs"], {}), (["jobs"], {"RIBBIT_DEBUG": "1"})]
)
def test_cli_errors_debug_shows_the_exception_itself(
    args: list[str], env: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RIBBIT_DATA_DIR", str(tmp_path))
    for name, value in env.items():
        monkeypatch.setenv(name, value)

    def broken(*_args: object, **_kwargs: object) -> None:
        raise RuntimeError("the store fell over")

    monkeypatch.setattr("bot.cli.Runtime.open", broken)
    result: Result = CliRunner().invoke(main, args)
    # Raised through click, so the interpreter prints its traceback.
    assert isinstance(result.exception, RuntimeError), result.output


def test_cli_errors_an_unreachable_broker_names_its_setting_without_the_password() -> None:
    from kombu.exceptions import OperationalError

    settings = Settings(broker_url="redis://:broker-pw@127.0.0.1:1/0")
    try:
        try:
            raise ConnectionRefusedError(111, "Connection refused")
        except ConnectionRefusedError as refused:
            raise OperationalError("Error 111 connecting to 127.0.0.1:1.") from refused
    except OperationalError as exc:
        message = describe_failure(exc, settings)
    assert message.startswith("cannot reach the broker redis://:***@127.0.0.1:1/0: Error 111")
    assert "RIBBIT_BROKER_URL" in message
    assert "broker-pw" not in message


def test_cli_errors_a_configured_secret_never_reaches_the_message() -> None:
    settings = Settings(admin_token="kT9vR2mXq8LwZ4nB7cYp3HdF6sJ1aE5uW0")
    message = describe_failure(ValueError("bad token kT9vR2mXq8LwZ4nB7cYp3HdF6sJ1aE5uW0"), settings)
    assert "kT9vR2mXq8" not in message
    assert message.startswith("ValueError: bad token ***")


def test_cli_errors_a_missing_postgres_driver_says_which_extra() -> None:
    exc = ModuleNotFoundError("No module named 'psycopg'", name="psycopg")
    assert "ribbit[postgres]" in describe_failure(exc, None)


# -- every command ---------------------------------------------------------------------------

LEAVES = leaf_commands()


def _value_for(param: click.Parameter, tmp_path: Path) -> str:
    """A value click accepts for ``param``, so the command itself is reached."""
    kind = param.type
    if isinstance(kind, click.Path):
        if kind.dir_okay:
            return str(tmp_path)
        target = tmp_path / "given-file"
        target.write_text("{}\n")
        return str(target)
    if isinstance(kind, click.Choice):
        return str(kind.choices[0])
    if isinstance(kind, RepoRefType):
        return "acme/widget"
    if isinstance(kind, (click.types.IntParamType, click.types.FloatParamType)):
        return "1"
    return "x"


def _required_args(command: click.Command, tmp_path: Path) -> list[str]:
    args: list[str] = []
    for param in command.params:
        if isinstance(param, click.Option) and param.required:
            args += (
                [param.opts[0]] if param.is_flag else [param.opts[0], _value_for(param, tmp_path)]
            )
    for param in command.params:
        if isinstance(param, click.Argument) and param.required:
            given = _value_for(param, tmp_path)
            args += ["--", given] if param.nargs == -1 else [given]
    return args


def test_cli_errors_the_walk_reaches_every_package_s_commands() -> None:
    # A walk that missed the entry points would leave most commands out of the test below.
    assert {("serve",), ("worker",), ("gates",), ("train",), ("envs", "build")} <= set(LEAVES)
    assert len(LEAVES) >= 40


@pytest.mark.parametrize("path", sorted(LEAVES), ids=" ".join)
def test_cli_errors_every_command_s_unexpected_failure_is_one_line(
    path: tuple[str, ...], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Whatever fails inside any command, registered by any package, reaches the operator
    # as one line: the command is made to fail the way a bug would, after click parsed it.
    monkeypatch.setenv("RIBBIT_DATA_DIR", str(tmp_path / "data"))
    command = LEAVES[path]

    def broken(*_args: object, **_kwargs: object) -> None:
        raise RuntimeError("the command fell over\nsecond line")

    monkeypatch.setattr(command, "callback", broken)
    error = one_line_error([*path, *_required_args(command, tmp_path)])
    assert error.startswith("Error: RuntimeError: the command fell over (unexpected;"), error
    assert "second line" not in error
