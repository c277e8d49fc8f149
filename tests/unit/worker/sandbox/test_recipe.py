"""SandboxRecipe: a plain sandbox factory that also knows its setup step. The production
recipe opens sandboxes on the deployment's (or a repository's) image, with the setup
network only where the settings allow it, and sets them up with that same image's
settings; a repository's image never stacks on another's. (The image choice seen from
the setup step is also covered in tests/unit/worker/agent/test_episode.py.)"""

from __future__ import annotations

from pathlib import Path

import pytest

import worker.sandbox
import worker.sandbox.setup as sandbox_setup
from worker.repo_config import RepoConfig
from worker.sandbox.base import Sandbox, SandboxFactory
from worker.sandbox.recipe import SandboxRecipe
from worker.sandbox.setup import SetupResult
from worker.settings import SandboxSettings


def _result(command: str | None) -> SetupResult:
    return SetupResult(command=command, ok=True, exit_code=0, output="", duration_s=0.0)


class Opener:
    """Records the sandbox_factory calls the production recipe makes, and what its
    factories are asked to open."""

    def __init__(self) -> None:
        self.factories: list[tuple[SandboxSettings, bool]] = []
        self.opened: list[tuple[SandboxSettings, Path]] = []

    def __call__(self, settings: SandboxSettings, *, network: bool = False) -> SandboxFactory:
        self.factories.append((settings, network))

        def factory(source: Path) -> Sandbox:
            self.opened.append((settings, source))
            return object()  # type: ignore[return-value]

        return factory


@pytest.fixture
def opener(monkeypatch: pytest.MonkeyPatch) -> Opener:
    recorded = Opener()
    monkeypatch.setattr(worker.sandbox, "sandbox_factory", recorded)
    return recorded


def test_recipe_is_a_sandbox_factory_and_binds_a_setup_command() -> None:
    opened: list[Path] = []
    ran: list[tuple[object, str | None]] = []
    box = object()

    def open_(source: Path) -> Sandbox:
        opened.append(source)
        return box  # type: ignore[return-value]

    def setup(sandbox: Sandbox, command: str | None) -> SetupResult:
        ran.append((sandbox, command))
        return _result(command)

    recipe = SandboxRecipe(open_, setup)
    assert recipe(Path("/src")) is box and opened == [Path("/src")]
    step = recipe.step("make deps")
    assert step(box).command == "make deps"
    assert recipe.step(None)(box).command is None
    assert ran == [(box, "make deps"), (box, None)]


def test_recipe_without_a_variant_keeps_its_image() -> None:
    recipe = SandboxRecipe(lambda _s: object(), lambda _b, _c: _result(None))  # type: ignore[arg-type, return-value]
    assert recipe.for_image("team/image:1") is recipe
    asked: list[str] = []

    def variant(image: str) -> SandboxRecipe:
        asked.append(image)
        return recipe

    choosing = SandboxRecipe(recipe.open, recipe.setup, variant)
    assert choosing.for_image("") is choosing and choosing.for_image(None) is choosing
    assert asked == []
    choosing.for_image("team/image:1")
    assert asked == ["team/image:1"]


@pytest.mark.parametrize("setup_network", [True, False])
def test_production_opens_with_the_setup_network_the_settings_allow(
    opener: Opener, setup_network: bool
) -> None:
    settings = SandboxSettings(backend="bubblewrap", setup_network=setup_network)
    recipe = SandboxRecipe.production(settings)
    assert opener.factories == [(settings, setup_network)]
    recipe(Path("/src"))
    assert opener.opened == [(settings, Path("/src"))]


def test_without_network_opens_sandboxes_with_none(opener: Opener) -> None:
    settings = SandboxSettings(backend="bubblewrap", setup_network=True)
    recipe = SandboxRecipe.production(settings)
    offline = recipe.without_network()
    assert opener.factories == [(settings, True)]  # made on first use only
    offline(Path("/src"))
    offline(Path("/other"))
    assert opener.factories == [(settings, True), (settings, False)]
    assert offline.without_network() is offline and offline.settings is settings
    fake = SandboxRecipe(lambda _s: object(), lambda _b, _c: _result(None))  # type: ignore[arg-type, return-value]
    assert fake.without_network() is fake  # its sandboxes never had network


def test_production_on_a_repos_image_opens_and_sets_up_on_that_image(opener: Opener) -> None:
    base = SandboxSettings(backend="docker", memory_mb=512, image="ribbit-sandbox:latest")
    recipe = SandboxRecipe.production(base)
    other = recipe.for_image("team/image:1")
    other(Path("/src"))
    (_, (on_image, _network)) = opener.factories
    assert on_image.image == "team/image:1"
    assert on_image.memory_mb == 512  # the rest of the deployment's settings stay
    assert base.image == "ribbit-sandbox:latest"  # the deployment's own are untouched
    assert opener.opened[0][0].image == "team/image:1"
    # A third image replaces the second; it is not layered over it.
    third = other.for_image("team/image:2")
    third(Path("/src"))
    assert opener.factories[-1][0] == base.model_copy(update={"image": "team/image:2"})


def test_production_setup_runs_the_command_with_the_recipes_settings(
    opener: Opener, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[tuple[object, RepoConfig, SandboxSettings]] = []

    def run_setup(sandbox: Sandbox, config: RepoConfig, settings: SandboxSettings) -> SetupResult:
        calls.append((sandbox, config, settings))
        return _result(config.setup)

    monkeypatch.setattr(sandbox_setup, "run_setup", run_setup)
    box = object()
    recipe = SandboxRecipe.production(SandboxSettings(backend="bubblewrap"))
    assert recipe.step("pip install -e .")(box).command == "pip install -e ."  # type: ignore[arg-type]
    recipe.for_image("team/image:1").step(None)(box)  # type: ignore[arg-type]
    (first, second) = calls
    assert first[0] is box and first[1] == RepoConfig(setup="pip install -e .")
    assert first[2].image == "ribbit-sandbox:latest"
    # Only the command comes from the step: nothing else of a .ribbit.yml reaches setup.
    assert second[1] == RepoConfig(setup=None)
    assert second[2].image == "team/image:1"
