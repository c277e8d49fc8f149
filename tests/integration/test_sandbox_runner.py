"""The resident command runner (worker/sandbox/session_server.py) on both backends: the
sandbox's own processes cannot read its requests or answer in its place; on docker, every
command goes through it (one engine exec for all), a command that kills it reads as
killed and the next one gets a new runner, and an image that cannot run it falls back to
one engine exec per command with the same results."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import docker
import pytest

from worker.sandbox import open_sandbox
from worker.sandbox.base import Sandbox
from worker.sandbox.docker import DockerSandbox
from worker.settings import SandboxSettings

pytestmark = pytest.mark.integration

# Run by a command inside, a descendant of the runner. Tries what a hostile process of
# the same user would: list the runner's descriptors, read its requests (stdin), write a
# forged answer line to its output (stdout).
PRY = r"""
import os
def parent(pid):
    with open(f"/proc/{pid}/status") as f:
        return int(next(l for l in f if l.startswith("PPid:")).split()[1])
runner = os.getpid()
for _ in range(4):
    runner = parent(runner)
    with open(f"/proc/{runner}/cmdline", "rb") as f:
        # Its last argument (this text, in its ancestors' arguments, names it too).
        if f.read().split(b"\0")[-2] == b"--inside-sandbox":
            print("RUNNER")
            break
for what, attempt in (
    ("list", lambda: os.listdir(f"/proc/{runner}/fd")),
    ("read", lambda: os.open(f"/proc/{runner}/fd/0", os.O_RDONLY | os.O_NONBLOCK)),
    ("write", lambda: os.open(f"/proc/{runner}/fd/1", os.O_WRONLY)),
):
    try:
        attempt()
        print(what, "OPENED")
    except PermissionError:
        print(what, "DENIED")
"""


@pytest.fixture
def sandbox(backend_settings: SandboxSettings, source_repo: Path) -> Iterator[Sandbox]:
    with open_sandbox(backend_settings, source_repo) as sb:
        yield sb


@pytest.fixture
def client(docker_settings: SandboxSettings) -> Iterator[docker.DockerClient]:
    client = docker.DockerClient(base_url=docker_settings.docker_url)
    yield client
    client.close()


def test_sandbox_processes_cannot_reach_the_runners_pipes(sandbox: Sandbox) -> None:
    result = sandbox.exec(["python3", "-c", PRY], timeout=60)
    assert result.exit_code == 0, result.stderr
    assert result.stdout.split("\n")[:4] == ["RUNNER", "list DENIED", "read DENIED", "write DENIED"]
    # The runner still answers afterwards.
    assert sandbox.exec(["echo", "ok"], timeout=30).stdout == "ok\n"


def _exec_sessions(client: docker.DockerClient, sb: DockerSandbox) -> int:
    return len(client.api.inspect_container(sb.container_id)["ExecIDs"] or [])


def test_docker_commands_share_one_engine_exec(
    docker_settings: SandboxSettings, source_repo: Path, client: docker.DockerClient
) -> None:
    with DockerSandbox(docker_settings, source_repo) as sb:
        outputs = [sb.exec(["echo", str(n)], timeout=30).stdout for n in range(4)]
        assert outputs == ["0\n", "1\n", "2\n", "3\n"]
        assert _exec_sessions(client, sb) == 1


def test_docker_command_that_kills_the_runner_reads_as_killed(
    docker_settings: SandboxSettings, source_repo: Path, client: docker.DockerClient
) -> None:
    with DockerSandbox(docker_settings, source_repo) as sb:
        sb.exec("sleep 301 &", timeout=30)
        killed = sb.exec("kill -9 -1", timeout=30)
        assert (killed.exit_code, killed.timed_out, killed.oom_killed) == (137, False, False)
        # A new runner for the next command; the background sleep died with the old one.
        after = sb.exec("pgrep -f 'slee[p] 301' || echo none", timeout=30)
        assert after.stdout == "none\n"
        assert _exec_sessions(client, sb) == 2


def test_docker_image_without_the_runner_gets_one_exec_per_command(
    docker_settings: SandboxSettings,
    source_repo: Path,
    client: docker.DockerClient,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # As an image without python3 does: the runner's start command exits 127.
    monkeypatch.setattr("worker.sandbox.docker._START_SERVER", "exit 127")
    with DockerSandbox(docker_settings, source_repo) as sb:
        done = sb.exec(["sh", "-c", "pwd; echo $G; exit 3"], timeout=30, cwd="pkg", env={"G": "hi"})
        assert (done.exit_code, done.stdout) == (3, "/workspace/pkg\nhi\n")
        endless = sb.exec("while :; do :; done", timeout=2)
        assert (endless.exit_code, endless.timed_out) == (124, True)
        sb.exec("echo changed >> README.md; sleep 300 &", timeout=30)
        assert "+changed" in sb.diff()
        # No runner: each command is an engine exec of its own.
        before = _exec_sessions(client, sb)
        assert sb.exec(["true"], timeout=30).exit_code == 0
        assert _exec_sessions(client, sb) == before + 1


def test_command_that_ignores_sigterm_is_killed_after_the_grace(sandbox: Sandbox) -> None:
    # The deadline's SIGTERM is ignored: SIGKILL follows, and it still reads as a timeout.
    result = sandbox.exec("trap '' TERM; while :; do :; done", timeout=1)
    assert (result.exit_code, result.timed_out) == (124, True)
    # A command that handles SIGTERM and exits 0 at the deadline timed out all the same.
    handled = sandbox.exec("trap 'exit 0' TERM; while :; do sleep 0.1; done", timeout=1)
    assert (handled.exit_code, handled.timed_out) == (124, True)
    assert sandbox.exec(["echo", "alive"], timeout=30).stdout == "alive\n"


# Leaves its own process group for the runner's (same session), where the deadline's
# group signal cannot reach it, and ignores SIGTERM: only a signal to the command itself
# (as ``timeout`` sends) ends it.
GROUP_ESCAPE = """
import os, signal, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
try:
    os.setpgid(0, os.getpgid(os.getppid()))
    print("moved", flush=True)
except OSError as exc:
    print("stayed", exc, flush=True)
while True:
    time.sleep(1)
"""


def test_command_that_leaves_its_group_still_times_out(sandbox: Sandbox) -> None:
    result = sandbox.exec(["python3", "-c", GROUP_ESCAPE], timeout=1)
    assert (result.exit_code, result.timed_out) == (124, True)
    assert result.stdout.startswith(("moved", "stayed"))
    if sandbox.backend == "bubblewrap":
        assert result.stdout == "moved\n"  # the runner's group is in reach there
    # The runner ended it, not the host's last-resort close of the whole sandbox.
    assert sandbox.exec(["echo", "alive"], timeout=30).stdout == "alive\n"


def test_own_exit_124_leaves_background_processes_alone(sandbox: Sandbox) -> None:
    # Only a real timeout takes the sandbox's other processes with it.
    detach = (
        "import subprocess as s; p = s.Popen(['sleep', '300'], start_new_session=True, "
        "stdout=s.DEVNULL, stderr=s.DEVNULL); print(p.pid)"
    )
    pid = sandbox.exec(["python3", "-c", detach], timeout=30).stdout.strip()
    own = sandbox.exec("exit 124", timeout=30)
    assert (own.exit_code, own.timed_out) == (124, False)
    assert sandbox.exec(f"kill -0 {pid} && echo alive", timeout=30).stdout == "alive\n"
