"""`ribbit eval` up to the point where a model would run: its options, the repository it
accepts (a local clone, or a clone URL over the transports allowed, never ext::), the
model it picks and the refusals in between. The replay policy stands in for weights."""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path

import pytest

from tests.fakes import make_git_repo
from tests.unit.trainer.cli.invoke import refused, run
from trainer.backtest import BacktestReport, Fix, FixResult
from trainer.cli.backtesting import _print_backtest, _repo_name

_eval = partial(run, "eval")
_refused = partial(refused, "eval")


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


# -- the printed report ------------------------------------------------------------------
def _fix(commit: str, title: str) -> Fix:
    return Fix(commit=commit * 40, parent="0" * 40, title=title, message=title)


def test_backtesting_prints_each_fix_and_the_rates(capsys: pytest.CaptureFixture[str]) -> None:
    real = "diff --git a/calc.py b/calc.py\nindex 1..2 100644\n+return a + b\n"
    report = BacktestReport(
        "acme/calc",
        "v1",
        1,
        [
            FixResult(
                _fix("a", "fix add"),
                rollouts=1,
                resolved=1,
                swebench=1,
                rewarded=1,
                reason="solved",
                model_diff=real,
                real_diff=real,
            ),
            FixResult(
                _fix("b", "fix mul"), rollouts=1, swebench=1, reason="tests_failed", real_diff=real
            ),
            FixResult(_fix("c", "fix div"), rejected="no_fail_to_pass: nothing fails\nmore"),
        ],
    )
    _print_backtest(report, "main")
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "acme/calc at main: v1 on its last 3 fix(es)"
    assert out[1] == f"  {'a' * 12}  fix add\tresolved 1/1, gates pass"
    assert out[2] == f"  {'b' * 12}  fix mul\tnot resolved 0/1, reward 0 (tests_failed)"
    # A fix that could not be built: its reason's first line, not scored.
    assert out[3] == f"  {'c' * 12}  fix div\tskipped: no_fail_to_pass: nothing fails"
    assert out[4].startswith("resolve rate (tests only, the whole suite): 50.0%")
    # SWE-bench's harness rule counted the second fix's rollout resolved too.
    assert out[5].startswith("resolve rate (SWE-bench's harness rule): 100.0%")
    assert out[6].startswith("resolved and gates pass (Ribbit's reward): 50.0%")
    text = "\n".join(out)
    assert f"{'a' * 12} fix add: resolved\n  the model's patch:\n    diff --git" in text
    assert f"{'b' * 12} fix mul: not resolved\n  the model's patch: (none)\n  the real fix:" in text
    assert "index 1..2" not in text  # blob ids left out of the shown diffs


def test_backtesting_prints_when_nothing_was_scored(capsys: pytest.CaptureFixture[str]) -> None:
    report = BacktestReport("acme/calc", "v1", 1, [FixResult(_fix("c", "x"), rejected="r")])
    _print_backtest(report, "HEAD")
    out = capsys.readouterr().out
    assert out.splitlines()[-1] == "no fix could be built into an environment; nothing was scored"
    assert "resolve rate" not in out
