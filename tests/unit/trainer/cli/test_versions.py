"""`ribbit model` through the real command group on a tmp data dir: pulling weights from
a folder and verifying them, the version list's held-out column, and what each command
refuses (a bad model id, tampered weights, a version that does not exist)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from bot.store.db import Database
from tests.fakes import make_git_repo
from tests.support import printed_json
from tests.unit.trainer.cli.invoke import ok, refused, run
from trainer.envs.folders import EnvironmentFolders
from trainer.passk import pass_at_1
from trainer.registry import register
from trainer.rl.toy import toy_environment
from worker.settings import load_worker_settings

_run = partial(run, "model")
_ok = partial(ok, "model")
_refused = partial(refused, "model")


@pytest.fixture
def db(data_dir: Path) -> Iterator[Database]:
    database = Database(load_worker_settings().effective_database_url)
    database.migrate()
    yield database
    database.dispose()


@pytest.fixture
def snapshot(tmp_path: Path) -> Path:
    folder = tmp_path / "snapshot"
    folder.mkdir()
    (folder / "config.json").write_text('{"model_type": "toy"}')
    (folder / "model.safetensors").write_bytes(b"\0" * 64)
    return folder


# -- pull / verify -----------------------------------------------------------------------
def test_versions_pull_from_a_folder_then_verify(data_dir: Path, snapshot: Path) -> None:
    out = _ok("pull", "acme/tiny", "--from", str(snapshot))
    assert out.startswith("pulled acme/tiny (2 files, digest ")
    assert out.rstrip().endswith(f"into {data_dir / 'models' / 'acme/tiny'}")
    assert _ok("verify", "acme/tiny").startswith("acme/tiny: 2 files match (digest ")
    # Weights changed after the pull: verify names the file instead of trusting it.
    (data_dir / "models" / "acme/tiny" / "model.safetensors").write_bytes(b"\1" * 64)
    assert "model.safetensors: SHA-256 differs" in _refused("verify", "acme/tiny")


def test_versions_pull_refuses_what_is_not_a_model(
    data_dir: Path, snapshot: Path, tmp_path: Path
) -> None:
    assert "has no config.json: not a model folder" in _refused(
        "pull", "acme/tiny", "--from", str(tmp_path)
    )
    # A model id is owner/name, never a path out of the models volume.
    for bad in ("../escape", "acme/.."):
        assert f"{bad!r} is not a model id" in _refused("pull", bad, "--from", str(snapshot))
    assert not (data_dir / "escape").exists()
    assert _run("pull", "acme/tiny", "--from", str(tmp_path / "nowhere")).exit_code == 2


def test_versions_verify_refuses_weights_never_pulled(data_dir: Path) -> None:
    assert "Error:" in _refused("verify", "acme/never")
    # Checked as pull checks it: a model id, never a path out of the models volume.
    assert "'../escape' is not a model id" in _refused("verify", "../escape", "--json")


def test_versions_pull_as_json_says_what_verify_says(data_dir: Path, snapshot: Path) -> None:
    pulled = printed_json(_ok("pull", "acme/tiny", "--from", str(snapshot), "--json"))
    verified = printed_json(_ok("verify", "acme/tiny", "--json"))
    assert pulled == {**verified, "already_pulled": False}
    assert verified["path"] == str(data_dir / "models" / "acme/tiny")
    # Pulled again from the folder: copied again, every file re-checked; the same digest.
    again = json.loads(_ok("pull", "acme/tiny", "--from", str(snapshot), "--json"))
    assert again["digest"] == pulled["digest"] and again["files"] == 2


# -- list ------------------------------------------------------------------------------------
def test_versions_list_of_none_says_how_to_make_one(db: Database) -> None:
    assert "no model versions; `ribbit train --register NAME`" in _ok("list")
    assert json.loads(_ok("list", "--json")) == []


def test_versions_list_shows_the_held_out_score_as_known(db: Database) -> None:
    from trainer.evaluate import record_heldout

    register(db, "fresh", base_model="org/base", adapter_path=None)
    register(db, "old", base_model="org/base", adapter_path="/a/old", heldout_pass_rate=0.4)
    register(db, "scored", base_model="org/base", adapter_path="/a/scored", line="fast")
    record_heldout(db, "scored", pass_at_1([(1, 1), (0, 1)]), 1)
    rows = {line.split("\t")[0]: line.split("\t") for line in _ok("list").splitlines()}
    assert rows["fresh"] == ["fresh", "candidate", "held-out -", "org/base", "line default"]
    assert rows["old"][2:4] == ["held-out 40.0%", "/a/old"]  # scored before intervals
    assert re.fullmatch(r"held-out 50\.0% \[\d+\.\d%-\d+\.\d%\]", rows["scored"][2])
    assert [line.split("\t")[0] for line in _ok("list", "--line", "fast").splitlines()] == [
        "scored"
    ]
    listed = {v["name"]: v for v in json.loads(_ok("list", "--json"))}
    assert listed["scored"]["heldout_ci_low"] < 0.5 < listed["scored"]["heldout_ci_high"]
    assert listed["scored"]["line"] == "fast" and listed["fresh"]["heldout_pass_rate"] is None


# -- evaluate / promote / rollback refusals ------------------------------------------------
def test_versions_evaluate_scores_only_its_own_lines_heldout_environments(
    db: Database, data_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from bot.forges.base import RepoRef
    from bot.model_lines import set_visibility
    from trainer.envs.schema import Provenance

    monkeypatch.setenv(
        "RIBBIT_TRAINING__LINES",
        json.dumps({"team-a": ["github:acme/a"], "team-b": ["github:acme/b"]}),
    )
    base = make_git_repo(tmp_path / "toy", {"README.md": "toy\n"})
    env_store = EnvironmentFolders(data_dir / "trainer")
    for repo, split in (("acme/b", "heldout"), ("acme/a", "train")):
        env = toy_environment(base, instance_id=repo.replace("/", "__") + "-1")
        env_store.add(
            env.model_copy(
                update={
                    "repo": repo,
                    "split": split,
                    "provenance": Provenance(source="local", forge="github"),
                }
            ),
            tmp_path / "toy",
        )
    set_visibility(db, RepoRef("github", "acme/b"), private=True)
    register(db, "a1", base_model="org/base", adapter_path=None, line="team-a")
    # team-b's private held-out environment, and team-a's own training one: neither.
    for picked in ("acme__b-1", "acme__a-1", "all"):
        out = _refused("evaluate", "a1", "--envs", picked)
        assert "held-out environment of line 'team-a'" in out  # before any model is loaded
    assert "held-out environment" in run("model", "evaluate-base", "--line", "team-a").output


def test_versions_evaluate_refuses_a_version_that_does_not_exist(
    db: Database, data_dir: Path, tmp_path: Path
) -> None:
    base = make_git_repo(tmp_path / "toy", {"README.md": "toy\n"})
    EnvironmentFolders(data_dir / "trainer").add(toy_environment(base), tmp_path / "toy")
    out = _refused("evaluate", "nope", "--envs", "all")
    assert "Error: no version 'nope'" in out  # before any model is loaded


def test_versions_promote_and_rollback_refusals(db: Database) -> None:
    assert "Error: no version 'nope'" in _refused("promote", "nope")
    register(db, "v1", base_model="org/base", adapter_path="/a/v1")
    assert "v1: no per-environment results, re-score" in _refused("promote", "v1")
    forced = _ok("promote", "v1", "--force")
    assert forced.startswith("promoted v1 (forced; skipped: v1: no per-environment results")
    # The audit row says what --force skipped, word for word.
    from bot.store.audit import recent

    promoted = [e for e in recent(db, 10) if e.action == "promote" and e.outcome == "ok"]
    assert promoted[0].detail == forced.strip()
    register(db, "v2", base_model="org/base", adapter_path="/a/v2")
    _ok("promote", "v2", "--force")
    assert _ok("rollback") == "now serving v1\n"
    assert "nothing to roll back" in _refused("rollback", "--line", "fast")


def test_versions_verify_promote_and_rollback_as_json(
    db: Database, data_dir: Path, snapshot: Path
) -> None:
    _ok("pull", "acme/tiny", "--from", str(snapshot))
    verified = json.loads(_ok("verify", "acme/tiny", "--json"))
    shown = re.search(r"digest (\w+)", _ok("verify", "acme/tiny"))
    assert shown is not None and verified["digest"].startswith(shown.group(1))
    assert {k: v for k, v in verified.items() if k != "digest"} == {
        "model": "acme/tiny",
        "path": str(data_dir / "models" / "acme/tiny"),
        "files": 2,
    }
    register(db, "v1", base_model="org/base", adapter_path="/a/v1")
    register(db, "v2", base_model="org/base", adapter_path="/a/v2")
    promoted = json.loads(_ok("promote", "v1", "--force", "--json"))
    assert (promoted["promoted"], promoted["forced"], promoted["loaded_on"]) == ("v1", True, [])
    assert promoted["message"].startswith("promoted v1 (forced; skipped:")
    _ok("promote", "v2", "--force")
    assert json.loads(_ok("rollback", "--json")) == {
        "line": "default",
        "serving": "v1",
        "message": "now serving v1",
    }
    assert json.loads(_ok("rollback", "--json"))["serving"] is None


# -- evaluate --json -----------------------------------------------------------------------
@pytest.fixture
def heldout_store(
    db: Database, data_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> list[str]:
    """Two held-out toy environments of a public repository (the default line's), and
    scoring that loads no model and opens no sandbox: the first environment always
    solved, the second never."""
    import trainer.evaluate as evaluate
    from bot.forges.base import RepoRef
    from bot.model_lines import set_visibility
    from trainer.calibrate import CalibrationReport
    from trainer.envs.schema import Calibration, Provenance
    from worker.sandbox.recipe import SandboxRecipe

    ids = ["toy__toy-1", "toy__toy-2"]
    env_store = EnvironmentFolders(data_dir / "trainer")
    for instance_id in ids:
        # A base commit each: the store refuses two environments with the same fix.
        base = make_git_repo(tmp_path / instance_id, {"README.md": f"{instance_id}\n"})
        env = toy_environment(base, instance_id=instance_id)
        held_out = {"split": "heldout", "provenance": Provenance(source="local", forge="github")}
        env_store.add(env.model_copy(update=held_out), tmp_path / instance_id)
    set_visibility(db, RepoRef("github", "toy/toy"), private=False)

    def calibrate(envs: list[Any], *_args: Any, k: int, on_env: Any, **_kw: Any) -> Any:
        for env, _checkout in envs:
            on_env(env)
        solved = {ids[0]: k, ids[1]: 0}
        return CalibrationReport(
            {e.instance_id: Calibration(k=k, solved=solved[e.instance_id]) for e, _ in envs}
        )

    monkeypatch.setattr(evaluate, "version_policy", lambda *_a: object())
    monkeypatch.setattr(evaluate, "calibrate", calibrate)
    monkeypatch.setattr(SandboxRecipe, "production", classmethod(lambda cls, _s: object()))
    return ids


def test_versions_evaluate_as_json_is_what_the_registry_records(
    db: Database, heldout_store: list[str]
) -> None:
    register(db, "v1", base_model="org/base", adapter_path="/a/v1")
    result = _run("evaluate", "v1", "--k", "2", "--json")
    assert result.exit_code == 0, result.output
    evaluated = printed_json(result.stdout)  # nothing but the object on stdout
    listed = {v["name"]: v for v in json.loads(_ok("list", "--json"))}["v1"]
    assert evaluated == {
        "version": "v1",
        "base_model": "org/base",  # the version's base weights, as model list says
        "line": "default",
        "k": 2,
        "envs": 2,
        "pass_at_1": 0.5,
        "ci_low": listed["heldout_ci_low"],
        "ci_high": listed["heldout_ci_high"],
        "results": [
            {"instance_id": heldout_store[0], "k": 2, "solved": 2},
            {"instance_id": heldout_store[1], "k": 2, "solved": 0},
        ],
    }
    assert listed["heldout_pass_rate"] == 0.5 and listed["heldout_k"] == 2
    assert evaluated["base_model"] == listed["base_model"]
    assert 0 < evaluated["ci_low"] < 0.5 < evaluated["ci_high"] < 1
    # Without --json: the sentence, from the same record.
    assert re.fullmatch(
        r"v1: held-out pass rate 50\.0% on 2 env\(s\), 95% CI \d+\.\d%-\d+\.\d% "
        r"\(pass@1 from 2 rollout\(s\) each\)\n",
        _ok("evaluate", "v1", "--k", "2"),
    )


def test_versions_evaluate_base_as_json_names_the_base_model(
    db: Database, heldout_store: list[str]
) -> None:
    result = _run("evaluate-base", "--model", "org/base", "--json")
    assert result.exit_code == 0, result.output
    evaluated = printed_json(result.stdout)
    assert (evaluated["version"], evaluated["base_model"]) == (None, "org/base")
    assert (evaluated["line"], evaluated["k"], evaluated["envs"]) == ("default", 1, 2)
    assert evaluated["pass_at_1"] == 0.5  # 1 of 1, then 0 of 1
    assert [r["solved"] for r in evaluated["results"]] == [1, 0]
    text = _ok("evaluate-base", "--model", "org/base")
    assert text.startswith("base org/base on line default: held-out pass rate 50.0% on 2 env(s)")


# -- the rollout options ---------------------------------------------------------------------
@pytest.mark.parametrize(
    "command",
    [("model", "evaluate", "v1"), ("model", "evaluate-base"), ("envs", "calibrate")],
    ids=" ".join,
)
def test_rollout_options_refuse_no_rollouts_and_show_the_agents_defaults(
    data_dir: Path, command: tuple[str, ...]
) -> None:
    refused_k = run(*command, "--k", "0")
    assert refused_k.exit_code == 2 and "Invalid value for '--k'" in refused_k.output
    # AgentSettings' own lower bounds, refused before a model loads.
    for option, low in (("--max-turns", "0"), ("--max-new-tokens", "15")):
        refused = run(*command, option, low)
        assert refused.exit_code == 2 and f"Invalid value for '{option}'" in refused.output
    # The limits' defaults and bounds, read from AgentSettings.
    shown = " ".join(ok(*command[:2], "--help").split())
    assert "Agent turns. [default: 100; x>=1]" in shown
    assert "New tokens per model turn. [default: 8192; x>=16]" in shown
