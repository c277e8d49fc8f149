"""The base tree's set-up, once, for every test run of the gates outside a solve job
(``ribbit gates``, the trainer's grader), as a solve job does it.

The base commit is set up with the registry network (the proxy, the deployment's
credentials shown to that step alone) and snapshotted; every test run, the patched
tree's included, starts from a fresh copy of that snapshot in a sandbox opened with no
network at all. So a patch's own install hooks (a ``postinstall``, a changed
``setup.py``) never run with network: nothing of the patched tree is installed by a
registry-reaching step. Where no snapshot can be taken (test fakes) each run sets up
in its own sandbox, still with no network.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from bot.hostgit import GitError, git_ok
from worker.repo_config import RepoConfig
from worker.sandbox.base import ClosedOnExit, Sandbox, SandboxError, SandboxFactory
from worker.sandbox.envcache import JobEnvironment
from worker.sandbox.recipe import SandboxRecipe
from worker.sandbox.setup import SetupResult
from worker.settings import SandboxSettings


class BaseSetup(ClosedOnExit):
    """A base tree's set-up environment: :meth:`set_up` (or :meth:`adopt`, for a
    sandbox the caller set up) once, then :attr:`sandboxes` and :meth:`step` for the
    gates' ``GateContext``."""

    def __init__(self, recipe: SandboxRecipe, command: str | None, checkout: Path) -> None:
        self._recipe = recipe
        self._command = command
        self._checkout = checkout
        self._workdir = Path(tempfile.mkdtemp(prefix="ribbit-base-env-"))
        self._env = JobEnvironment(
            RepoConfig(setup=command),
            recipe.settings or SandboxSettings(),
            checkout=checkout,
            workdir=self._workdir,
        )
        self.result: SetupResult | None = None

    @property
    def sandboxes(self) -> SandboxFactory:
        """Where the gates' test runs go: the recipe's sandboxes, with no network."""
        return self._recipe.without_network()

    def set_up(self) -> SetupResult:
        """Set the base checkout up in a sandbox of its own, with the recipe's network."""
        with self._recipe(self._checkout) as sandbox:
            return self.adopt(sandbox, self._recipe.setup(sandbox, self._command))

    def adopt(self, sandbox: Sandbox, result: SetupResult) -> SetupResult:
        """Snapshot ``sandbox`` (over the base checkout, just set up: ``result``)."""
        if result.ok:
            result = self._env.adopt(sandbox, result)
        self.result = result
        return result

    def step(self, sandbox: Sandbox) -> SetupResult:
        """The setup step of a gate's test sandbox: the base's snapshot restored; the
        base's failure when it failed (nothing is set up again over another tree)."""
        if self.result is None:
            raise SandboxError("the base tree was not set up")
        if not self.result.ok:
            return self.result
        if self._env.snapshot is None:  # no snapshots on this sandbox (a fake)
            return self._recipe.without_network().setup(sandbox, self._command)
        return self._env.restore(sandbox)

    def close(self) -> None:
        self._env.close()
        shutil.rmtree(self._workdir, ignore_errors=True)


def base_checkout(repo_dir: Path, base_commit: str, dest: Path) -> Path:
    """A private clone of ``repo_dir`` at ``base_commit`` in ``dest`` (as the gates'
    trees are made: worker/gates/trees.py), for :class:`BaseSetup`."""
    try:
        git_ok(
            dest.parent,
            *("clone", "--quiet", "--no-checkout", "--no-hardlinks", "--"),
            *(str(repo_dir.resolve()), str(dest)),
        )
        git_ok(dest, "checkout", "--quiet", "--detach", base_commit)
        git_ok(dest, "remote", "remove", "origin")
    except GitError as exc:
        raise SandboxError(f"could not check the base commit out: {exc}") from None
    return dest
