"""`ribbit eval`'s pieces that need no sandbox: finding a history's fixes, naming the
repository, recording and showing a held-out interval, and the human report."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from bot.cli import main
from tests.fakes import commit_files, git, make_git_repo
from trainer.backtest import BacktestReport, Fix, FixResult, find_fixes, short_diff
from trainer.cli.backtesting import _print_backtest, _repo_name
from trainer.passk import pass_at_1


@pytest.fixture
def history(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    repo = tmp_path / "r"
    make_git_repo(repo, {"a.py": "x = 1\n", "tests/test_a.py": "def test_a():\n    pass\n"})
    git(repo, "checkout", "-q", "-b", "topic")
    commit_files(repo, {"a.py": "x = 2\n", "tests/test_b.py": "def test_b():\n    pass\n"}, "b")
    git(repo, "checkout", "-q", "main")
    git(
        repo,
        "merge",
        "-q",
        "--no-ff",
        "topic",
        "-m",
        "Merge branch 'topic'",
        "-m",
        "Fix x\n\nx was 1.",
    )
    shas = {"merge": git(repo, "rev-parse", "HEAD")}
    shas["docs"] = commit_files(repo, {"README.md": "r\n"}, "docs")
    shas["tests"] = commit_files(repo, {"tests/test_a.py": "def test_a():\n    assert 1\n"}, "t")
    shas["push"] = commit_files(
        repo, {"a.py": "x = 3\n", "tests/test_a.py": "def test_a():\n    assert 3\n"}, "Set x\n"
    )
    return repo, shas


def test_find_fixes_walks_first_parents_for_changes_to_tests_and_code(
    history: tuple[Path, dict[str, str]],
) -> None:
    repo, shas = history
    fixes = find_fixes(repo, 10)
    # The branch's own commit is reached only through its merge; docs-only, tests-only
    # and the root commit are not fixes.
    assert [f.commit for f in fixes] == [shas["push"], shas["merge"]]
    push, merge = fixes
    assert (push.title, push.message) == ("Set x", "Set x")
    assert (merge.title, merge.message) == ("Fix x", "Fix x\n\nx was 1.")
    assert merge.parent == git(repo, "rev-parse", f"{shas['merge']}^1")
    assert [f.commit for f in find_fixes(repo, 1)] == [shas["push"]]
    assert [f.commit for f in find_fixes(repo, 5, rev=shas["tests"])] == [shas["merge"]]


def test_find_fixes_refuses_an_option_for_a_revision(
    history: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    repo, _ = history
    out = tmp_path / "written"
    with pytest.raises(ValueError):
        find_fixes(repo, 3, rev=f"--output={out}")
    assert not out.exists()


@pytest.mark.parametrize(
    ("repository", "name"),
    [
        ("https://github.com/acme/calc.git", "acme/calc"),
        ("git@gitlab.example.com:group/calc.git", "group/calc"),
        ("/srv/git/calc/", "git/calc"),
        ("calc", "calc"),
    ],
)
def test_repo_name_from_a_url_or_path(repository: str, name: str) -> None:
    assert _repo_name(repository) == name


def _fix(sha: str, title: str) -> Fix:
    return Fix(sha * 40, "0" * 40, title, title)


def test_the_human_report_shows_rates_verdicts_and_both_patches(
    capsys: pytest.CaptureFixture[str],
) -> None:
    real = "diff --git a/a.py b/a.py\n--- a/a.py\n+++ b/a.py\n@@ -1 +1 @@\n-x = 1\n+x = 2\n"
    report = BacktestReport(
        "acme/r",
        "v3",
        1,
        [
            FixResult(
                _fix("a", "Fix x"),
                "acme__r-a",
                rollouts=1,
                resolved=1,
                rewarded=0,
                reason="gate_findings",
                model_diff=real,
                real_diff=real,
            ),
            FixResult(
                _fix("b", "Fix y"), "acme__r-b", rollouts=1, reason="empty_patch", real_diff=real
            ),
            FixResult(_fix("c", "Fix z"), rejected="no_fail_to_pass: no test fails\nmore"),
        ],
    )
    _print_backtest(report, "main")
    out = capsys.readouterr().out
    assert "acme/r at main: v3 on its last 3 fix(es)" in out
    assert f"  {'a' * 12}  Fix x\tresolved 1/1, reward 0 (gate_findings)" in out
    assert f"  {'b' * 12}  Fix y\tnot resolved 0/1, reward 0 (empty_patch)" in out
    assert f"  {'c' * 12}  Fix z\tskipped: no_fail_to_pass: no test fails\n" in out
    assert (
        f"resolve rate (tests only, the whole suite): {pass_at_1([(1, 1), (0, 1)]).text()}" in out
    )
    assert f"resolved and gates pass (Ribbit's reward): {pass_at_1([(0, 1), (0, 1)]).text()}" in out
    assert "  the model's patch:\n    diff --git a/a.py b/a.py" in out
    assert "  the model's patch: (none)\n  the real fix:\n    diff --git" in out
    assert report.to_json()["fixes_scored"] == 2


def test_nothing_scored_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    report = BacktestReport("acme/r", "v3", 1, [FixResult(_fix("c", "z"), rejected="timeout: x")])
    _print_backtest(report, "HEAD")
    assert "nothing was scored" in capsys.readouterr().out
    assert report.resolve_rate is None and report.to_json()["resolve_rate"] is None


def test_short_diff_keeps_the_head_and_counts_the_rest() -> None:
    diff = "\n".join(f"l{i}" for i in range(20))
    assert short_diff(diff, 3) == "l0\nl1\nl2\n... (17 more lines)"
    assert short_diff("a\nb", 3) == "a\nb"
    assert short_diff("diff --git a/x b/x\nindex 1ab..2cd 100644\n--- a/x", 3) == (
        "diff --git a/x b/x\n--- a/x"
    )


def test_model_list_shows_the_recorded_interval(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from bot.store.db import Database
    from trainer.evaluate import record_heldout
    from trainer.registry import register
    from worker.settings import load_worker_settings

    monkeypatch.setenv("RIBBIT_DATA_DIR", str(tmp_path / "data"))
    db = Database(load_worker_settings().effective_database_url)
    db.migrate()
    register(db, "old", base_model="base", adapter_path=None, heldout_pass_rate=0.25)
    register(db, "new", base_model="base", adapter_path=None)
    score = pass_at_1([(1, 2), (2, 2), (0, 2), (1, 2)])
    record_heldout(db, "new", score, 2)
    db.dispose()
    runner = CliRunner()
    listed = runner.invoke(main, ["model", "list"])
    assert "old\tcandidate\theld-out 25.0%\t" in listed.output  # scored before intervals
    assert f"new\tcandidate\theld-out 50.0% [{score.low:.1%}-{score.high:.1%}]\t" in listed.output
    rows = {
        v["name"]: v for v in json.loads(runner.invoke(main, ["model", "list", "--json"]).output)
    }
    assert rows["new"]["heldout_pass_rate"] == 0.5
    assert (rows["new"]["heldout_ci_low"], rows["new"]["heldout_ci_high"]) == (
        score.low,
        score.high,
    )
    assert (rows["new"]["heldout_envs"], rows["new"]["heldout_k"]) == (4, 2)
    assert rows["old"]["heldout_ci_low"] is None


def test_train_heldout_needs_a_version_to_record_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RIBBIT_DATA_DIR", str(tmp_path / "data"))
    result = CliRunner().invoke(main, ["train", "--heldout", "split:heldout", "--model", "x"])
    assert result.exit_code != 0 and "--heldout scores the registered version" in result.output


def test_before_uses_the_promoted_versions_comparable_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from bot.store.db import Database
    from trainer import evaluate
    from trainer.calibrate import CalibrationReport
    from trainer.envs.schema import Calibration
    from trainer.registry import promote, register
    from trainer.rl.toy import toy_environment
    from worker.settings import AgentSettings, load_worker_settings

    monkeypatch.setenv("RIBBIT_DATA_DIR", str(tmp_path / "data"))
    db = Database(load_worker_settings().effective_database_url)
    db.migrate()
    register(db, "old", base_model="base", adapter_path=None)
    envs = [toy_environment("0" * 40, instance_id=f"e{i}") for i in range(2)]
    old = CalibrationReport({"e0": Calibration(k=1, solved=0), "e1": Calibration(k=1, solved=1)})
    evaluate.record_heldout(db, "old", old.pass_at_1, 1)
    evaluate.record_results(db, "old", "default", envs, old)
    promote(db, "old", force=True)
    register(db, "new", base_model="base", adapter_path=None)
    scored: list[str] = []

    def fake_evaluate(db: Database, name: str, exam: evaluate.Exam) -> object:
        # The candidate solves everything; what matters here is who gets scored.
        scored.append(name)
        k = exam.k
        chosen = [e for e, _ in exam.envs]
        report = CalibrationReport({e.instance_id: Calibration(k=k, solved=k) for e in chosen})
        evaluate.record_heldout(db, name, report.pass_at_1, k)
        evaluate.record_results(db, name, "default", chosen, report)
        return report

    monkeypatch.setattr(evaluate, "evaluate_version", fake_evaluate)
    # Never opened: the fake evaluation and the record stand in for rollouts.
    two: Any = [(e, tmp_path) for e in envs]
    recipe: Any = object()
    before, after = evaluate.before_and_after(
        db, "new", "base", evaluate.Exam(two, recipe, AgentSettings(), k=1)
    )
    assert scored == ["new"]  # the promoted one's record is the same exam: same envs, k=1
    assert (before.model, before.measured, before.score.rate) == ("old", False, 0.5)
    assert (after.model, after.measured, after.score.rate) == ("new", True, 1.0)
    # Another k: the record does not compare, so the promoted version is scored again.
    scored.clear()
    evaluate.before_and_after(db, "new", "base", evaluate.Exam(two, recipe, AgentSettings(), k=2))
    assert scored == ["old", "new"]
    # As many environments with the same k, but one changed since (#33): scored again.
    scored.clear()
    changed = envs[0].model_copy(update={"problem_statement": "another task"})
    again: Any = [(changed, tmp_path), (envs[1], tmp_path)]
    evaluate.record_results(db, "old", "default", envs, old)
    evaluate.before_and_after(db, "new", "base", evaluate.Exam(again, recipe, AgentSettings(), k=1))
    assert scored == ["old", "new"]
    db.dispose()


def test_eval_clones_a_url_and_says_when_no_fix_is_there(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = tmp_path / "calc"
    make_git_repo(repo, {"calc.py": "x = 1\n", "tests/test_calc.py": "def test():\n    pass\n"})
    commit_files(repo, {"README.md": "r\n"}, "docs")
    replay = tmp_path / "replay.jsonl"
    replay.write_text("")  # never loaded: there is nothing to run it on
    monkeypatch.setenv("RIBBIT_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("RIBBIT_MODEL__POLICY", "replay")
    monkeypatch.setenv("RIBBIT_MODEL__REPLAY_FILE", str(replay))
    runner = CliRunner()
    url = f"file://{repo}"
    said = runner.invoke(main, ["eval", url])
    assert said.exit_code == 0, said.output
    assert "no commit on HEAD changes both tests and code" in said.output
    report = json.loads(runner.invoke(main, ["eval", url, "--json"]).output)
    assert (report["repo"], report["fixes"], report["resolve_rate"]) == (
        f"{tmp_path.name}/calc",
        [],
        None,
    )
    missing = runner.invoke(main, ["eval", f"file://{tmp_path}/nothing-here"])
    assert missing.exit_code == 1 and "git clone failed" in missing.output
    # A transport that runs a command is refused, whatever the host's git allows.
    marker = tmp_path / "ran"
    hostile = runner.invoke(main, ["eval", f"ext::sh -c touch% {marker}"])
    assert hostile.exit_code == 1 and "git clone failed" in hostile.output
    assert not marker.exists()
    unknown = runner.invoke(main, ["eval", str(repo), "--version", "v404"])
    assert unknown.exit_code == 1 and "no version 'v404'" in unknown.output
