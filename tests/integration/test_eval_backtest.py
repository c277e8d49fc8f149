"""``ribbit eval`` on a small repository's own history, through the real sandbox
(bubblewrap), the one environment builder, the production episode and the real
grading. The history holds two fixes that touched tests (one merged as a pull
request, one pushed), a README change and a test-only change (neither a fix); the
replayed model fixes add() and so solves the first fix and not the second."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from bot.cli import main
from tests.fakes import LocalDirSandbox, ScriptedPolicy, commit_files, git, make_git_repo
from tests.plugins.e2e import xml_call
from tests.support import require_service

pytestmark = pytest.mark.integration

CALC = "def add(a, b):\n    return a - b\n\n\ndef mul(a, b):\n    return a + b\n"
FILES = {
    "calc.py": CALC,
    # mul(2, 2) is 4 either way: passes before and after both fixes.
    "tests/test_base.py": "from calc import mul\n\n\ndef test_mul_two():\n"
    "    assert mul(2, 2) == 4\n",
    ".ribbit.yml": "test: python3 -m pytest -q -p no:cacheprovider\n",
}
FIXED = "def add(a, b):\n    return a + b\n\n\ndef mul(a, b):\n    return a * b\n"
TEST_ADD = "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"
TEST_MUL = "from calc import mul\n\n\ndef test_mul():\n    assert mul(2, 3) == 6\n"
# Knows one fix: add(). On the mul fix's base add() is already right, so its Edit
# finds nothing and its only change is a test file, which grading resets.
SCRIPT = [
    xml_call("Read", file_path="calc.py"),
    xml_call("Edit", file_path="calc.py", old_string="return a - b", new_string="return a + b"),
    xml_call(
        "Write",
        file_path="tests/test_add.py",
        content="from calc import add\n\n\ndef test_add_two_numbers():\n"
        "    assert add(2, 3) == 5\n",
    ),
    "Fixed add() and added a test.",
]


def _history(repo: Path) -> dict[str, str]:
    base = make_git_repo(repo, FILES)
    git(repo, "checkout", "-q", "-b", "fix-add")
    commit_files(
        repo,
        {"calc.py": CALC.replace("a - b", "a + b"), "tests/test_add.py": TEST_ADD},
        "add the numbers",
    )
    git(repo, "checkout", "-q", "main")
    git(
        repo,
        "merge",
        "-q",
        "--no-ff",
        "fix-add",
        "-m",
        "Merge pull request #1 from acme/fix-add",
        "-m",
        "add() subtracts\n\nadd(2, 3) returns -1.",
    )
    merged = git(repo, "rev-parse", "HEAD")
    commit_files(repo, {"README.md": "calc\n"}, "Add a README")
    readme = git(repo, "rev-parse", "HEAD")
    mul_fix = commit_files(
        repo,
        {"calc.py": FIXED, "tests/test_mul.py": TEST_MUL},
        "mul() adds\n\nmul(2, 3) returns 5.",
    )
    commit_files(repo, {"tests/test_add.py": TEST_ADD + "\n# more to come\n"}, "Note in a test")
    return {"base": base, "merged": merged, "readme": readme, "mul": mul_fix}


def _record(script: list[str], path: Path, source: Path) -> Path:
    """The script as a trajectory the replay policy plays back (the same agent loop)."""
    from worker.agent import AgentTask, run_agent
    from worker.settings import AgentSettings

    with LocalDirSandbox(source) as sandbox:
        result = run_agent(
            AgentTask(title="t", body="b"), sandbox, ScriptedPolicy(script), AgentSettings()
        )
    assert result.exit_reason == "agent", result.error
    result.trajectory.write_jsonl(path, append=False)
    return path


def test_eval_reports_the_resolve_rate_and_examples_of_the_last_fixes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    require_service(shutil.which("bwrap") is not None, "bubblewrap")
    repo = tmp_path / "calc"
    shas = _history(repo)
    scratch = tmp_path / "scratch"
    make_git_repo(scratch, FILES)
    replay = _record(SCRIPT, tmp_path / "replay.jsonl", scratch)
    monkeypatch.setenv("RIBBIT_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("RIBBIT_SANDBOX__BACKEND", "bubblewrap")
    monkeypatch.setenv("RIBBIT_MODEL__POLICY", "replay")
    monkeypatch.setenv("RIBBIT_MODEL__REPLAY_FILE", str(replay))

    result = CliRunner().invoke(
        main,
        ["eval", str(repo), "--last", "5", "--name", "acme/calc", "--reruns", "1", "--json"],
        catch_exceptions=False,
    )
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["repo"] == "acme/calc" and report["model"].endswith("(replay)")
    # Newest first; the README and the test-only commits are not fixes.
    assert [f["commit"] for f in report["fixes"]] == [shas["mul"], shas["merged"]]
    mul, add = report["fixes"]
    assert add["title"] == "add() subtracts"  # the pull request's title, not git's merge line
    assert add["instance_id"] == f"acme__calc-{shas['merged'][:12]}"
    assert (add["built"], add["resolved"], add["rewarded"], add["reason"]) == (True, 1, 1, "solved")
    assert "-    return a - b\n+    return a + b" in add["model_diff"]
    assert "-    return a - b\n+    return a + b" in add["real_diff"]
    assert "tests/" not in add["real_diff"]  # the fix's code change; its tests are the grader's
    assert (mul["built"], mul["resolved"], mul["rewarded"]) == (True, 0, 0)
    assert mul["reason"] == "tests_failed" and mul["title"] == "mul() adds"
    assert "calc.py" not in mul["model_diff"] and "tests/test_add.py" in mul["model_diff"]
    assert "+    return a * b" in mul["real_diff"]
    assert (report["fixes_found"], report["fixes_scored"], report["k"]) == (2, 2, 1)
    # 1 of 2: Wilson's 95% interval over two environments.
    assert report["resolve_rate"] == report["reward_rate"]
    rate = report["resolve_rate"]
    assert (rate["rate"], rate["envs"]) == (0.5, 2)
    assert (round(rate["ci_low"], 4), round(rate["ci_high"], 4)) == (0.0945, 0.9055)
