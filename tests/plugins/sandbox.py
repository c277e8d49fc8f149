"""Fixtures for the sandbox area: a real Podman engine on a private socket, the sandbox
image, small-limit settings per backend, and a source checkout to sandbox.

``podman_socket`` starts ``podman system service`` with the containers.conf this host
needs (runc, no default ulimits, no proxy passthrough) unless RIBBIT_TEST_DOCKER_URL
names an engine to use. ``sandbox_image`` builds the image once with
deploy/sandbox/build-image.sh --if-missing, under RIBBIT_TEST_SANDBOX_IMAGE's tag when
set (a changed image recipe tried out beside the ``latest`` that others use).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fakes import make_git_repo
from tests.support import require_service
from worker.sandbox.base import SandboxFactory
from worker.settings import SandboxSettings

REPO_ROOT = Path(__file__).resolve().parents[2]
BUILD_IMAGE = REPO_ROOT / "deploy" / "sandbox" / "build-image.sh"
TEST_IMAGE = os.environ.get("RIBBIT_TEST_SANDBOX_IMAGE", "ribbit-sandbox:latest")
CONTAINERS_CONF = """\
[containers]
default_ulimits = []
http_proxy = false
[engine]
runtime = "runc"
"""
# Small limits so the escape battery is quick and its hogs stay cheap on 2 cores.
TEST_LIMITS = {"memory_mb": 256, "pids": 64, "workspace_mb": 64, "cpus": 1.0}
BACKENDS = ["bubblewrap", "docker"]


def podman_env(conf: Path) -> dict[str, str]:
    return {**os.environ, "CONTAINERS_CONF": str(conf)}


def _engine_answers(url: str) -> bool:
    import docker

    try:
        client = docker.DockerClient(base_url=url, timeout=5)
        try:
            return bool(client.ping())
        finally:
            client.close()
    except Exception:
        return False


@pytest.fixture(scope="session")
def podman_socket(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Docker Engine API URL of a real engine (Podman started here, or RIBBIT_TEST_DOCKER_URL)."""
    given = os.environ.get("RIBBIT_TEST_DOCKER_URL")
    if given:
        yield given
        return
    podman = shutil.which("podman")
    require_service(podman is not None and os.geteuid() == 0, "podman (as root)")
    assert podman is not None
    workdir = tmp_path_factory.mktemp("podman")
    conf = workdir / "containers.conf"
    conf.write_text(CONTAINERS_CONF)
    sock = workdir / "podman.sock"
    url = f"unix://{sock}"
    log = (workdir / "service.log").open("wb")
    proc = subprocess.Popen(
        [podman, "system", "service", "--time=0", url],
        env=podman_env(conf),
        # conmon drops an "oom" marker file in its working directory when an exec is
        # OOM-killed; keep that out of the checkout.
        cwd=workdir,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 30
        while not (sock.exists() and _engine_answers(url)):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(
                    f"podman service did not start: {(workdir / 'service.log').read_text()[-2000:]}"
                )
            time.sleep(0.1)
        yield url
    finally:
        _remove_test_containers(url)
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def _remove_test_containers(url: str) -> None:
    import docker

    from worker.sandbox.common import LABEL

    owner = f"{socket.gethostname()}:{os.getpid()}"
    try:
        client = docker.DockerClient(base_url=url, timeout=30)
        for c in client.containers.list(all=True, filters={"label": f"{LABEL}.owner={owner}"}):
            c.remove(force=True)
        client.close()
    except Exception:  # cleanup must not hide the test's own failure
        pass


def sandbox_containers_since(url: str, since: float) -> list[str]:
    """The images of the sandbox containers this process created on the engine at
    ``url`` since the time ``since`` (the engine's own events): proof that a job ran
    its sandboxes there, and in which image."""
    import docker

    from worker.sandbox.common import LABEL

    owner = f"{socket.gethostname()}:{os.getpid()}"
    client = docker.DockerClient(base_url=url, timeout=30)
    try:
        params: dict[str, object] = {"since": int(since)}
        components = client.version().get("Components") or []
        if any("podman" in str(c.get("Name", "")).lower() for c in components):
            # Podman (its file events backend) stops reading its log when ``until`` comes,
            # even midway: with ``until`` a second away, a loaded machine got no events at
            # all (9 calls in 40 here, three busy loops on two CPUs). Without ``stream``
            # it reads the log to its end and closes the answer, on no clock.
            params["stream"] = "false"
        else:
            # Docker keeps the answer open until ``until``; past events come from memory.
            params["until"] = int(time.time()) + 1
        api = client.api
        response = api.get(api._url("/events"), params=params, stream=True)
        api._raise_for_status(response)
        events = api._stream_helper(response, decode=True)
        return [
            e["Actor"]["Attributes"].get("image", "")
            for e in events
            if e.get("Type") == "container"
            and e.get("Action") == "create"
            and e.get("timeNano", 0) >= since * 1e9
            and e["Actor"]["Attributes"].get(f"{LABEL}.owner") == owner
        ]
    finally:
        client.close()


@pytest.fixture(scope="session")
def sandbox_image(podman_socket: str) -> str:
    """The sandbox image, built once (about a minute) when the engine lacks it."""
    if os.environ.get("RIBBIT_TEST_DOCKER_URL"):
        return TEST_IMAGE
    done = subprocess.run(
        ["bash", str(BUILD_IMAGE), "--if-missing", "--engine", "podman", "--image", TEST_IMAGE],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        pytest.fail(f"build-image.sh failed:\n{done.stdout}\n{done.stderr}")
    return TEST_IMAGE


@pytest.fixture
def docker_settings(podman_socket: str, sandbox_image: str) -> SandboxSettings:
    return SandboxSettings(
        backend="docker", docker_url=podman_socket, image=sandbox_image, **TEST_LIMITS
    )


@pytest.fixture
def bubblewrap_settings() -> SandboxSettings:
    require_service(shutil.which("bwrap") is not None, "bubblewrap (bwrap)")
    return SandboxSettings(backend="bubblewrap", **TEST_LIMITS)


@pytest.fixture(params=BACKENDS)
def backend_settings(request: pytest.FixtureRequest) -> SandboxSettings:
    """Settings for each real backend in turn (the isolation battery runs on both)."""
    return request.getfixturevalue(f"{request.param}_settings")  # type: ignore[no-any-return]


@pytest.fixture
def backend_factory(backend_settings: SandboxSettings) -> SandboxFactory:
    """A sandbox factory for each real backend in turn."""
    from worker.sandbox import sandbox_factory

    return sandbox_factory(backend_settings)


@pytest.fixture
def source_repo(tmp_path: Path) -> Path:
    """A small committed checkout with a text and a binary file."""
    repo = tmp_path / "source"
    make_git_repo(
        repo,
        {
            "README.md": "hello\n",
            "pkg/mod.py": "VALUE = 1\n",
            "tests/test_mod.py": "from pkg.mod import VALUE\n\n"
            "def test_value():\n    assert VALUE == 1\n",
        },
    )
    return repo


def tree_snapshot(root: Path) -> dict[str, bytes]:
    """Every file under root with its bytes, to prove a folder was left untouched."""
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and not p.is_symlink()
    }
