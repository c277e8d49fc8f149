"""What only the docker backend has: the container's hardening as the engine reports it,
labels and reaping of leftovers, the setup phase's network."""

from __future__ import annotations

import os
import socket
import subprocess
from pathlib import Path

import docker
import docker.errors
import pytest

from worker.sandbox import open_sandbox, resolve_backend
from worker.sandbox.common import LABEL
from worker.sandbox.docker import DockerSandbox, reap_stale
from worker.settings import SandboxSettings

pytestmark = pytest.mark.integration


@pytest.fixture
def client(docker_settings: SandboxSettings) -> docker.DockerClient:
    return docker.DockerClient(base_url=docker_settings.docker_url)


def test_docker_container_is_hardened(
    docker_settings: SandboxSettings, source_repo: Path, client: docker.DockerClient
) -> None:
    with DockerSandbox(docker_settings, source_repo) as sb:
        assert sb.container_id
        attrs = client.api.inspect_container(sb.container_id)
    host = attrs["HostConfig"]
    assert host["NetworkMode"] == "none"
    assert host["ReadonlyRootfs"] is True
    assert host["Memory"] == docker_settings.memory_mb * 1024 * 1024
    assert host["PidsLimit"] == docker_settings.pids
    assert host["NanoCpus"] == int(docker_settings.cpus * 1e9)
    assert any("no-new-privileges" in opt for opt in host["SecurityOpt"] or [])
    assert [c.upper().removeprefix("CAP_") for c in host["CapDrop"]] in (["ALL"], []) or len(
        host["CapDrop"]
    ) > 10
    assert attrs["Config"]["User"] == "1000:1000"
    assert attrs["Config"]["Labels"][LABEL] == "1"
    # The host checkout is copied in, never mounted; the only mount is the set-up
    # environment's anonymous volume (a volume name, not a host path).
    binds = host.get("Binds") or []
    assert [b.split(":")[1] for b in binds] in ([], ["/opt/ribbit"])
    assert not any(b.startswith("/") for b in binds)


def test_docker_cgroup_limits_hold_inside(
    docker_settings: SandboxSettings, source_repo: Path
) -> None:
    # cgroups here are hybrid v1/v2; read whichever files the container sees.
    with DockerSandbox(docker_settings, source_repo) as sb:
        r = sb.exec(
            "cat /sys/fs/cgroup/pids.max /sys/fs/cgroup/pids/pids.max 2>/dev/null; "
            "cat /sys/fs/cgroup/memory.max "
            "/sys/fs/cgroup/memory/memory.limit_in_bytes 2>/dev/null",
            timeout=30,
        )
        cpu = sb.exec(
            "cat /sys/fs/cgroup/cpu.max /sys/fs/cgroup/cpu/cpu.cfs_quota_us 2>/dev/null",
            timeout=30,
        )
    values = r.stdout.split()
    assert str(int(docker_settings.cpus * 100_000)) in cpu.stdout.split()
    assert str(docker_settings.pids) in values
    assert str(docker_settings.memory_mb * 1024 * 1024) in values


def test_docker_reap_stale_removes_orphans_only(
    docker_settings: SandboxSettings, source_repo: Path, client: docker.DockerClient
) -> None:
    dead = subprocess.Popen(["true"])
    dead.wait()
    orphan = client.containers.create(
        docker_settings.image,
        ["sleep", "60"],
        network_mode="none",
        labels={
            LABEL: "1",
            f"{LABEL}.owner": f"{socket.gethostname()}:{dead.pid}",
            f"{LABEL}.created": "0",
        },
    )
    with DockerSandbox(docker_settings, source_repo) as live:
        removed = reap_stale(docker_settings, max_age_s=3600, client=client)
        assert orphan.id in removed
        assert live.container_id not in removed
        assert live.exec(["true"], timeout=30).exit_code == 0
    with pytest.raises(docker.errors.NotFound):
        client.containers.get(orphan.id)


def test_docker_setup_sandbox_gets_the_egress_folder_never_a_network(
    docker_settings: SandboxSettings, source_repo: Path
) -> None:
    allowed = docker_settings.model_copy(update={"setup_network": True})
    with open_sandbox(allowed, source_repo, network=True) as setup:
        egress = setup.egress_dir  # type: ignore[attr-defined]
        (egress / "marker").write_text("x")
        out = setup.exec("cat /run/ribbit-egress/marker; cat /proc/net/dev", timeout=30).stdout
        assert out.startswith("x")
        assert "eth0" not in out
        assert setup.exec("touch /run/ribbit-egress/planted", timeout=30).exit_code != 0
    assert not egress.exists()
    with open_sandbox(allowed, source_repo) as agent:
        assert agent.exec("ls /run/ribbit-egress", timeout=30).exit_code != 0


def test_docker_missing_image_is_a_sandbox_error(
    docker_settings: SandboxSettings, source_repo: Path
) -> None:
    from worker.sandbox import SandboxError

    missing = docker_settings.model_copy(update={"image": "ribbit-sandbox:does-not-exist"})
    with pytest.raises(SandboxError, match="missing"):
        DockerSandbox(missing, source_repo)


def test_auto_prefers_docker_when_engine_and_image_exist(docker_settings: SandboxSettings) -> None:
    auto = docker_settings.model_copy(update={"backend": "auto"})
    assert resolve_backend(auto) == "docker"
    no_image = auto.model_copy(update={"image": "ribbit-sandbox:does-not-exist"})
    assert resolve_backend(no_image) == "bubblewrap"
    assert os.path.exists("/")
