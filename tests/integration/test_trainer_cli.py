"""``ribbit train`` end to end: stored environment, the configured real sandbox, the real
reward, the tiny model. A random model never solves the task, so every group has zero
variance and is filtered; the run must still finish, checkpoint and record itself."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from bot.cli import main
from bot.forges.base import RepoRef
from bot.model_lines import set_visibility
from bot.store.db import Database
from tests.plugins.trainer import PYTEST, FixRepo, calc_environment
from tests.support import require_service
from trainer.envs.folders import EnvironmentFolders
from worker.settings import load_worker_settings


@pytest.mark.integration
def test_train_command_runs_on_the_bubblewrap_sandbox(
    tiny_model_dir: Path,
    fix_with_new_test: FixRepo,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    require_service(shutil.which("bwrap") is not None, "bubblewrap")
    data = tmp_path / "data"
    monkeypatch.setenv("RIBBIT_DATA_DIR", str(data))
    monkeypatch.setenv("RIBBIT_SANDBOX__BACKEND", "bubblewrap")
    env = calc_environment(
        fix_with_new_test, test_command=PYTEST.replace(sys.executable, "python3")
    )
    # github:acme/calc, public: the default line's. One copy to train on, one held out
    # (#33: training never reads a held-out environment, and scoring reads only those).
    env = env.model_copy(
        update={"provenance": env.provenance.model_copy(update={"forge": "github"})}
    )
    # The store keeps one copy of a fix per repository: the held-out one is a fork's.
    heldout = env.model_copy(
        update={"instance_id": "acme__calc2-1", "repo": "acme/calc2", "split": "heldout"}
    )
    EnvironmentFolders(data / "trainer").add(env, fix_with_new_test.path)
    EnvironmentFolders(data / "trainer").add(heldout, fix_with_new_test.path)
    db = Database(load_worker_settings().effective_database_url)
    db.migrate()
    set_visibility(db, RepoRef("github", "acme/calc"), private=False)
    set_visibility(db, RepoRef("github", "acme/calc2"), private=False)
    db.dispose()
    out = tmp_path / "run"
    result = CliRunner().invoke(
        main,
        [
            "train",
            "--model",
            str(tiny_model_dir),
            "--steps",
            "1",
            "--group-size",
            "2",
            "--output-dir",
            str(out),
            "--register",
            "cand1",
            "--heldout",
            "split:heldout",
            "--max-turns",
            "2",
            "--max-new-tokens",
            "32",
        ],
        catch_exceptions=False,
    )
    assert result.exit_code == 0, result.output
    assert "run 1: 1 steps, mean reward 0.000 -> 0.000" in result.output
    assert (out / "step-1" / "adapter").is_dir()
    # Before (nothing promoted: the base the run started from) and after, side by side,
    # in the same grading; a random model solves nothing: 0 of 1, Wilson's [0, 79.3%].
    assert "held-out pass@1 on 1 env(s), 1 rollout(s) each:" in result.output
    assert f"  before\t{tiny_model_dir}\t0.0% (95% CI 0.0%-79.3%, 1 envs)" in result.output
    assert "  after\tcand1\t0.0% (95% CI 0.0%-79.3%, 1 envs)" in result.output
    listed = CliRunner().invoke(main, ["model", "list"])
    assert "cand1\tcandidate\theld-out 0.0% [0.0%-79.3%]" in listed.output
    evaluated = CliRunner().invoke(
        main,
        [
            "model",
            "evaluate",
            "cand1",
            "--k",
            "1",
            "--max-turns",
            "2",
            "--max-new-tokens",
            "32",
        ],
        catch_exceptions=False,
    )
    assert evaluated.exit_code == 0, evaluated.output
    assert (
        "cand1: held-out pass rate 0.0% on 1 env(s), 95% CI 0.0%-79.3% (pass@1 from 1 "
        "rollout(s) each)" in evaluated.output
    )
    # 0 of 1 against the base's 0 of 1: a tie on 1 environment is refused, and forcing it
    # says what was skipped.
    refused = CliRunner().invoke(main, ["model", "promote", "cand1"])
    assert refused.exit_code != 0 and "below the minimum of 30" in refused.output
    promoted = CliRunner().invoke(main, ["model", "promote", "cand1", "--force"])
    assert promoted.exit_code == 0, promoted.output
    assert "forced; skipped:" in promoted.output and "not better: 0 win(s)" in promoted.output
    listed = CliRunner().invoke(main, ["model", "list"])
    assert "cand1\tpromoted\theld-out 0.0%" in listed.output
    calibrated = CliRunner().invoke(
        main,
        [
            "envs",
            "calibrate",
            "--k",
            "2",
            "--max-turns",
            "2",
            "--max-new-tokens",
            "32",
        ],
        catch_exceptions=False,
    )
    assert calibrated.exit_code == 0, calibrated.output
    assert f"{env.instance_id}\tpass 0/2\tno signal" in calibrated.output
    stored = EnvironmentFolders(data / "trainer").get(env.instance_id)
    assert (stored.calibration.k, stored.calibration.solved) == (2, 0)
    assert stored.calibration.model is not None and "adapter" in stored.calibration.model


@pytest.mark.integration
def test_envs_grade_prints_the_swebench_verdict_and_the_reward(
    fix_with_new_test: FixRepo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    require_service(shutil.which("bwrap") is not None, "bubblewrap")
    data = tmp_path / "data"
    monkeypatch.setenv("RIBBIT_DATA_DIR", str(data))
    monkeypatch.setenv("RIBBIT_SANDBOX__BACKEND", "bubblewrap")
    env = calc_environment(
        fix_with_new_test, test_command=PYTEST.replace(sys.executable, "python3")
    )
    EnvironmentFolders(data / "trainer").add(env, fix_with_new_test.path)
    gold = tmp_path / "gold.diff"
    gold.write_text(env.patch)
    # Resolves the issue by the tests, and breaks into the host on the way: SWE-bench
    # counts it resolved, Ribbit's reward does not.
    insecure = tmp_path / "insecure.diff"
    insecure.write_text(
        env.patch
        + "diff --git a/run.py b/run.py\nnew file mode 100644\n--- /dev/null\n+++ b/run.py\n"
        "@@ -0,0 +1,5 @@\n+import subprocess\n+\n+\n+def run(cmd):\n"
        "+    return subprocess.call(cmd, shell=True)\n"
    )
    runner = CliRunner()

    graded = runner.invoke(main, ["envs", "grade", env.instance_id, "--patch", str(gold), "--json"])
    assert graded.exit_code == 0, graded.output
    verdict = json.loads(graded.output)
    assert (verdict["resolved"], verdict["reward"], verdict["reason"]) == (True, 1.0, "solved")

    graded = runner.invoke(
        main, ["envs", "grade", env.instance_id, "--patch", str(insecure), "--json"]
    )
    verdict = json.loads(graded.output)
    assert (verdict["resolved"], verdict["reward"]) == (True, 0.0), verdict
    assert verdict["reason"] == "gate_findings"

    empty = tmp_path / "none.diff"
    empty.write_text("")
    graded = runner.invoke(main, ["envs", "grade", env.instance_id, "--patch", str(empty)])
    assert f"{env.instance_id}: resolved=False swebench_resolved=False reward=0.0" in graded.output


# Passes only where the production setup step ran it: in the set-up environment's venv,
# with the registry proxy in its environment (the step's network, and only its).
PROXIED_SETUP = (
    'test "$VIRTUAL_ENV" = /opt/ribbit/venv && test -x "$VIRTUAL_ENV/bin/python" '
    '&& test -n "$HTTPS_PROXY" && echo set-up > "$VIRTUAL_ENV/marker"'
)


@pytest.mark.integration
def test_envs_build_sets_up_like_a_job_from_setup_or_the_repos_ribbit_yml(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    require_service(shutil.which("bwrap") is not None, "bubblewrap")
    from tests.fakes import commit_files, make_git_repo
    from tests.plugins.trainer import CALC_BUGGY, CALC_FIXED, TEST_ADD, TEST_MUL

    data = tmp_path / "data"
    monkeypatch.setenv("RIBBIT_DATA_DIR", str(data))
    monkeypatch.setenv("RIBBIT_SANDBOX__BACKEND", "bubblewrap")
    test = "python -m pytest -q -p no:cacheprovider"  # the venv's python
    # The tests need what setup made: a failing or skipped setup fails every test.
    conftest = (
        "import os\n\n\ndef pytest_configure(config):\n"
        "    assert open(os.environ['VIRTUAL_ENV'] + '/marker').read() == 'set-up\\n'\n"
    )
    repo = tmp_path / "calc"
    base = make_git_repo(
        repo,
        {
            "calc.py": CALC_BUGGY,
            "tests/test_mul.py": TEST_MUL,
            "conftest.py": conftest,
            ".ribbit.yml": f"setup: '{PROXIED_SETUP}'\ntest: {test}\n",
        },
    )
    fix = commit_files(repo, {"calc.py": CALC_FIXED, "tests/test_add.py": TEST_ADD}, "fix")
    issue = tmp_path / "issue.md"
    issue.write_text("add is wrong\n\nadd(2, 3) returns -1\n")
    runner = CliRunner()

    def build(*extra: str) -> Any:
        args = ["envs", "build", "--checkout", str(repo), "--base", base, "--fix", fix]
        args += ["--issue-file", str(issue), "--reruns", "1", "--json", "--forge", "github"]
        # A hand-built environment names its repository (#33): its model line follows it.
        args += [*extra] if "--name" in extra else ["--name", "local/repo", *extra]
        return runner.invoke(main, args)

    from_config = build()
    assert from_config.exit_code == 0, from_config.output
    env = json.loads(from_config.output)
    assert (env["setup_commands"], env["test_command"]) == ([PROXIED_SETUP], test)
    assert env["FAIL_TO_PASS"] == ["tests/test_add.py::test_add"]

    # --setup replaces the file's: two commands, run as one step that stops at a failure.
    given = build("--name", "acme/other", "--setup", "true", "--setup", PROXIED_SETUP)
    assert given.exit_code == 0, given.output
    assert json.loads(given.output)["setup_commands"] == ["true", PROXIED_SETUP]

    failed = build("--name", "acme/broken", "--setup", "exit 3", "--setup", PROXIED_SETUP)
    assert failed.exit_code != 0
    assert "setup_failed" in failed.output and "exited 3" in failed.output
