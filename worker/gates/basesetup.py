"""The base tree's set-up, once, for every test run of the gates outside a solve job
(``ribbit gates``, the trainer's grader), as a solve job does it.

The base commit is set up with the registry network (the proxy, the deployment's
credentials shown to that step alone) and snapshotted; every test run, the patched
tree's included, starts from a fresh copy of that snapshot in a sandbox opened with no
network at all. So a patch's own install hooks (a ``postinstall``, a changed
``setup.py``) never run with network: nothing of the patched tree is installed by a
registry-reaching step. Where no snapshot can be taken (test fakes) each run sets up
in its own sandbox, still with no network.

A patch that changes dependency manifests (worker/sandbox/envcache.py
``MANIFEST_NAMES``: package.json, requirements*.txt, pyproject.toml, setup.py, go.mod,
Cargo.toml, lock files...) would otherwise be tested without what it adds. For it the
base's setup command runs once more, over the patched tree, in a fresh sandbox restored
from the base's snapshot, with the registry proxy alone and package install scripts
disabled where the tool allows it (npm, pnpm and yarn lifecycle scripts ignored; pip
installs wheels only, so no ``setup.py`` runs) unless ``.ribbit.yml``
``patch_install_scripts`` allows them, and without the deployment's registry
credentials (the patch's manifests could point them elsewhere). That step is
snapshotted and the patched tree's test runs restore it; its command, output
and refusals are the first lines of the patched run's log in the gate report. Build
scripts no tool can disable (cargo's build.rs, go generate is never run) are a reason
to keep ``patch_install_scripts`` off and review such patches by hand.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

from bot.hostgit import GitError, detached_clone, run_git
from worker.gates.patch import PatchParseError, parse_patch
from worker.repo_config import RepoConfig
from worker.sandbox.base import WORKSPACE, ClosedOnExit, Sandbox, SandboxError, SandboxFactory
from worker.sandbox.envcache import JobEnvironment, is_manifest
from worker.sandbox.recipe import SandboxRecipe
from worker.sandbox.reinstall import SetupManner
from worker.sandbox.setup import OUTPUT_TAIL, SetupResult, exec_with_egress
from worker.settings import SandboxSettings

# Install scripts off, in every spelling the package managers read.
NO_INSTALL_SCRIPTS: Mapping[str, str] = {
    "npm_config_ignore_scripts": "true",  # npm, pnpm, yarn 1
    "YARN_ENABLE_SCRIPTS": "false",  # yarn 2+
    "PIP_ONLY_BINARY": ":all:",  # no sdist build: no setup.py runs
}


def changed_manifests(patch: str) -> tuple[str, ...]:
    """The dependency manifests ``patch`` adds, changes, renames or deletes."""
    try:
        parsed = parse_patch(patch)
    except PatchParseError:
        return ()
    paths = {str(p) for f in parsed.files for p in (f.old, f.new) if p is not None}
    return tuple(sorted(p for p in paths if is_manifest(p)))


class BaseSetup(ClosedOnExit):
    """A base tree's set-up environment: :meth:`set_up` (or :meth:`adopt`, for a
    sandbox the caller set up) once, then :attr:`sandboxes` and :meth:`step` for the
    gates' ``GateContext``."""

    def __init__(
        self,
        recipe: SandboxRecipe,
        command: str | None,
        checkout: Path,
        *,
        patch: str = "",
        install_scripts: bool = False,
    ) -> None:
        self._recipe = recipe
        self._command = command
        self._checkout = checkout
        self._patch = patch
        self._install_scripts = install_scripts
        self.manifests = changed_manifests(patch) if command else ()
        # The patched manifests' install: its environment, or why there is none.
        self._patched: JobEnvironment | SetupResult | None = None
        self._workdir = Path(tempfile.mkdtemp(prefix="ribbit-base-env-"))
        self._env = JobEnvironment(
            RepoConfig(setup=command),
            recipe.settings or SandboxSettings(),
            checkout=checkout,
            workdir=self._workdir,
        )
        self.result: SetupResult | None = None
        self._patched_log = ""

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
        if not self.manifests or not self._over_patched_manifests(sandbox):
            return self._env.restore(sandbox)
        if self._patched is None:
            self._patched = self._install_patched()
        if isinstance(self._patched, SetupResult):
            return self._patched
        restored = self._patched.restore(sandbox)
        return replace(restored, output=f"{self._patched_log}\n{restored.output}")

    def _over_patched_manifests(self, sandbox: Sandbox) -> bool:
        """Whether ``sandbox`` (fresh, nothing run in it) is over a tree whose manifests
        are not the base's: the patched tree."""
        return any(
            _sandbox_file(sandbox, rel) != _host_file(self._checkout / rel)
            for rel in self.manifests
        )

    def _install_patched(self) -> JobEnvironment | SetupResult:
        """The base's setup command again, over the patched tree, in a fresh sandbox
        from the base's snapshot: registry network only, install scripts as allowed."""
        start = time.monotonic()
        tree = self._workdir / "patched"
        try:
            base_checkout(self._checkout, "HEAD", tree)
        except SandboxError as exc:
            return self._failed(f"[could not build the patched tree: {exc}]", start)
        data = self._patch.encode("utf-8", errors="surrogateescape")
        applied = run_git(
            tree, "apply", "--binary", "--whitespace=nowarn", "-", stdin=data.rstrip(b"\n") + b"\n"
        )
        if applied.returncode != 0:
            return self._failed("[the patch does not apply to the base commit]", start)
        settings = self._recipe.settings or SandboxSettings()
        env = JobEnvironment(
            RepoConfig(setup=self._command), settings, checkout=tree, workdir=self._workdir / "pe"
        )
        # As the step below runs (and so a fetch of the build backend, reinstall.py).
        scripts_off = None if self._install_scripts else NO_INSTALL_SCRIPTS
        env.manner = SetupManner(credentials=False, env=scripts_off)
        scripts = "allowed by .ribbit.yml" if self._install_scripts else "disabled"
        self._patched_log = (
            f"[the patch changes {', '.join(self.manifests)}: `{self._command}` ran again "
            f"over the patched tree, registry network only, install scripts {scripts}]"
        )
        with self._recipe(tree) as sandbox:
            restored = self._env.restore(sandbox)
            if not restored.ok:
                return self._failed(f"{self._patched_log}\n{restored.output}", start)
            run = exec_with_egress(
                sandbox,
                ["bash", "-c", self._command or "true"],
                settings,
                timeout=settings.setup_timeout_s,
                # The manifests (an .npmrc, an --index-url line) are the patch's: they
                # could send a token wherever a registry host lets them.
                credentials=env.manner.credentials,
                env=env.manner.env,
            )
            out = f"{run.result.stdout}\n{run.result.stderr}".strip()[-OUTPUT_TAIL:]
            result = SetupResult(
                command=self._command,
                ok=run.result.exit_code == 0 and not run.result.timed_out,
                exit_code=run.result.exit_code,
                output=f"{self._patched_log}\n{out}",
                duration_s=time.monotonic() - start,
                timed_out=run.result.timed_out,
                network=run.network,
                blocked=run.blocked,
            )
            if result.blocked:
                result = replace(result, output=f"{result.output}\n{result.blocked_markdown()}")
            if result.ok:
                result = env.adopt(sandbox, result)
        if not result.ok:
            return result
        self._patched_log = result.output
        return env

    def _failed(self, output: str, start: float) -> SetupResult:
        return SetupResult(
            command=self._command,
            ok=False,
            exit_code=None,
            output=output,
            duration_s=time.monotonic() - start,
        )

    def close(self) -> None:
        if isinstance(self._patched, JobEnvironment):
            self._patched.close()
        self._env.close()
        shutil.rmtree(self._workdir, ignore_errors=True)


def _sandbox_file(sandbox: Sandbox, rel: str) -> bytes | None:
    try:
        return sandbox.read_file(f"{WORKSPACE}/{rel}")
    except (SandboxError, OSError):
        return None


def _host_file(path: Path) -> bytes | None:
    try:
        return path.read_bytes() if path.is_file() and not path.is_symlink() else None
    except OSError:
        return None


def base_checkout(repo_dir: Path, base_commit: str, dest: Path) -> Path:
    """A private clone of ``repo_dir`` at ``base_commit`` in ``dest`` (host git's
    detached clone, as the gates' trees are made), for :class:`BaseSetup`."""
    try:
        detached_clone(repo_dir, base_commit, dest)
    except GitError as exc:
        raise SandboxError(f"could not check the base commit out: {exc}") from None
    return dest
