"""`ribbit worker` in a web-only install: refused before it starts, with the extra to
install; and the extras detection it relies on, read from Ribbit's own metadata."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from bot import extras
from bot.cli import main


def test_worker_refuses_to_start_without_the_worker_extra(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import worker.cli

    monkeypatch.setattr(worker.cli, "missing_requirements", lambda extra: ["torch", "docker"])
    # Nothing past the refusal may run: a started worker would take jobs and fail them.
    monkeypatch.setattr(worker.cli, "settings_or_exit", lambda: pytest.fail("it started"))
    result = CliRunner().invoke(main, ["worker"])
    assert result.exit_code == 1
    message = result.output.strip()
    assert len(message.splitlines()) == 1
    assert "pip install 'ribbit[worker]'" in message and "torch, docker" in message


def test_missing_requirements_names_what_an_extra_lacks(monkeypatch: pytest.MonkeyPatch) -> None:
    declared = [
        "flask>=3",
        'torch>=2.4; extra == "worker"',
        'docker>=7.1; extra == "worker"',
        'ribbit[worker]; extra == "train"',
    ]
    installed = {"flask", "docker"}

    def distribution(name: str) -> object:
        if name not in installed:
            raise extras.PackageNotFoundError(name)
        return object()

    monkeypatch.setattr(extras, "requires", lambda _dist: declared)
    monkeypatch.setattr(extras, "distribution", distribution)
    assert extras.missing_requirements("worker") == ["torch"]
    assert extras.missing_requirements("train") == ["torch"]
    installed.add("torch")
    assert extras.missing_requirements("worker") == []
