"""How every sandbox that runs a repository's code is opened and set up: the solve
job's, ``ribbit run``'s, the rollouts', the environment builder's, the reward's and the
gates'. It lives with the sandboxes (below the agent and the gates, which both use it)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from worker.sandbox.base import Sandbox, SandboxError, SandboxFactory

if TYPE_CHECKING:
    from worker.sandbox.setup import SetupResult
    from worker.settings import SandboxSettings

SetupRunner = Callable[[Sandbox, str | None], "SetupResult"]
"""Sets a fresh sandbox up for a repository whose setup command is the second argument
(None: the environment only). Returns what happened; never raises for a failed command."""


@dataclass(frozen=True)
class SandboxRecipe:
    """How every sandbox that runs a repository's code is opened over a checkout and set
    up: the solve job's, ``ribbit run``'s, the rollouts', the environment builder's and
    the reward's. Callable as a plain sandbox factory."""

    open: SandboxFactory
    setup: SetupRunner
    # The same recipe on another image (a repository's own); None: the image is not
    # this recipe's to choose (host-copy test sandboxes).
    image_variant: Callable[[str], SandboxRecipe] | None = None
    # The same sandboxes with no network at all, for code no registry may see run (a
    # judged patch's); None: ``open`` never gives network (test fakes, host copies).
    offline: SandboxFactory | None = None
    # The deployment's sandbox settings (None for test fakes): which credentials the
    # setup step is shown, for the snapshot's search (worker/sandbox/secretscan.py).
    settings: SandboxSettings | None = None

    def __call__(self, source: Path) -> Sandbox:
        return self.open(source)

    def step(self, command: str | None) -> Callable[[Sandbox], SetupResult]:
        """The setup step bound to one repository's command (the gates' ``setup_step``)."""
        return partial(self.setup, command=command)  # type: ignore[call-arg]

    def without_network(self) -> SandboxRecipe:
        """This recipe on sandboxes that never have network: its setup step then runs
        with none either (worker/sandbox/setup.py gives the proxy only to sandboxes
        opened for it)."""
        if self.offline is None:
            return self
        return replace(self, open=self.offline, offline=None, image_variant=None)

    def for_image(self, image: str | None) -> SandboxRecipe:
        """This recipe on ``image`` (an environment's or a ``.ribbit.yml``'s), or as it is
        when none is named."""
        if not image or self.image_variant is None:
            return self
        return self.image_variant(image)

    @classmethod
    def production(cls, settings: SandboxSettings, *, image: str | None = None) -> SandboxRecipe:
        """The deployment's sandboxes (``auto`` resolved once), each able to run its setup
        command through the registry proxy when ``settings.setup_network`` allows it, set
        up by the production step. ``image``: the repository's own (``.ribbit.yml``
        ``image``, recorded in an environment) instead of the deployment's."""
        from worker.sandbox import sandbox_factory

        base = settings
        if image:
            settings = settings.model_copy(update={"image": image})

        def on_image(other: str) -> SandboxRecipe:
            return cls.production(base, image=other)

        return cls(
            sandbox_factory(settings, network=settings.setup_network),
            partial(_production_setup, settings=settings),
            on_image,
            offline=_offline(settings),
            settings=settings,
        )


def _offline(settings: SandboxSettings) -> SandboxFactory:
    """``sandbox_factory(settings, network=False)``, made on first use: most recipes
    never open a sandbox without network, and making one resolves ``auto`` again."""
    made: list[SandboxFactory] = []

    def open_offline(source: Path) -> Sandbox:
        from worker.sandbox import sandbox_factory

        if not made:
            made.append(sandbox_factory(settings, network=False))
        return made[0](source)

    return open_offline


def _production_setup(
    sandbox: Sandbox, command: str | None, *, settings: SandboxSettings
) -> SetupResult:
    from worker.repo_config import RepoConfig
    from worker.sandbox.setup import credentials_in_use, run_setup

    # run_setup reads only the config's setup command.
    result = run_setup(sandbox, RepoConfig(setup=command), settings)
    shown = credentials_in_use(settings, command)
    if not result.ok or not shown:
        return result
    # The agent (``ribbit run``, a rollout) or the tests work on in this sandbox: no copy
    # of the credentials may be there (a job's own snapshot is searched the same way).
    return _searched(sandbox, result, shown)


def _searched(sandbox: Sandbox, result: SetupResult, shown: dict[str, bytes]) -> SetupResult:
    import tempfile
    from dataclasses import replace

    from worker.sandbox.secretscan import SecretInSnapshot
    from worker.sandbox.snapshot import Snapshottable, take_snapshot

    if not isinstance(sandbox, Snapshottable):
        return result
    with tempfile.TemporaryDirectory(prefix="ribbit-setup-search-") as tmp:
        try:
            # No checkout to prune by: the whole workspace is searched.
            take_snapshot(sandbox, Path(tmp) / "none", Path(tmp) / "snap", secrets=shown)
        except SecretInSnapshot as exc:
            return replace(result, ok=False, output=f"{result.output}\n[set-up refused: {exc}]")
        except (SandboxError, OSError) as exc:
            note = f"[could not search the set-up for copies of its credentials: {exc}]"
            return replace(result, ok=False, output=f"{result.output}\n{note}")
    return result
