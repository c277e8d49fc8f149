"""`ribbit model pull` from a local folder and from a (fake) hub endpoint, and a job on a
worker without weights: it fails before the agent, with the fix on the issue."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from bot.cli import main
from tests.plugins.hub import FakeHub
from worker.weights import MANIFEST, sha256_file, verify_weights

pytestmark = pytest.mark.integration
MODEL = "microsoft/FrogNano-4B-2609"


def _pull(tmp_path: Path, *args: str) -> Any:
    env = {"RIBBIT_DATA_DIR": str(tmp_path / "data"), "RIBBIT_MODEL__WEIGHTS_DIR": ""}
    env["RIBBIT_MODEL__WEIGHTS_DIR"] = str(tmp_path / "models")
    return CliRunner().invoke(main, ["model", "pull", *args], env=env)


def test_model_pull_from_a_hub_endpoint_checks_every_file(
    fake_hub: FakeHub, tmp_path: Path
) -> None:
    result = _pull(tmp_path, "--endpoint", fake_hub.url)
    assert result.exit_code == 0, result.output
    target = tmp_path / "models" / MODEL
    manifest = verify_weights(target)
    assert manifest.revision is not None and manifest.source == fake_hub.url
    served = set(fake_hub.files())
    assert set(manifest.files) == served and "model.safetensors" in served
    assert manifest.files["model.safetensors"] == sha256_file(fake_hub.folder / "model.safetensors")
    assert not (target / ".cache").exists()
    # The pulled folder loads with the hub switched off, as workers and servers run.
    from transformers import AutoConfig

    assert AutoConfig.from_pretrained(target, local_files_only=True).model_type


@pytest.mark.parametrize("damaged", [None, "model.safetensors", "config.json"])
def test_model_pull_again_downloads_only_when_what_is_there_is_not_the_hubs(
    fake_hub: FakeHub, tmp_path: Path, damaged: str | None
) -> None:
    """Helm runs the pull before every upgrade: weights already there at the hub's commit
    are re-hashed, not downloaded again; a changed file (same size) is pulled afresh."""
    assert _pull(tmp_path, "--endpoint", fake_hub.url).exit_code == 0
    target = tmp_path / "models" / MODEL
    if damaged:
        data = bytearray((target / damaged).read_bytes())
        data[-1] ^= 1
        (target / damaged).write_bytes(bytes(data))
    fake_hub.requests.clear()
    again = _pull(tmp_path, "--endpoint", fake_hub.url)
    assert again.exit_code == 0, again.output
    fetched = [r for r in fake_hub.requests if "/resolve/" in r]
    if damaged:
        assert fetched and "already" not in again.output, again.output
        assert f"pulled {MODEL}" in again.output
    else:
        assert not fetched and f"already pulled: {MODEL}" in again.output, again.output
    verify_weights(target)


@pytest.mark.parametrize("victim", ["model.safetensors", "config.json"])
def test_model_pull_refuses_what_differs_from_the_hubs_record(
    fake_hub: FakeHub, tmp_path: Path, victim: str
) -> None:
    original = (fake_hub.folder / victim).read_bytes()
    fake_hub.tamper[victim] = original[:-1] + bytes([original[-1] ^ 1])  # same size
    result = _pull(tmp_path, "--endpoint", fake_hub.url)
    assert result.exit_code != 0 and "checksum" in result.output, result.output
    assert not (tmp_path / "models" / MODEL).exists()


@pytest.mark.parametrize("evil", ["../../escaped.txt", "/etc/escaped.txt", "a/../../b.txt"])
def test_model_pull_refuses_a_listing_that_escapes_the_folder(
    fake_hub: FakeHub, tmp_path: Path, evil: str
) -> None:
    fake_hub.extra_tree.append({"type": "file", "path": evil, "size": 1, "oid": "0" * 40})
    result = _pull(tmp_path, "--endpoint", fake_hub.url)
    assert result.exit_code != 0 and "outside the model folder" in result.output
    assert not any(p.name == "escaped.txt" for p in tmp_path.rglob("*"))
    assert not any("/resolve/" in r for r in fake_hub.requests)  # refused before downloading


def test_model_pull_refuses_to_go_online_when_the_hub_is_offline(
    fake_hub: FakeHub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    result = _pull(tmp_path, "--endpoint", fake_hub.url)
    assert result.exit_code != 0 and "HF_HUB_OFFLINE=0 ribbit model pull" in result.output
    assert fake_hub.requests == []


def test_model_pull_from_a_local_folder_then_verify(tiny_model_dir: Path, tmp_path: Path) -> None:
    result = _pull(tmp_path, MODEL, "--from", str(tiny_model_dir))
    assert result.exit_code == 0, result.output
    target = tmp_path / "models" / MODEL
    recorded = json.loads((target / MANIFEST).read_text())
    assert recorded["source"] == str(tiny_model_dir.resolve())
    env = {"RIBBIT_MODEL__WEIGHTS_DIR": str(tmp_path / "models")}
    ok = CliRunner().invoke(main, ["model", "verify"], env=env)
    assert ok.exit_code == 0 and "match" in ok.output, ok.output
    shard = target / "model.safetensors"
    data = bytearray(shard.read_bytes())
    data[-1] ^= 1
    shard.write_bytes(bytes(data))
    bad = CliRunner().invoke(main, ["model", "verify"], env=env)
    assert bad.exit_code != 0 and "model.safetensors" in bad.output


def test_job_without_weights_fails_before_the_agent_and_says_how_to_fix(
    forge_world: Any, forge_settings: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from huggingface_hub import constants

    import worker.pipelines  # noqa: F401  (registers the pipelines)
    from bot.runtime import Runtime
    from bot.store.jobs import JobSpec
    from worker import agent
    from worker.jobs import run_job

    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "empty-hub-cache"))

    def never(*args: object, **kwargs: object) -> None:
        raise AssertionError("the agent started without weights")

    monkeypatch.setattr(agent, "run_agent", never)
    monkeypatch.setattr(agent, "load_policy", never)
    world = forge_world
    issue = world.forge.create_issue(
        "github", world.github.full_name, title="add() subtracts", author="maya"
    )
    runtime = Runtime.open(forge_settings)
    with runtime.db.session() as s:
        job = runtime.store.create(
            s,
            JobSpec(
                kind="solve",
                forge="github",
                repo=world.github.full_name,
                issue_number=issue.number,
                actor="maya",
            ),
        )
        assert job is not None
        job_id = job.id
    assert run_job(runtime, job_id) == "failed"
    stored = runtime.store.get(job_id)
    assert stored.failure_reason.startswith("refused: The model weights")
    comments = world.forge.comments("github", world.github.full_name, issue.number)
    text = comments[-1].body
    assert f"`ribbit model pull {MODEL}`" in text and "/ribbit retry" in text
    assert "Error" not in text and str(tmp_path) not in text
    assert not (forge_settings.data_dir / "trajectories").exists()
    runtime.db.dispose()
