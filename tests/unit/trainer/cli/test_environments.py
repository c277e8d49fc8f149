"""`ribbit envs` through the real command group: a tmp data dir, its SQLite database
migrated on first use, the toy environment in the store. What needs a sandbox or a model
(grading, calibration rollouts) is a recording fake; what the command itself decides
(which model calibrates, what it stores and prints, what it refuses) is real."""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from bot.store.db import Database
from bot.store.records.gate_report import Finding
from tests.fakes import commit_files, make_git_repo
from tests.plugins.forge import BOT_LOGIN as BOT
from tests.plugins.forge import ForgeWorld
from tests.support import printed_json
from tests.unit.trainer.cli.invoke import ok, refused, run
from trainer.calibrate import CalibrationReport
from trainer.envs.builder import BuildSpec, EnvironmentBuilder
from trainer.envs.folders import EnvironmentFolders
from trainer.envs.schema import Calibration, Environment
from trainer.rl.reward import RewardResult
from trainer.rl.toy import toy_environment
from worker.settings import load_worker_settings

_run = partial(run, "envs")
_ok = partial(ok, "envs")
_refused = partial(refused, "envs")


@pytest.fixture
def store(data_dir: Path, tmp_path: Path) -> EnvironmentFolders:
    """The default store with two toy environments at two base commits."""
    repo = tmp_path / "toy"
    first = make_git_repo(repo, {"README.md": "one\n"})
    second = commit_files(repo, {"README.md": "two\n"}, "second")
    env_store = EnvironmentFolders(data_dir / "trainer")
    env_store.add(toy_environment(first, instance_id="toy__toy-1"), repo)
    env_store.add(toy_environment(second, instance_id="toy__toy-2"), repo)
    return env_store


def _db() -> Database:
    return Database(load_worker_settings().effective_database_url)


# -- list / show -------------------------------------------------------------------------
def test_environments_list_of_an_empty_store_says_what_to_do(data_dir: Path) -> None:
    out = _ok("list")
    assert f"no environments in {data_dir / 'trainer'}" in out and "ribbit envs build" in out
    assert json.loads(_ok("list", "--json")) == []
    assert f"no rejected candidates in {data_dir / 'trainer'}" in _ok("list", "--rejected")
    assert json.loads(_ok("list", "--rejected", "--json")) == []


def test_environments_list_and_show(store: EnvironmentFolders) -> None:
    lines = _ok("list").splitlines()
    assert [line.split("\t")[0] for line in lines] == ["toy__toy-1", "toy__toy-2"]
    assert lines[0].split("\t")[1:] == ["train", "F2P=1 P2P=0", "uncalibrated"]
    listed = json.loads(_ok("list", "--json"))
    assert [e["instance_id"] for e in listed] == ["toy__toy-1", "toy__toy-2"]
    shown = json.loads(_ok("show", "toy__toy-2"))
    assert shown == store.get("toy__toy-2").model_dump(mode="json")


@pytest.mark.parametrize("instance_id", ["nope", "../toy__toy-1", "a/b"])
def test_environments_show_refuses_what_is_not_stored(
    store: EnvironmentFolders, instance_id: str
) -> None:
    assert f"Error: no environment {instance_id!r}" in _refused("show", instance_id)


def test_environments_list_in_another_store(store: EnvironmentFolders, tmp_path: Path) -> None:
    other = tmp_path / "other"
    assert f"no environments in {other}" in _ok("list", "--store", str(other))


# -- build: refusals before any sandbox -----------------------------------------------------
@pytest.fixture
def tests_only_fix(tmp_path: Path) -> tuple[Path, str, str, Path]:
    repo = tmp_path / "calc"
    base = make_git_repo(repo, {"calc.py": "x = 1\n"})
    fix = commit_files(repo, {"tests/test_calc.py": "def test_x(): ...\n"}, "tests only")
    issue = tmp_path / "issue.md"
    issue.write_text("x is wrong\n\nit should be 2\n")
    return repo, base, fix, issue


def test_environments_build_a_rejected_fix_is_kept_with_its_reason(
    data_dir: Path, tests_only_fix: tuple[Path, str, str, Path]
) -> None:
    repo, base, fix, issue = tests_only_fix
    args = ["build", "--checkout", str(repo), "--base", base, "--fix", fix]
    out = _refused(*args, "--issue-file", str(issue), "--name", "acme/calc", "--forge", "github")
    assert "Error: rejected:" in out and "changes only tests" in out
    [line] = _ok("list", "--rejected").splitlines()
    candidate, reason, _detail = line.split("\t")
    assert candidate.startswith("acme/calc@") and reason == "no_code_change"
    assert [r["reason"] for r in json.loads(_ok("list", "--rejected", "--json"))] == [
        "no_code_change"
    ]
    assert json.loads(_ok("list", "--json")) == []  # nothing stored


def test_environments_build_refuses_a_broken_repo_config(
    data_dir: Path, tests_only_fix: tuple[Path, str, str, Path]
) -> None:
    repo, _base, _fix, issue = tests_only_fix
    base = commit_files(repo, {".ribbit.yml": "test: [unclosed\n"}, "broken config")
    fix = commit_files(repo, {"calc.py": "x = 2\n"}, "fix")
    args = ["build", "--checkout", str(repo), "--base", base, "--fix", fix]
    out = _refused(*args, "--issue-file", str(issue), "--name", "acme/calc", "--forge", "github")
    assert "Error: .ribbit.yml is not valid YAML" in out
    assert _ok("list", "--rejected").startswith("no rejected")  # the fix was not judged


# -- grade --------------------------------------------------------------------------------------
@pytest.fixture
def graded(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """compute_reward replaced: each call recorded (with the checkout's README as it was
    during the call), a failed verdict with one test and one finding returned."""
    calls: list[dict[str, Any]] = []

    def compute_reward(env: Any, patch: str, checkout: Path, *args: Any, **kw: Any) -> Any:
        readme = (checkout / "README.md").read_text()
        calls.append({"env": env.instance_id, "patch": patch, "readme": readme, "kw": kw})
        return RewardResult(
            reward=0.0,
            reason="gate_findings",
            failed_tests=("tests/test_x.py::test_y",),
            findings=(Finding("hygiene", "debug-print", "print() left in"),),
            gates_run=("hygiene",),
            resolved=True,
        )

    monkeypatch.setattr("trainer.rl.reward.compute_reward", compute_reward)
    return calls


def test_environments_grade_prints_the_verdict(
    store: EnvironmentFolders, graded: list[dict[str, Any]], tmp_path: Path
) -> None:
    patch = tmp_path / "fix.diff"
    patch.write_text("diff --git a/README.md b/README.md\n")
    out = _ok("grade", "toy__toy-1", "--patch", str(patch))
    assert out.splitlines() == [
        "toy__toy-1: resolved=True swebench_resolved=False reward=0.0",
        "  gate_findings",
        "  not passed: tests/test_x.py::test_y",
        "  hygiene/debug-print: print() left in",
    ]
    # Graded on a fresh checkout of the environment's own base commit, with the gates set.
    [call] = graded
    assert call["patch"] == patch.read_text() and call["readme"] == "one\n"
    assert "gate_settings" in call["kw"]
    verdict = json.loads(_ok("grade", "toy__toy-2", "--patch", str(patch), "--json"))
    assert verdict["instance_id"] == "toy__toy-2" and verdict["reason"] == "gate_findings"
    assert verdict["findings"][0]["rule"] == "debug-print"
    assert graded[-1]["readme"] == "two\n"


def test_environments_grade_refuses_an_environment_not_stored(
    store: EnvironmentFolders, graded: list[dict[str, Any]], tmp_path: Path
) -> None:
    patch = tmp_path / "fix.diff"
    patch.write_text("")
    assert "Error: no environment 'nope'" in _refused("grade", "nope", "--patch", str(patch))
    assert _run("grade", "toy__toy-1").exit_code == 2  # --patch is required
    assert graded == []


# -- calibrate ----------------------------------------------------------------------------------
@pytest.fixture
def calibrated(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """No model, no rollouts: version_policy and calibrate record what they were asked;
    toy__toy-1 is solved 2 of k times (signal), every other environment never. The report
    lists them in the reverse of the order asked: the command says them in its own."""
    seen: dict[str, Any] = {}

    def version_policy(base: str, adapter: str | None, limits: Any) -> str:
        seen["policy"] = (base, adapter, limits.max_turns, limits.max_new_tokens)
        return "the policy"

    def calibrate(
        pairs: Any, policy: Any, limits: Any, factory: Any, reward: Any, **kw: Any
    ) -> Any:
        seen["envs"] = [env.instance_id for env, _ in pairs]
        seen["k"] = kw["k"]
        for env, _ in pairs:
            kw["on_env"](env)
        return CalibrationReport(
            {
                env.instance_id: Calibration(
                    k=kw["k"], solved=2 if env.instance_id.endswith("1") else 0
                )
                for env, _ in list(pairs)[::-1]
            }
        )

    monkeypatch.setattr("trainer.evaluate.version_policy", version_policy)
    monkeypatch.setattr("trainer.evaluate.calibrate", calibrate)
    return seen


def test_environments_calibrate_stores_and_prints_each_result(
    store: EnvironmentFolders, calibrated: dict[str, Any]
) -> None:
    out = _ok("calibrate", "--k", "4", "--max-turns", "7", "--max-new-tokens", "64")
    assert out.splitlines() == ["toy__toy-1\tpass 2/4\tsignal", "toy__toy-2\tpass 0/4\tno signal"]
    assert calibrated["envs"] == ["toy__toy-1", "toy__toy-2"] and calibrated["k"] == 4
    # No promoted version: the configured base model, with the limits asked for.
    base = load_worker_settings().model.model
    assert calibrated["policy"] == (base, None, 7, 64)
    assert store.get("toy__toy-1").calibration == Calibration(k=4, solved=2)
    # Stored: the next selection by signal sees it, and so does the listing.
    assert "pass 2/4" in _ok("list").splitlines()[0]
    assert [e.instance_id for e in store.select("signal")] == ["toy__toy-1"]


def test_environments_calibrate_as_json(
    store: EnvironmentFolders, calibrated: dict[str, Any]
) -> None:
    result = _run("calibrate", "--k", "3", "--json")
    assert result.exit_code == 0, result.output
    assert printed_json(result.stdout) == {
        "base_model": load_worker_settings().model.model,
        "adapter_path": None,
        "version": None,  # no promoted version: the base calibrated
        "k": 3,
        "results": [
            {"instance_id": "toy__toy-1", "k": 3, "solved": 2, "has_signal": True},
            {"instance_id": "toy__toy-2", "k": 3, "solved": 0, "has_signal": False},
        ],
    }
    assert store.get("toy__toy-2").calibration == Calibration(k=3, solved=0)  # stored too


def test_environments_calibrate_uses_the_promoted_version(
    store: EnvironmentFolders, calibrated: dict[str, Any]
) -> None:
    from trainer.registry import register

    db = _db()
    db.migrate()
    register(db, "v1", base_model="org/base", adapter_path="/adapters/v1")
    db.dispose()
    ok("model", "promote", "v1", "--force")
    used = json.loads(_ok("calibrate", "--envs", "toy__toy-2", "--json"))
    assert calibrated["envs"] == ["toy__toy-2"]
    assert calibrated["policy"][:2] == ("org/base", "/adapters/v1")
    assert (used["version"], used["base_model"], used["adapter_path"]) == (
        "v1",
        "org/base",
        "/adapters/v1",
    )
    # --model names the weights outright: no adapter from the registry.
    used = json.loads(
        _ok("calibrate", "--envs", "toy__toy-2", "--model", "/models/other", "--json")
    )
    assert calibrated["policy"][:2] == ("/models/other", None) and used["version"] is None


# -- from-outcomes ---------------------------------------------------------------------------------
def test_environments_from_outcomes_with_nothing_recorded(data_dir: Path, tmp_path: Path) -> None:
    repo = tmp_path / "calc"
    make_git_repo(repo, {"calc.py": "x = 1\n"})
    args = ["from-outcomes", "--forge", "github", "--name", "acme/calc", "--checkout", str(repo)]
    out = _ok(*args)
    assert "no recorded outcomes for github:acme/calc" in out and "ribbit outcomes" in out
    # A script is told nothing was built in the object, not in a sentence.
    assert printed_json(_ok(*args, "--json")) == {"built": [], "rejected": []}


def test_environments_from_outcomes_prints_what_was_built_and_rejected(
    data_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from trainer.envs.candidates import OutcomeImport
    from trainer.envs.schema import Rejection

    asked: list[tuple[Any, ...]] = []
    closed = Rejection(candidate="acme/calc#7", reason="no_code_change", detail="closed")

    def environments_from_outcomes(db: Any, forge: str, repo: str, *rest: Any, **kw: Any) -> Any:
        asked.append((forge, repo, kw["test_command"]))
        return OutcomeImport(rejected=[closed])

    monkeypatch.setattr(
        "trainer.envs.candidates.environments_from_outcomes", environments_from_outcomes
    )
    repo = tmp_path / "calc"
    make_git_repo(repo, {"calc.py": "x = 1\n"})
    args = ["from-outcomes", "--forge", "gitlab", "--name", "acme/calc", "--checkout", str(repo)]
    out = _ok(*args, "--test-command", "make test")
    # Only rejections is still something recorded: no "nothing recorded" hint.
    assert out.splitlines() == ["rejected acme/calc#7: no_code_change (closed)"]
    assert asked == [("gitlab", "acme/calc", "make test")]
    assert json.loads(_ok(*args, "--json")) == {
        "built": [],
        "rejected": [closed.model_dump(mode="json")],  # as envs list --rejected --json
    }


# -- build: the issue's comments ---------------------------------------------------------------
@pytest.fixture
def built_specs(monkeypatch: pytest.MonkeyPatch) -> list[BuildSpec]:
    """Each spec `envs build` hands the real builder (which then judges it as ever)."""
    specs: list[BuildSpec] = []
    real = EnvironmentBuilder.build

    def build(self: EnvironmentBuilder, spec: BuildSpec) -> Environment:
        specs.append(spec)
        return real(self, spec)

    monkeypatch.setattr(EnvironmentBuilder, "build", build)
    return specs


def test_environments_build_reads_the_issues_comments_from_the_forge_as_the_job_judges_them(
    data_dir: Path,
    tests_only_fix: tuple[Path, str, str, Path],
    forge_world: ForgeWorld,
    built_specs: list[BuildSpec],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    forge, name = forge_world.forge, forge_world.github.full_name
    for key, value in {
        "API_URL": forge.github_api_url,
        "TOKEN": forge_world.bot.token,
        "BOT_LOGIN": forge_world.bot.login,
        "RETRY_BACKOFF_S": "0.01",
    }.items():
        monkeypatch.setenv(f"RIBBIT_GITHUB__{key}", value)
    issue = forge.create_issue("github", name, title="add is wrong", author="maya")
    for author, body in (("maya", "Keep add() pure."), ("otto", "Ignore that."), (BOT, "On it.")):
        forge.comment_as("github", name, issue.number, author=author, body=body)
    extra = tmp_path / "comments.json"
    extra.write_text(json.dumps([{"author": "lee", "trust": "writer", "body": "Also mul."}]))
    repo, base, fix, issue_file = tests_only_fix
    args = ["build", "--repo", str(repo), "--base", base, "--fix", fix, "--name", name]
    args += ["--issue-file", str(issue_file), "--forge", "github"]

    _refused(*args, "--issue-number", str(issue.number), "--comments-file", str(extra))

    [spec] = built_specs
    assert [(c.author, c.trust, c.body) for c in spec.comments] == [
        ("maya", "writer", "Keep add() pure."),
        ("otto", "outsider", "Ignore that."),
        (BOT, "bot", "On it."),
        ("lee", "writer", "Also mul."),
    ]
    assert spec.provenance.issue_number == issue.number  # the footer's Instance ID
    # An issue the forge does not have, and a file that is not a list of comments, are
    # refused before anything is built.
    assert "issue acme/widgets#99 on github" in _refused(*args, "--issue-number", "99")
    extra.write_text(json.dumps([{"author": "lee", "trust": "admin", "body": "x"}]))
    assert (
        "not a JSON list of {author, trust, body}"
        in _run(*args, "--comments-file", str(extra)).output
    )
    assert len(built_specs) == 1


def test_environments_calibrate_checks_out_before_loading_the_model(
    store: EnvironmentFolders, calibrated: dict[str, Any]
) -> None:
    # An environment that cannot be checked out fails the command before the weights
    # load (minutes on a real model), as `model evaluate` does.
    (store.root / "envs" / "toy__toy-2" / "repo.bundle").unlink()
    result = _run("calibrate")
    assert result.exit_code != 0
    assert "toy__toy-2: no repo.bundle" in result.output
    assert "policy" not in calibrated
