"""bot/model_versions.py is a seam with no logic of its own; what can break is the
trainer's side drifting from it. The entry point hands RegistryVersions to the web app
untyped (bot/cli.py reads it from the installed metadata), so mypy never compares the
two: these tests do. The registry's own rules are in tests/unit/trainer/test_registry.py."""

from __future__ import annotations

import inspect

import pytest

from bot.model_versions import ModelVersionError, ModelVersions, ServedVersion
from trainer.registry import RegistryError, RegistryVersions

METHODS = ["promote", "rollback", "serving"]


def test_the_protocol_names_every_method_the_web_side_calls() -> None:
    declared = {
        name
        for name, value in vars(ModelVersions).items()
        if callable(value) and not name.startswith("_")
    }
    assert declared == set(METHODS)


@pytest.mark.parametrize("method", METHODS)
def test_the_trainers_registry_takes_the_protocols_parameters(method: str) -> None:
    # Names, kinds and defaults: the dashboard calls rollback() with no line and the CLI
    # passes force by keyword, so a renamed or re-defaulted parameter breaks one of them.
    wanted = inspect.signature(getattr(ModelVersions, method)).parameters
    got = inspect.signature(getattr(RegistryVersions, method)).parameters
    assert [(p.name, p.kind, p.default) for p in got.values()] == [
        (p.name, p.kind, p.default) for p in wanted.values()
    ]


def test_a_registry_refusal_is_a_model_version_error() -> None:
    # bot/web/admin/actions.py catches only ModelVersionError: anything else is a 500 page
    # instead of the refusal's message.
    assert issubclass(RegistryError, ModelVersionError)


def test_serving_answers_with_the_web_sides_record() -> None:
    hints = inspect.get_annotations(RegistryVersions.serving, eval_str=True)
    assert hints["return"] == ServedVersion | None
