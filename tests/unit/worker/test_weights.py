"""Base weights in the models volume: pulled with checksums, checked before a job runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bot.store.db import Database
from worker.model_choice import ModelNotReady, local_weights, preflight
from worker.settings import ModelSettings, WorkerSettings
from worker.weights import (
    MANIFEST,
    WeightsError,
    find_weights,
    pull_from_directory,
    verify_weights,
    weights_path,
)

MODEL = "microsoft/FrogNano-4B-2609"


def _model_folder(path: Path) -> Path:
    path.mkdir(parents=True)
    (path / "config.json").write_text('{"model_type": "qwen3_5"}')
    (path / "model.safetensors").write_bytes(b"\x00weights" * 100)
    (path / "sub").mkdir()
    (path / "sub" / "tokenizer.json").write_text("{}")
    return path


def test_weights_pull_from_directory_records_checksums(tmp_path: Path) -> None:
    source = _model_folder(tmp_path / "src")
    manifest = pull_from_directory(source, tmp_path / "models", MODEL)
    target = tmp_path / "models" / MODEL
    assert set(manifest.files) == {"config.json", "model.safetensors", "sub/tokenizer.json"}
    recorded = json.loads((target / MANIFEST).read_text())
    assert recorded["digest"] == manifest.digest and recorded["source"] == str(source)
    assert verify_weights(target) == manifest
    assert not list((tmp_path / "models" / "microsoft").glob(".pull-*"))  # no staging left


def test_weights_pull_refuses_a_source_that_differs_from_its_manifest(tmp_path: Path) -> None:
    first = pull_from_directory(_model_folder(tmp_path / "src"), tmp_path / "a", MODEL)
    copy = tmp_path / "a" / MODEL
    (copy / "model.safetensors").write_bytes(b"tampered")
    with pytest.raises(WeightsError, match="SHA-256"):
        pull_from_directory(copy, tmp_path / "b", MODEL)
    assert not (tmp_path / "b" / MODEL).exists()  # nothing half-imported looks like weights
    assert first.files


def test_weights_verify_and_find_catch_damage(tmp_path: Path) -> None:
    pull_from_directory(_model_folder(tmp_path / "src"), tmp_path / "m", MODEL)
    target = tmp_path / "m" / MODEL
    shard = target / "model.safetensors"
    shard.write_bytes(shard.read_bytes()[::-1])  # same size, other bytes
    find_weights(target)  # the cheap check looks at sizes only
    with pytest.raises(WeightsError, match=r"model\.safetensors"):
        verify_weights(target)
    shard.unlink()
    with pytest.raises(WeightsError, match="missing"):
        find_weights(target)


@pytest.mark.parametrize("bad", ["../etc", "a/../../b", "/abs/path", "a/b/c", ""])
def test_weights_path_refuses_ids_that_escape_the_volume(tmp_path: Path, bad: str) -> None:
    with pytest.raises(WeightsError):
        weights_path(tmp_path, bad)


def test_weights_preflight_names_the_pull_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "empty-cache"))
    settings = WorkerSettings(data_dir=tmp_path / "data")
    db = Database(settings.effective_database_url)
    db.migrate()
    with pytest.raises(ModelNotReady) as info:
        preflight(db, settings)
    text = info.value.for_issue()
    assert f"`ribbit model pull {MODEL}`" in text and "/ribbit retry" in text
    assert str(tmp_path) not in text and "Error" not in text  # no paths, no class names

    pull_from_directory(_model_folder(tmp_path / "src"), settings.effective_weights_dir, MODEL)
    ready = preflight(db, settings)
    assert ready.model == str(settings.effective_weights_dir / MODEL)
    db.dispose()


def test_weights_preflight_leaves_served_models_to_the_server(tmp_path: Path) -> None:
    served = WorkerSettings(
        data_dir=tmp_path, model=ModelSettings(policy="openai", model="frognano")
    )
    db = Database(served.effective_database_url)
    db.migrate()
    # Served: nothing to check on this host, but the tokenizer's folder is the one
    # `ribbit model pull` fills (DATA_DIR/models when RIBBIT_MODEL__WEIGHTS_DIR is unset).
    checked = preflight(db, served)
    assert checked.weights_dir == served.effective_weights_dir == tmp_path / "models"
    assert checked.model_copy(update={"weights_dir": None}) == served.model
    replay = WorkerSettings(data_dir=tmp_path, model=ModelSettings(policy="replay"))
    with pytest.raises(ModelNotReady, match="replay"):
        preflight(db, replay)
    with pytest.raises(ModelNotReady, match="holds no weights"):
        local_weights(ModelSettings(model=str(tmp_path / "empty")), tmp_path)
    db.dispose()


def test_weights_doctor_fails_with_the_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from huggingface_hub import constants

    from bot.doctor import run_checks

    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "empty-cache"))
    settings = WorkerSettings(data_dir=tmp_path / "data")
    check = next(c for c in run_checks(settings) if c.name == "model")
    assert check.status == "fail" and f"ribbit model pull {MODEL}" in check.detail
    pull_from_directory(_model_folder(tmp_path / "src"), settings.effective_weights_dir, MODEL)
    check = next(c for c in run_checks(settings) if c.name == "model")
    assert check.status == "ok", check.detail


def test_weights_model_version_records_its_base_and_adapter(tmp_path: Path) -> None:
    from trainer import registry
    from worker.weights import base_digest, folder_digest

    root = tmp_path / "models"
    pulled = pull_from_directory(_model_folder(tmp_path / "src"), root, MODEL)
    adapter = tmp_path / "adapter"
    adapter.mkdir()
    (adapter / "adapter_config.json").write_text('{"r": 2}')
    (adapter / "adapter_model.safetensors").write_bytes(b"lora")
    db = Database(f"sqlite:///{tmp_path / 'r.db'}")
    db.migrate()
    version = registry.register(
        db,
        "v1",
        base_model=MODEL,
        adapter_path=str(adapter),
        base_digest=base_digest(MODEL, root),
    )
    assert version.base_digest == pulled.digest
    assert version.adapter_digest == folder_digest(adapter)
    (adapter / "adapter_model.safetensors").write_bytes(b"other")
    assert folder_digest(adapter) != version.adapter_digest  # the record pins the bytes
    assert base_digest("someone/not-pulled", root) is None
    db.dispose()


def test_weights_trainer_loads_the_pulled_base(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import click
    from huggingface_hub import constants

    from trainer.cli.training import _pulled_base

    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "empty-cache"))
    settings = WorkerSettings(data_dir=tmp_path / "data")
    with pytest.raises(click.ClickException, match=f"ribbit model pull {MODEL}"):
        _pulled_base(settings)
    pull_from_directory(_model_folder(tmp_path / "src"), settings.effective_weights_dir, MODEL)
    assert _pulled_base(settings) == str(settings.effective_weights_dir / MODEL)
