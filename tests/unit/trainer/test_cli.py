"""The trainer's commands through the real ``ribbit`` group."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from bot.cli import main
from tests.plugins.trainer import FixRepo, calc_environment
from tests.support import printed_json
from trainer.envs.folders import EnvironmentFolders


@pytest.fixture
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("RIBBIT_DATA_DIR", str(tmp_path / "data"))
    return tmp_path / "data"


def test_envs_list_show_export_import(
    data_dir: Path, fix_with_new_test: FixRepo, tmp_path: Path
) -> None:
    env = calc_environment(fix_with_new_test)
    EnvironmentFolders(data_dir / "trainer").add(env, fix_with_new_test.path)
    runner = CliRunner()

    listed = runner.invoke(main, ["envs", "list"])
    assert listed.exit_code == 0, listed.output
    assert env.instance_id in listed.output and "F2P=1 P2P=1" in listed.output

    shown = runner.invoke(main, ["envs", "show", env.instance_id])
    assert json.loads(shown.output)["FAIL_TO_PASS"] == ["tests/test_add.py::test_add"]
    assert runner.invoke(main, ["envs", "show", "../nope"]).exit_code != 0

    out = tmp_path / "out.jsonl"
    exported = runner.invoke(main, ["envs", "export", str(out)])
    assert "exported 1" in exported.output
    other = tmp_path / "other"
    imported = runner.invoke(main, ["envs", "import", str(out), "--store", str(other)])
    assert "imported 1, refused 0" in imported.output
    from sqlalchemy import select

    from bot.store.db import Database
    from trainer.store import TrainingEnvironment
    from worker.settings import load_worker_settings

    db = Database(load_worker_settings().effective_database_url)
    with db.session() as s:
        rows = list(s.scalars(select(TrainingEnvironment)))
    assert [(r.instance_id, r.store_path) for r in rows] == [
        (env.instance_id, str(other.resolve()))
    ]
    db.dispose()
    again = runner.invoke(main, ["envs", "import", str(out), "--store", str(other)])
    assert "imported 0, refused 1" in again.output and "duplicate" in again.output

    skyrl = tmp_path / "skyrl.jsonl"
    exported = runner.invoke(main, ["envs", "export", str(skyrl), "--format", "skyrl"])
    assert exported.exit_code == 0, exported.output
    assert "(skyrl)" in exported.output and "ribbit envs image" in exported.output
    record = json.loads(skyrl.read_text())
    assert record["instance"]["instance_id"] == env.instance_id
    assert "eval_script" in record["instance"]
    bad = runner.invoke(main, ["envs", "export", str(skyrl), "--format", "parquet"])
    assert bad.exit_code == 2 and "parquet" in bad.output


def test_envs_image_without_an_engine_is_a_clear_error(
    data_dir: Path, fix_with_new_test: FixRepo, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = calc_environment(fix_with_new_test)
    EnvironmentFolders(data_dir / "trainer").add(env, fix_with_new_test.path)
    monkeypatch.setenv("RIBBIT_SANDBOX__DOCKER_URL", f"unix://{data_dir}/no-engine.sock")
    result = CliRunner().invoke(main, ["envs", "image"])
    assert result.exit_code == 1
    assert "Error:" in result.output and "Traceback" not in result.output


def test_envs_image_json_lists_each_environment_and_its_tag(
    data_dir: Path, fix_with_new_test: FixRepo, monkeypatch: pytest.MonkeyPatch
) -> None:
    import trainer.envs.export
    import worker.sandbox.docker

    env = calc_environment(fix_with_new_test)
    EnvironmentFolders(data_dir / "trainer").add(env, fix_with_new_test.path)
    engine = object()
    monkeypatch.setattr(worker.sandbox.docker, "docker_client", lambda *a, **k: engine)

    def build(chosen: Any, _store: object, client: object, *, base_image: str) -> str:
        assert client is engine and base_image == "base:1"
        return f"ribbit-testbed/{chosen.instance_id}:abc"

    monkeypatch.setattr(trainer.envs.export, "build_testbed_image", build)
    result = CliRunner().invoke(main, ["envs", "image", "--base-image", "base:1", "--json"])
    assert result.exit_code == 0, result.output
    tag = f"ribbit-testbed/{env.instance_id}:abc"
    # stdout parses alone: the line printed as each image is built went to stderr
    assert printed_json(result.stdout) == [{"instance_id": env.instance_id, "image": tag}]
    assert f"{env.instance_id}\t{tag}" in result.stderr


def test_model_promote_and_rollback(data_dir: Path) -> None:
    from bot.store.db import Database
    from trainer.registry import register
    from worker.settings import load_worker_settings

    db = Database(load_worker_settings().effective_database_url)
    db.migrate()
    register(db, "v1", base_model="base", adapter_path="/a/v1", heldout_pass_rate=0.5)
    register(db, "v2", base_model="base", adapter_path="/a/v2", heldout_pass_rate=0.4)
    db.dispose()
    runner = CliRunner()
    # Changed on purpose (#33): no per-environment results, no promotion without --force.
    assert runner.invoke(main, ["model", "promote", "v1"]).exit_code != 0
    assert runner.invoke(main, ["model", "promote", "v1", "--force"]).exit_code == 0
    refused = runner.invoke(main, ["model", "promote", "v2"])
    assert refused.exit_code != 0 and "no per-environment results" in refused.output
    listed = runner.invoke(main, ["model", "list", "--json"])
    assert {v["name"]: v["state"] for v in json.loads(listed.output)} == {
        "v1": "promoted",
        "v2": "candidate",
    }
    rolled = runner.invoke(main, ["model", "rollback"])
    assert "now serving the base model" in rolled.output
