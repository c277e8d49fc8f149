"""One meaning per flag name across every `ribbit` command (issue #36 item 6): --repo is a
repository on a forge, --checkout a local directory, --backend the one sandbox-backend
list; the directory's old --repo spelling still works for a release, with a warning."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from bot.cli import main
from bot.cli_options import REPO_HELP, RepoRefType, checkout_option
from tests.cli_walk import cli_commands
from tests.unit.worker.gates.helpers import make_patch, repo_with
from worker.sandbox.backend_option import BACKEND_CHOICE, BACKENDS
from worker.settings import SandboxSettings

COMMANDS = cli_commands()


def _with(flag: str) -> list[tuple[tuple[str, ...], click.Option]]:
    return [
        (path, param)
        for path, command in COMMANDS.items()
        for param in command.params
        if isinstance(param, click.Option) and flag in param.opts
    ]


def test_the_walk_reaches_the_registered_commands() -> None:
    # A walk that misses the entry points would make every test below vacuous.
    for path in [("jobs",), ("gates",), ("run",), ("envs", "build"), ("data", "delete")]:
        assert path in COMMANDS


def test_repo_is_always_a_forge_repository() -> None:
    shown = [(path, p) for path, p in _with("--repo") if not p.hidden]
    assert len(shown) >= 10
    for path, param in shown:
        assert isinstance(param.type, RepoRefType), path
        assert REPO_HELP in (param.help or ""), path


def test_a_hidden_repo_is_only_the_deprecated_checkout_spelling() -> None:
    hidden = [(path, p) for path, p in _with("--repo") if p.hidden]
    assert sorted(path for path, _ in hidden) == [
        ("envs", "build"),
        ("envs", "from-outcomes"),
        ("gates",),
        ("run",),
    ]
    checkouts = {path for path, _ in _with("--checkout")}
    for path, param in hidden:
        assert path in checkouts and (param.help or "").startswith("Deprecated spelling"), path


def test_checkout_is_always_an_existing_directory() -> None:
    found = _with("--checkout")
    assert sorted(path for path, _ in found) == [
        ("envs", "build"),
        ("envs", "from-outcomes"),
        ("gates",),
        ("run",),
        ("sandbox", "run"),
    ]
    for path, param in found:
        assert isinstance(param.type, click.Path), path
        assert param.type.exists and param.type.dir_okay and not param.type.file_okay, path
        assert "a local repository directory" in (param.help or ""), path


def test_backend_has_one_choice_list_everywhere() -> None:
    found = _with("--backend")
    assert sorted(path for path, _ in found) == [("gates",), ("run",), ("sandbox", "run")]
    assert BACKENDS == ("auto", "docker", "bubblewrap")
    # The setting takes exactly what the flag offers.
    assert SandboxSettings.model_validate({"backend": "bubblewrap"}).backend == "bubblewrap"
    for path, param in found:
        assert param.type is BACKEND_CHOICE, path
        assert tuple(param.type.choices) == BACKENDS, path
        assert param.default is None, path  # the settings' backend where not given


def test_backend_local_is_read_as_auto_with_a_warning(capsys: pytest.CaptureFixture[str]) -> None:
    assert BACKEND_CHOICE.convert("local", None, None) == "auto"
    [warning] = capsys.readouterr().err.splitlines()
    assert "--backend local is deprecated" in warning and "auto" in warning
    with pytest.raises(click.BadParameter):
        BACKEND_CHOICE.convert("vm", None, None)


# -- the deprecated spelling ----------------------------------------------------------------


@click.command()
@checkout_option("The repository")
def show(checkout: Path) -> None:
    click.echo(f"checkout={checkout}")


def test_checkout_option_takes_the_old_spelling_with_one_warning_line(tmp_path: Path) -> None:
    new = CliRunner().invoke(show, ["--checkout", str(tmp_path)])
    assert new.exit_code == 0 and new.stdout == f"checkout={tmp_path}\n" and new.stderr == ""
    old = CliRunner().invoke(show, ["--repo", str(tmp_path)])
    assert old.exit_code == 0 and old.stdout == new.stdout
    [warning] = old.stderr.splitlines()
    assert warning.startswith("warning: --repo PATH is deprecated") and "--checkout" in warning
    both = CliRunner().invoke(show, ["--repo", str(tmp_path), "--checkout", str(tmp_path)])
    assert both.exit_code == 2 and "give --checkout only" in both.output
    neither = CliRunner().invoke(show, [])
    assert neither.exit_code == 2 and "Missing option '--checkout'" in neither.output
    assert "--repo" not in CliRunner().invoke(show, ["--help"]).output


def test_gates_with_the_old_spelling_judges_the_same(tmp_path: Path) -> None:
    repo, _ = repo_with(tmp_path, {"app.py": "x = 1\n"})
    patch = tmp_path / "p.diff"
    patch.write_text(make_patch(repo, {"app.py": "x = 2\n"}))
    args = ["--patch", str(patch), "--no-tests", "--json"]
    new = CliRunner().invoke(main, ["gates", "--checkout", str(repo), *args])
    old = CliRunner().invoke(main, ["gates", "--repo", str(repo), *args])
    assert new.exit_code == old.exit_code == 3, (new.output, old.output)
    judged = [json.loads(r.stdout) for r in (new, old)]
    assert [(j["verdict"], j["summary"]) for j in judged] == [
        ("unverified", judged[0]["summary"])
    ] * 2
    assert "deprecated" in old.stderr and "deprecated" not in new.stderr


def test_a_local_directory_has_no_other_shown_name() -> None:
    # `sandbox run` called it --workspace; only the hidden deprecated spelling is left.
    assert not [path for path, p in _with("--workspace") if not p.hidden]
    [(path, old)] = _with("--workspace")
    assert path == ("sandbox", "run") and (old.help or "").startswith("Deprecated spelling")


def test_sandbox_run_with_the_old_spelling_runs_over_the_same_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import contextlib

    import worker.sandbox.cli as sandbox_cli
    from worker.sandbox.base import ExecResult
    from worker.sandbox.setup import EgressRun

    opened: list[Path] = []

    @contextlib.contextmanager
    def open_sandbox(_settings: object, checkout: Path, *, network: bool) -> Iterator[object]:
        opened.append(checkout)
        yield object()

    def exec_with_egress(_sb: object, argv: list[str], *_a: object, **_k: object) -> EgressRun:
        return EgressRun(ExecResult(0, " ".join(argv) + "\n", "", 0.0), False, ())

    monkeypatch.setattr(sandbox_cli, "open_sandbox", open_sandbox)
    monkeypatch.setattr(sandbox_cli, "exec_with_egress", exec_with_egress)
    new = CliRunner().invoke(main, ["sandbox", "run", "--checkout", str(tmp_path), "--", "ls"])
    old = CliRunner().invoke(main, ["sandbox", "run", "--workspace", str(tmp_path), "--", "ls"])
    assert new.exit_code == old.exit_code == 0, (new.output, old.output)
    assert opened == [tmp_path, tmp_path]
    assert new.stdout == old.stdout == "ls\n" and new.stderr == ""
    [warning] = old.stderr.splitlines()
    assert warning.startswith("warning: --workspace PATH is deprecated") and "--checkout" in warning


def test_checkout_option_knows_each_old_spelling_it_is_given() -> None:
    with pytest.raises(ValueError, match="no old spelling"):
        checkout_option("The repository", deprecated_alias="--dir")


# -- validation ----------------------------------------------------------------------------


REPO_COMMANDS = sorted(path for path, p in _with("--repo") if not p.hidden)


@pytest.mark.parametrize("path", REPO_COMMANDS, ids=" ".join)
def test_a_bad_repository_name_is_one_line_and_no_traceback(
    path: tuple[str, ...], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RIBBIT_DATA_DIR", str(tmp_path))
    # Typed first: click checks it before any other option and before the command runs.
    result = CliRunner().invoke(main, [*path, "--repo", "not a repo"])
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output and result.exception is not None
    errors = [line for line in result.output.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1 and "Invalid value for '--repo'" in errors[0], result.output
    assert "owner/name" in errors[0]
    assert result.output.rstrip().endswith(errors[0])


@pytest.mark.parametrize("command", ["build", "from-outcomes"])
def test_envs_checks_the_name_it_is_given(command: str, tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["envs", command, "--name", "acme", "--forge", "github"])
    assert result.exit_code == 2, result.output
    assert "Invalid value for '--name'" in result.output and "Traceback" not in result.output


# -- --json ---------------------------------------------------------------------------------

# Each command whose output a script reads (issue #36 item 6 named the first seven).
SCRIPT_READ = [
    ("pause",),
    ("resume",),
    ("model", "promote"),
    ("model", "rollback"),
    ("model", "verify"),
    ("db", "check"),
    ("sandbox", "check"),
    ("doctor",),
    ("jobs", "show"),
    ("outcomes",),
    ("model", "list"),
    ("envs", "list"),
    ("data", "list"),
    ("prs", "rejudge"),
    # A score a script compares or gates a release on (issue #36's audit).
    ("model", "evaluate"),
    ("model", "evaluate-base"),
    ("envs", "calibrate"),
    # What an action did, that a deploy script or cron job checks: the revision reached,
    # the digest pulled, what was deleted, pruned, exported or revoked, a repository's line,
    # which environments a split held out, which an import took or refused.
    ("db", "upgrade"),
    ("model", "pull"),
    ("data", "delete"),
    ("data", "export"),
    ("data", "prune"),
    ("data", "visibility"),
    ("envs", "split"),
    ("envs", "import"),
    ("envs", "from-outcomes"),  # as envs build --json, for each environment it built
    ("envs", "image"),  # the tag a training stack pulls, for each environment
]


@pytest.mark.parametrize("path", SCRIPT_READ, ids=" ".join)
def test_a_command_a_script_reads_has_json(path: tuple[str, ...]) -> None:
    [option] = [p for p in COMMANDS[path].params if "--json" in getattr(p, "opts", ())]
    assert isinstance(option, click.Option) and option.is_flag, path
