"""The CLI as people read it: help on every command and option, --json on every listing,
a message instead of nothing, colour only on a terminal, the gate logs in the report."""

from __future__ import annotations

import json
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from bot.cli import main
from bot.console import progress


def _walk(
    command: click.Command, path: tuple[str, ...]
) -> list[tuple[tuple[str, ...], click.Command]]:
    found = [(path, command)]
    if isinstance(command, click.Group):
        ctx = click.Context(command)
        for name in command.list_commands(ctx):
            sub = command.get_command(ctx, name)
            assert sub is not None, name
            found += _walk(sub, (*path, name))
    return found


COMMANDS = _walk(main, ("ribbit",))


def test_cli_tree_is_walked_whole() -> None:
    names = {" ".join(p) for p, _ in COMMANDS}
    assert {"ribbit jobs show", "ribbit envs list", "ribbit model list", "ribbit gates"} <= names


@pytest.mark.parametrize(("path", "command"), COMMANDS, ids=[" ".join(p) for p, _ in COMMANDS])
def test_cli_command_and_every_option_have_help(
    path: tuple[str, ...], command: click.Command
) -> None:
    assert (command.help or "").strip(), f"{' '.join(path)} has no help text"
    bare = [
        p.opts[0]
        for p in command.params
        if isinstance(p, click.Option) and not (p.help or "").strip()
    ]
    assert not bare, f"{' '.join(path)}: options without help: {bare}"


LISTINGS = [
    (p, c)
    for p, c in COMMANDS
    if p[-1] in {"list", "jobs", "outcomes", "doctor"} or (c.help or "").startswith("List")
]


@pytest.mark.parametrize(("path", "command"), LISTINGS, ids=[" ".join(p) for p, _ in LISTINGS])
def test_cli_every_listing_has_json(path: tuple[str, ...], command: click.Command) -> None:
    assert any("--json" in p.opts for p in command.params), " ".join(path)


@pytest.fixture
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("RIBBIT_DATA_DIR", str(tmp_path))
    monkeypatch.delenv("FORCE_COLOR", raising=False)
    monkeypatch.delenv("NO_COLOR", raising=False)
    return tmp_path


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["jobs"], "no jobs yet"),
        (["jobs", "--state", "failed"], "no jobs matching these filters"),
        (["envs", "list"], "no environments in"),
        (["envs", "list", "--rejected"], "no rejected candidates"),
        (["model", "list"], "no model versions"),
        (["outcomes"], "no outcomes yet"),
    ],
)
def test_cli_empty_listing_says_so(data_dir: Path, args: list[str], message: str) -> None:
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    assert message in result.output
    as_json = CliRunner().invoke(main, [*args, "--json"])
    assert as_json.exit_code == 0, as_json.output
    assert json.loads(as_json.output) == []


def _failed_job(reason: str, repo: str = "acme/calc") -> None:
    from bot.settings import load_settings
    from bot.store.db import Database
    from bot.store.jobs import JobSpec, JobStore

    db = Database(load_settings().effective_database_url)
    db.migrate()
    store = JobStore(db)
    with db.session() as s:
        job = store.create(s, JobSpec(kind="solve", forge="github", repo=repo, issue_number=3))
        assert job is not None
        job_id = job.id
    store.transition(job_id, "running")
    store.transition(job_id, "failed", reason=reason)
    db.dispose()


def test_cli_colour_only_on_a_terminal(data_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _failed_job("tests failed")
    piped = CliRunner().invoke(main, ["jobs"])
    assert "failed" in piped.output and "\x1b[" not in piped.output
    monkeypatch.setenv("FORCE_COLOR", "1")  # what a terminal gets
    coloured = CliRunner().invoke(main, ["jobs"])
    assert "\x1b[31mfailed" in coloured.output
    monkeypatch.setenv("NO_COLOR", "1")
    assert "\x1b[" not in CliRunner().invoke(main, ["jobs"]).output


def test_cli_other_peoples_text_is_never_markup(
    data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FORCE_COLOR", "1")
    _failed_job("[link=https://evil.example]click[/link] [bold red]x", repo="acme/[b]calc")
    out = CliRunner().invoke(main, ["jobs"]).output
    assert "[link=https://evil.example]click[/link] [bold red]x" in out
    assert "acme/[b]calc" in out
    assert "\x1b]8;" not in out  # no terminal hyperlink was made


def test_cli_progress_is_silent_off_a_terminal(capsys: pytest.CaptureFixture[str]) -> None:
    with progress("working", total=2) as steps:
        steps.doing("one")
        steps.advance("two")
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err == ""


def test_cli_gate_report_shows_the_failing_gates_log_tail(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from bot.store.records.gate_report import GateReport, GateResult
    from worker.gates.cli import LOG_TAIL_LINES, _print_human

    log = "\n".join(f"log line {n}" for n in range(1, 101))
    report = GateReport.from_results(
        [
            GateResult("tests", False, logs=log),
            GateResult("hygiene", True, logs="hygiene chatter"),
        ],
        1.0,
    )
    _print_human(report)
    out = capsys.readouterr().out
    assert f"--- tests log (last {LOG_TAIL_LINES} of 100 lines) ---" in out
    assert "log line 100" in out and f"log line {100 - LOG_TAIL_LINES + 1}\n" in out
    assert f"log line {100 - LOG_TAIL_LINES}\n" not in out
    assert "hygiene chatter" not in out  # a gate that passed has nothing to explain
    assert "gates: failed" in out


def test_cli_progress_draws_on_a_terminal_stderr_only(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FORCE_COLOR", "1")  # what a terminal gets
    with progress("calibrating", total=2) as steps:
        steps.advance("calibrated acme__calc-1")
        steps.advance("calibrated acme__calc-2")
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "calibrated acme__calc-2" in captured.err and "2/2" in captured.err
