"""Sandboxes for untrusted commands: choose a backend from SandboxSettings and open one.

``open_sandbox`` is the one entry point; ``sandbox_factory`` adapts it to the
``SandboxFactory`` shape gates take; ``check_backends`` reports, for ``ribbit doctor``,
which backends can run here and why not.

- base.py: the :class:`Sandbox` interface; common.py: what both backends share.
- docker.py (Docker or Podman; dockertar.py: the tars it is filled from), bubblewrap.py
  (with cgroup.py for its memory limit and bubblewrap_host.py for what it asks of the
  host): the backends; session.py and session_server.py:
  the resident runner each exec goes through; export.py: reading what a sandbox wrote
  without trusting it.
- setup.py, setupcmd.py, egress.py: the setup step, the setup a repository gets when it
  names none (depgroups.py: the PEP 735 dependency group its tests need; testenvs.py:
  the hatch, pdm, tox or nox test environment, with noxsessions.py reading a noxfile
  and pipwords.py the pip arguments they list; nodesetup.py: npm, pnpm or yarn), and the
  registry-only proxy that is its only way out (egress_policy.py:
  which hosts and addresses it lets through; proxyhttp.py: its plain-HTTP requests;
  tlshello.py: the server names in a tunnel's TLS ClientHello); recipe.py: how every
  sandbox that runs a repository's code is opened and set up; failure.py: who can fix
  a failed set-up (the maintainer's `.ribbit.yml` or the operator's setting).
- snapshot.py, envcache.py: set-up environments snapshotted per job and cached per
  repository; reinstall.py: a copy of the package the set-up installed, installed
  again from each tree offline with the build backend it fetched; secretscan.py: the
  set-up credentials searched for in every snapshot; repoimage.py: a repository's own
  image; cli.py: ``ribbit sandbox``; backend_option.py: the ``--backend`` flag every
  command that opens a sandbox takes.
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from worker.sandbox.base import Sandbox, SandboxError, SandboxFactory
from worker.settings import SandboxSettings

__all__ = [
    "BackendCheck",
    "Sandbox",
    "SandboxError",
    "check_backends",
    "open_sandbox",
    "reap_stale",
    "resolve_backend",
    "sandbox_factory",
]


@dataclass(frozen=True)
class BackendCheck:
    name: str
    ok: bool
    detail: str


def open_sandbox(settings: SandboxSettings, source: Path, *, network: bool = False) -> Sandbox:
    """A sandbox whose /workspace is a private copy of ``source``. ``network`` lets the
    setup step (worker/sandbox/setup.py) reach the package registries through the
    worker's proxy, never anything else; refused unless settings.setup_network allows it."""
    if network and not settings.setup_network:
        raise SandboxError("network in the sandbox needs RIBBIT_SANDBOX__SETUP_NETWORK=true")
    backend = resolve_backend(settings)
    if backend == "docker":
        from worker.sandbox.docker import DockerSandbox

        return DockerSandbox(settings, source, network=network)
    from worker.sandbox.bubblewrap import BubblewrapSandbox

    return BubblewrapSandbox(settings, source, network=network)


def sandbox_factory(settings: SandboxSettings, *, network: bool = False) -> SandboxFactory:
    """``auto`` is resolved once, here, so one job's sandboxes all use the same backend.
    ``network``: each sandbox can run a setup step through the registry proxy."""
    fixed = settings.model_copy(update={"backend": resolve_backend(settings)})

    def factory(source: Path) -> Sandbox:
        return open_sandbox(fixed, source, network=network)

    return factory


def resolve_backend(settings: SandboxSettings) -> str:
    """The backend ``auto`` means here: docker when the engine answers and has the image."""
    if settings.backend != "auto":
        return settings.backend
    return "docker" if _docker_check(settings).ok else "bubblewrap"


def check_backends(settings: SandboxSettings) -> list[BackendCheck]:
    return [_docker_check(settings), _bubblewrap_check()]


def _docker_check(settings: SandboxSettings) -> BackendCheck:
    import docker.errors

    from worker.sandbox.docker import docker_client

    try:
        client = docker_client(settings, timeout=5)
        client.ping()
        version = client.version().get("Version", "?")
    except (SandboxError, docker.errors.DockerException, OSError) as exc:
        return BackendCheck("docker", False, f"no engine answers: {_short(exc)}")
    try:
        client.images.get(settings.image)
    except docker.errors.ImageNotFound:
        return BackendCheck(
            "docker",
            False,
            f"engine {version} answers but image "
            f"{settings.image} is missing: run deploy/sandbox/build-image.sh",
        )
    except docker.errors.DockerException as exc:
        return BackendCheck("docker", False, f"engine {version}: {_short(exc)}")
    finally:
        client.close()
    return BackendCheck("docker", True, f"engine {version}, image {settings.image}")


def _bubblewrap_check() -> BackendCheck:
    binary = shutil.which("bwrap")
    if binary is None:
        return BackendCheck(
            "bubblewrap", False, "bwrap is not installed (apt-get install bubblewrap)"
        )
    # A real run, not just the binary: user namespaces may be disabled on the host.
    with tempfile.TemporaryDirectory(prefix="ribbit-doctor-") as tmp:
        from worker.sandbox.bubblewrap import BubblewrapSandbox

        try:
            with BubblewrapSandbox(SandboxSettings(backend="bubblewrap"), Path(tmp)) as sb:
                result = sb.exec(["true"], timeout=30)
        except (SandboxError, OSError, subprocess.SubprocessError) as exc:
            return BackendCheck("bubblewrap", False, f"{binary} cannot start: {_short(exc)}")
        if result.exit_code != 0:
            return BackendCheck(
                "bubblewrap",
                False,
                f"{binary} cannot start a sandbox: {result.stderr.strip()[:200]}",
            )
        limited = (
            "size-limited workspace"
            if sb.workspace_size_limited
            else ("workspace size NOT limited (needs root)")
        )
        memory = (
            "one memory cgroup for the whole sandbox"
            if sb.memory_cgroup is not None
            else "memory limited per process only (needs a root worker with a memory "
            "cgroup; the docker backend always limits the whole sandbox)"
        )
    return BackendCheck("bubblewrap", True, f"{binary} works; {limited}; {memory}")


def _short(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:200] if text else type(exc).__name__


def reap_stale(settings: SandboxSettings) -> list[str]:
    """Remove what crashed workers left behind: labelled containers (when an engine
    answers) and bubblewrap temp dirs whose owner is gone. Returns what was removed."""
    import docker.errors

    from worker.sandbox import bubblewrap
    from worker.sandbox import docker as docker_backend

    removed = [str(p) for p in bubblewrap.reap_stale()]
    # No engine here means nothing of it to reap.
    with contextlib.suppress(SandboxError, docker.errors.DockerException, OSError):
        removed += docker_backend.reap_stale(settings)
    return removed
