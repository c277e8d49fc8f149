"""`ribbit doctor`'s model-host check: on CPU the memory fp32 weights take and what a
turn costs; on a GPU whether the bf16 weights fit; silent where no model runs here."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from worker import doctor
from worker.settings import ModelSettings, WorkerSettings

GIB = 2**30


def _checkpoint(folder: Path, stored_gib: int, dtype: str = "bfloat16") -> Path:
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(f'{{"torch_dtype": "{dtype}"}}')
    for i in range(2):  # sharded as the hub's are; sparse files, so no disk is used
        with open(folder / f"model-0000{i + 1}-of-00002.safetensors", "wb") as fh:
            fh.truncate(stored_gib * GIB // 2)
    return folder


def _settings(tmp_path: Path, **model: object) -> WorkerSettings:
    return WorkerSettings(data_dir=tmp_path / "data", model=ModelSettings(**model))


@pytest.fixture
def cpu_host(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)


@pytest.fixture
def gpu_host(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    props = SimpleNamespace(name="NVIDIA H100", total_memory=80 * GIB)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda _index: props)


@pytest.mark.usefixtures("cpu_host")
def test_on_cpu_it_warns_with_the_memory_fp32_takes_and_the_budget(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    weights = _checkpoint(tmp_path / "frog", stored_gib=8)
    monkeypatch.setattr(doctor, "host_memory_bytes", lambda: 64 * GIB)
    [check] = doctor.model_host_check(_settings(tmp_path, model=str(weights)))
    assert check.status == "warn"
    assert "no GPU" in check.detail and "64.0 GiB of memory" in check.detail
    assert "the weights 16.0 GiB in fp32" in check.detail
    assert "50-minute agent budget" in check.detail
    assert "RIBBIT_MODEL__POLICY=openai" in check.detail


@pytest.mark.usefixtures("cpu_host")
def test_on_cpu_too_little_memory_fails_before_a_job_is_killed_loading_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    weights = _checkpoint(tmp_path / "frog", stored_gib=8)
    monkeypatch.setattr(doctor, "host_memory_bytes", lambda: 17 * GIB)  # 16 GiB: too tight
    [check] = doctor.model_host_check(_settings(tmp_path, model=str(weights)))
    assert check.status == "fail"
    assert "takes 16.0 GiB in fp32" in check.detail and "17.0 GiB of memory" in check.detail


@pytest.mark.usefixtures("cpu_host")
def test_fp32_checkpoints_are_not_doubled(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    weights = _checkpoint(tmp_path / "frog", stored_gib=8, dtype="float32")
    monkeypatch.setattr(doctor, "host_memory_bytes", lambda: 12 * GIB)
    [check] = doctor.model_host_check(_settings(tmp_path, model=str(weights)))
    assert check.status == "warn" and "the weights 8.0 GiB in fp32" in check.detail


@pytest.mark.usefixtures("gpu_host")
def test_on_a_gpu_bf16_weights_must_fit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fits = _checkpoint(tmp_path / "frog", stored_gib=8)
    [check] = doctor.model_host_check(_settings(tmp_path, model=str(fits)))
    assert check.status == "ok" and "NVIDIA H100, 80.0 GiB" in check.detail
    tight = _checkpoint(tmp_path / "seal", stored_gib=76)  # no room for the KV cache
    [check] = doctor.model_host_check(_settings(tmp_path, model=str(tight)))
    assert check.status == "warn" and "little left for the KV cache" in check.detail
    too_big = _checkpoint(tmp_path / "whale", stored_gib=96)
    [check] = doctor.model_host_check(_settings(tmp_path, model=str(too_big)))
    assert check.status == "fail" and "RIBBIT_MODEL__QUANTIZATION=4bit" in check.detail
    quantized = _settings(tmp_path, model=str(too_big), quantization="4bit")
    assert [c.status for c in doctor.model_host_check(quantized)] == ["ok"]


@pytest.mark.usefixtures("cpu_host")
def test_nothing_to_say_where_no_model_runs_on_this_host(tmp_path: Path) -> None:
    assert doctor.model_host_check(_settings(tmp_path, policy="replay")) == []
    served = _settings(tmp_path, policy="openai", openai_base_url="http://127.0.0.1:9/v1")
    assert doctor.model_host_check(served) == []


@pytest.mark.usefixtures("cpu_host")
def test_before_the_weights_are_pulled_a_cpu_host_is_warned_without_their_size(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(doctor, "host_memory_bytes", lambda: 64 * GIB)
    [check] = doctor.model_host_check(_settings(tmp_path, model="someone/not-pulled"))
    assert check.status == "warn" and "no GPU" in check.detail
    assert "in fp32" not in check.detail  # no size to state
    assert doctor.model_host_check(_settings(tmp_path, model="not a model id")) != []


@pytest.mark.usefixtures("cpu_host")
def test_doctor_runs_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from bot.doctor import run_checks

    weights = _checkpoint(tmp_path / "frog", stored_gib=8)
    monkeypatch.setattr(doctor, "host_memory_bytes", lambda: 64 * GIB)
    checks = run_checks(_settings(tmp_path, model=str(weights)))
    assert [c.status for c in checks if c.name == "model host"] == ["warn"]


def test_host_memory_is_the_cgroup_limit_where_that_is_lower(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from worker.sandbox import cgroup

    monkeypatch.setattr(cgroup, "memory_limit", lambda root=cgroup.CGROUP_ROOT: 8 * GIB)
    assert doctor.host_memory_bytes() == 8 * GIB
    monkeypatch.setattr(cgroup, "memory_limit", lambda root=cgroup.CGROUP_ROOT: None)
    assert doctor.host_memory_bytes() > 8 * GIB  # this machine's physical memory
