"""Exported environments: the eval script really grades patches, and the SkyRL and
verl records have the shapes those frameworks read."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.fakes import git, make_git_repo
from tests.plugins.trainer import CALC_BUGGY, FixRepo, calc_environment
from tests.watch_attacks import (
    ARGPARSE_SHADOW,
    ATEXIT_REWRITE,
    FORKS_EACH_TEST,
    GC_HOOK,
    QUIET_PLUGIN,
    THREAD_REWRITE,
    UNDONE_REWRITE,
)
from trainer.envs.evalcheck import tree_changes
from trainer.envs.export import (
    EXIT_SETUP_FAILED,
    EXIT_TAMPER,
    EXIT_TIMEOUT,
    containerfile_for,
    eval_script,
    export_records,
    image_name_for,
    skyrl_record,
    verl_record,
)
from trainer.envs.folders import EnvironmentFolders
from trainer.envs.schema import SWEBENCH_FIELDS, Environment

CHEAT_TEST = "def test_add():\n    pass\n"
# The plain pytest form, which the eval script runs watched (the host's python3 has
# pytest, as the sandbox image's does).
WATCHED = "python3 -m pytest -q -p no:cacheprovider"
# Patches that leave add() broken and forge the run from inside the test process,
# one per mechanism (tests/watch_attacks.py): calc.py is imported by the tests.
FORGERIES = {
    "gc-hook": {"calc.py": GC_HOOK + "\n\n" + CALC_BUGGY},
    "atexit-rewrite": {"calc.py": CALC_BUGGY + "\n\n" + ATEXIT_REWRITE},
    "thread-rewrite": {"calc.py": CALC_BUGGY + "\n\n" + THREAD_REWRITE},
    "argparse-shadow": {"argparse.py": ARGPARSE_SHADOW, "calcquiet.py": QUIET_PLUGIN},
    # Not a forgery by itself: every result comes from a forked child, unwatched.
    "tests-in-a-forked-child": {"tests/conftest.py": FORKS_EACH_TEST},
    # The report made a pass and the runner put back before any check looks.
    "report-rewrite-undone": {
        "calc.py": UNDONE_REWRITE
        + "\n\n"
        + CALC_BUGGY.replace("    return a - b", "    _arm()\n    return a - b")
    },
}
# What the refusal names: the event and the patch's line, or the channel the forged
# end record broke (a rewrite at exit leaves no event).
REFUSED_FOR = {
    "gc-hook": "(gc.get_objects) at calc.py:",
    "atexit-rewrite": "channel is not the bootstrap's",
    "thread-rewrite": "channel is not the bootstrap's",
    "argparse-shadow": "named like the module argparse at argparse.py:1",
    "tests-in-a-forked-child": "2 test(s) ran in another process",
    "report-rewrite-undone": "test_add raised AssertionError in its call, yet reports a pass",
}


@pytest.fixture
def stored(fix_with_new_test: FixRepo, tmp_path: Path) -> tuple[Environment, EnvironmentFolders]:
    env = calc_environment(fix_with_new_test, issue="add(2, 3) returns -1 instead of 5.")
    store = EnvironmentFolders(tmp_path / "store")
    store.add(env, fix_with_new_test.path)
    return env, store


def _grade(env: Environment, store: EnvironmentFolders, where: Path, patch: str) -> int:
    return _graded(env, store, where, patch).returncode


def _graded(
    env: Environment, store: EnvironmentFolders, where: Path, patch: str
) -> subprocess.CompletedProcess[str]:
    """What SkyRL does: git apply the patch in a checkout at base, then bash the script."""
    checkout = store.checkout(env, where)
    if patch:
        subprocess.run(["git", "apply", "-"], cwd=checkout, input=patch, text=True, check=True)
    script = eval_script(env, workdir=str(checkout))
    # The output goes to a file, as a framework's log would: a rewrite that seeks back
    # over the console (tests/watch_attacks.py) can, as it could on a pipe it cannot.
    log = where.with_suffix(".log")
    with log.open("w") as out:
        proc = subprocess.run(
            ["bash"], input=script, text=True, stdout=out, stderr=subprocess.STDOUT, timeout=120
        )
    return subprocess.CompletedProcess(proc.args, proc.returncode, log.read_text(), "")


def _patch(env: Environment, store: EnvironmentFolders, where: Path, files: dict[str, str]) -> str:
    """The diff against base that writes ``files``."""
    checkout = store.checkout(env, where)
    for rel, text in files.items():
        (checkout / rel).write_text(text)
    git(checkout, "add", "-A")
    # Not through git(), which strips the blank context lines a hunk may end with.
    diff = ["git", "diff", "--cached"]
    return subprocess.run(diff, cwd=checkout, capture_output=True, text=True, check=True).stdout


def test_eval_script_passes_the_gold_patch_and_fails_no_patch(
    stored: tuple[Environment, EnvironmentFolders], tmp_path: Path
) -> None:
    env, store = stored
    assert _grade(env, store, tmp_path / "gold", env.patch) == 0
    assert _grade(env, store, tmp_path / "none", "") == 1


def test_eval_script_resets_tests_a_patch_rewrote(
    stored: tuple[Environment, EnvironmentFolders], tmp_path: Path
) -> None:
    env, store = stored
    checkout = store.checkout(env, tmp_path / "cheat")
    # The "fix" writes a test_add that always passes instead of fixing add().
    (checkout / "tests" / "test_add.py").write_text(CHEAT_TEST)
    git(checkout, "add", "-A")
    cheat = git(checkout, "diff", "--cached")
    assert "test_add" in cheat
    assert _grade(env, store, tmp_path / "graded", cheat + "\n") == 1


def test_eval_script_reports_a_failing_setup_and_a_hanging_suite(
    stored: tuple[Environment, EnvironmentFolders], tmp_path: Path
) -> None:
    env, store = stored
    broken = env.model_copy(update={"setup_commands": ["false"]})
    assert _grade(broken, store, tmp_path / "setup", env.patch) == EXIT_SETUP_FAILED
    hanging = env.model_copy(
        update={"test_command": "sleep 60; " + env.test_command, "test_timeout_s": 2}
    )
    assert _grade(hanging, store, tmp_path / "hang", env.patch) == EXIT_TIMEOUT


def test_eval_script_survives_a_patch_that_contains_its_delimiter(
    stored: tuple[Environment, EnvironmentFolders],
) -> None:
    env, _ = stored
    script = eval_script(env)
    word = next(line.split("'")[1] for line in script.splitlines() if "git apply" in line)
    tricky = env.model_copy(update={"test_patch": env.test_patch.replace("5", word)})
    assert word not in eval_script(tricky).split("git apply", 1)[1].splitlines()[0]


def test_skyrl_record_is_a_swebench_instance_with_image_and_eval_script(
    stored: tuple[Environment, EnvironmentFolders],
) -> None:
    env, _ = stored
    record = skyrl_record(env)
    assert set(record) == {"data_source", "prompt", "env_class", "instance"}
    assert record["prompt"] == [{"role": "user", "content": env.problem_statement}]
    instance = record["instance"]
    assert set(SWEBENCH_FIELDS) <= set(instance)
    assert instance["instance_id"] == env.instance_id
    assert instance["image_name"] == image_name_for(env)
    assert instance["eval_script"].startswith("#!/bin/bash")
    assert "cd /testbed" in instance["eval_script"]


def test_verl_record_carries_what_a_reward_function_needs(
    stored: tuple[Environment, EnvironmentFolders],
) -> None:
    env, _ = stored
    record = verl_record(env)
    assert record["reward_model"]["style"] == "rule"
    truth = json.loads(record["reward_model"]["ground_truth"])
    assert truth["FAIL_TO_PASS"] == env.FAIL_TO_PASS and truth["base_commit"] == env.base_commit
    assert record["extra_info"]["instance_id"] == env.instance_id
    assert record["prompt"][0]["role"] == "user"


def test_export_records_writes_one_json_line_per_environment(
    stored: tuple[Environment, EnvironmentFolders], tmp_path: Path
) -> None:
    env, store = stored
    for fmt in ("ribbit", "swebench", "skyrl", "verl"):
        out = tmp_path / f"{fmt}.jsonl"
        assert store.export_jsonl(out, fmt=fmt) == 1
        (line,) = out.read_text().splitlines()
        assert json.loads(line)
    assert set(json.loads((tmp_path / "swebench.jsonl").read_text())) == set(SWEBENCH_FIELDS)
    assert Environment.model_validate_json((tmp_path / "ribbit.jsonl").read_text()) == env
    with pytest.raises(ValueError, match="format must be one of"):
        export_records([env], tmp_path / "x.jsonl", "parquet")


def test_image_names_are_valid_references() -> None:
    env = Environment(
        instance_id="Acme__Calc-ABC.1",
        repo="acme/calc",
        base_commit="0123456789abcdef" * 2 + "01234567",
        problem_statement="x",
        patch="",
        test_patch="",
        FAIL_TO_PASS=["t"],
        PASS_TO_PASS=[],
        setup_commands=["pip install -e ."],
    )
    assert image_name_for(env) == "ribbit-env/acme__calc-abc.1:0123456789ab"
    containerfile = containerfile_for(env, "ribbit-sandbox:latest")
    assert containerfile.startswith("FROM ribbit-sandbox:latest\n")
    assert "COPY testbed /testbed" in containerfile and "RUN pip install -e ." in containerfile


@pytest.mark.parametrize("attack", sorted(FORGERIES))
def test_eval_script_refuses_a_run_forged_from_inside_the_tests(
    stored: tuple[Environment, EnvironmentFolders], tmp_path: Path, attack: str
) -> None:
    env, store = stored
    env = env.model_copy(update={"test_command": WATCHED})
    forged = _patch(env, store, tmp_path / "write", FORGERIES[attack])
    proc = _graded(env, store, tmp_path / "graded", forged)
    assert proc.returncode == EXIT_TAMPER, proc.stdout + proc.stderr
    refusals = [line for line in proc.stdout.splitlines() if line.startswith("ribbit-eval: tamper")]
    assert any(REFUSED_FOR[attack] in line for line in refusals), proc.stdout


def test_eval_script_runs_plain_pytest_watched_and_still_grades_it(
    stored: tuple[Environment, EnvironmentFolders], tmp_path: Path
) -> None:
    env, store = stored
    env = env.model_copy(update={"test_command": WATCHED})
    script = eval_script(env)
    # No report path anywhere the tests can read it: not exported, not in pytest's options.
    assert not [line for line in script.splitlines() if line.startswith("export ")]
    assert "RIBBIT_JUNIT" not in script
    assert [line for line in script.splitlines() if "PYTEST_ADDOPTS=" in line] == [
        line for line in script.splitlines() if 'PYTEST_ADDOPTS="${RIBBIT_PYTEST_SELECT-}"' in line
    ]
    assert "exec python3 -P -c " in script  # the watch plan's: no workspace on sys.path
    assert _grade(env, store, tmp_path / "gold", env.patch) == 0
    assert _grade(env, store, tmp_path / "none", "") == 1


def test_eval_script_keeps_the_report_file_for_commands_it_cannot_watch(
    stored: tuple[Environment, EnvironmentFolders],
) -> None:
    env, _ = stored
    make = env.model_copy(update={"test_command": "make test"})
    assert "export RIBBIT_JUNIT=" in eval_script(make)
    assert "RIBBIT_JUNIT" not in eval_script(env.model_copy(update={"test_command": WATCHED}))


def test_tree_changes_are_the_lines_and_paths_the_applied_patch_wrote(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = make_git_repo(tmp_path, {"pkg/mod.py": "a = 1\nb = 2\nc = 3\n"})
    (tmp_path / "pkg" / "mod.py").write_text("a = 1\nb = 20\nc = 3\nd = 4\n")
    (tmp_path / "json").mkdir()
    (tmp_path / "json" / "__init__.py").write_text("x = 1\n")
    monkeypatch.chdir(tmp_path)  # the eval script runs in the checkout
    wrote, created = tree_changes(base)
    assert [n for n in range(1, 6) if wrote("pkg/mod.py", n)] == [2, 4]
    assert wrote("json/__init__.py", 1) and created("json") and not created("pkg")
    assert not wrote("/usr/lib/python3/inspect.py", 1)
