"""`ribbit eval` up to the point where a model would run: its options, the repository it
accepts (a local clone, or a clone URL over the transports allowed, never ext::), the
model it picks and the refusals in between. The replay policy stands in for weights."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from bot.cli import main
from tests.fakes import make_git_repo
from trainer.cli.backtesting import _repo_name


@pytest.fixture
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A deployment whose model is ready without weights: the replay policy."""
    data = tmp_path / "data"
    replay = tmp_path / "replay.jsonl"
    replay.write_text("")
    monkeypatch.setenv("RIBBIT_DATA_DIR", str(data))
    monkeypatch.setenv("RIBBIT_MODEL__POLICY", "replay")
    monkeypatch.setenv("RIBBIT_MODEL__REPLAY_FILE", str(replay))
    return data


@pytest.fixture
def no_fixes(tmp_path: Path) -> Path:
    """A repository whose only commit has no tests beside its code."""
    repo = tmp_path / "calc"
    make_git_repo(repo, {"calc.py": "x = 1\n"})
    return repo


def _eval(*args: str) -> Result:
    return CliRunner().invoke(main, ["eval", *args])


def _refused(*args: str) -> str:
    result = _eval(*args)
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    return result.output


@pytest.mark.parametrize(
    ("repository", "name"),
    [
        ("https://github.com/acme/calc.git", "acme/calc"),
        ("https://gitlab.example.com/group/sub/calc/", "sub/calc"),
        ("git@github.com:acme/calc.git", "acme/calc"),
        ("/srv/clones/calc", "clones/calc"),
        ("calc", "calc"),
        ("/", "local/repo"),
    ],
)
def test_backtesting_repo_name_from_a_url_or_path(repository: str, name: str) -> None:
    assert _repo_name(repository) == name


def test_backtesting_a_repository_without_fixes(data_dir: Path, no_fixes: Path) -> None:
    result = _eval(str(no_fixes))
    assert result.exit_code == 0, result.output
    assert "no commit on HEAD changes both tests and code" in result.output
    result = _eval(str(no_fixes), "--json", "--name", "acme/calc", "--k", "3")
    report = json.loads(result.output)
    assert (report["repo"], report["k"]) == ("acme/calc", 3)
    assert report["model"].endswith("(replay)") and report["fixes"] == []


def test_backtesting_clones_a_url_over_an_allowed_transport(data_dir: Path, no_fixes: Path) -> None:
    result = _eval(f"file://{no_fixes}", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["repo"] == f"{no_fixes.parent.name}/calc"


def test_backtesting_refuses_ext_transport(data_dir: Path, tmp_path: Path) -> None:
    # ext:: runs a command on the host: a URL must never get that far.
    marker = tmp_path / "pwned"
    out = _refused(f"ext::sh -c touch% {marker}")
    assert "git clone failed" in out
    assert not marker.exists()


def test_backtesting_refuses_an_option_as_a_repository(data_dir: Path, tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    out = _refused("--", f"--upload-pack=touch {marker}")
    assert "is not a repository" in out and not marker.exists()


def test_backtesting_refuses_a_folder_that_is_not_a_repository(
    data_dir: Path, tmp_path: Path
) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    assert "Error:" in _refused(str(empty))


def test_backtesting_refuses_a_version_that_does_not_exist(data_dir: Path, no_fixes: Path) -> None:
    assert "Error: no version 'nope'" in _refused(str(no_fixes), "--version", "nope")


def test_backtesting_refuses_a_model_that_is_not_ready(
    data_dir: Path, no_fixes: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RIBBIT_MODEL__REPLAY_FILE", str(no_fixes / "missing.jsonl"))
    assert "replay policy has no trajectory file" in _refused(str(no_fixes))


@pytest.mark.parametrize("option", ["--last", "--k"])
def test_backtesting_counts_start_at_one(data_dir: Path, no_fixes: Path, option: str) -> None:
    result = _eval(str(no_fixes), option, "0")
    assert result.exit_code == 2 and "0 is not in the range x>=1" in result.output
