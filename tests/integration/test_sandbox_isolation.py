"""The escape and limits battery, run on every real backend (bubblewrap and docker)."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fakes import git
from tests.plugins.sandbox import tree_snapshot
from tests.plugins.skips import skip_unless_root
from worker.sandbox import SandboxError, open_sandbox, sandbox_factory
from worker.sandbox.base import Sandbox
from worker.settings import SandboxSettings

pytestmark = pytest.mark.integration

FORK_COUNTER = """
import os, time
n = 0
for _ in range(1000):
    try:
        pid = os.fork()
    except OSError:
        break
    if pid == 0:
        time.sleep(60)
        os._exit(0)
    n += 1
print(n)
"""


@pytest.fixture
def sandbox(backend_settings: SandboxSettings, source_repo: Path) -> Iterator[Sandbox]:
    with open_sandbox(backend_settings, source_repo) as sb:
        yield sb


@pytest.fixture
def tcp_server() -> Iterator[int]:
    """A TCP server on the host's loopback that accepts and answers "pong"."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    server.settimeout(0.2)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            with conn:
                conn.sendall(b"pong")

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield int(server.getsockname()[1])
    stop.set()
    thread.join()
    server.close()


def test_sandbox_has_no_network(sandbox: Sandbox, tcp_server: int) -> None:
    with socket.create_connection(("127.0.0.1", tcp_server), timeout=5) as s:
        assert s.recv(4) == b"pong"  # the server is reachable from the host
    probe = (
        "import socket\ntry:\n    s = socket.create_connection(('127.0.0.1', %d), timeout=3)\n"
        "    print('CONNECTED', s.recv(4))\nexcept OSError as e:\n    print('BLOCKED', e)\n"
    )
    result = sandbox.exec(["python3", "-c", probe % tcp_server], timeout=30)
    assert "BLOCKED" in result.stdout
    assert "CONNECTED" not in result.stdout
    interfaces = sandbox.exec("cat /proc/net/dev", timeout=30).stdout
    assert "eth0" not in interfaces


def test_sandbox_cannot_read_host_files(sandbox: Sandbox, tmp_path: Path) -> None:
    secret = "host-secret-7f3a"
    in_tmp = tmp_path / "secret.txt"
    in_tmp.write_text(secret)
    in_home = Path.home() / f".ribbit-test-secret-{time.monotonic_ns()}"
    in_home.write_text(secret)
    try:
        for path in (in_tmp, in_home):
            result = sandbox.exec(["cat", str(path)], timeout=30)
            assert result.exit_code != 0
            assert secret not in result.stdout
        listing = sandbox.exec("ls -a /root /home /work /tmp 2>&1", timeout=30).stdout
        assert in_home.name not in listing
        assert sandbox.exec("cat /etc/shadow", timeout=30).exit_code != 0
        if sandbox.backend == "bubblewrap":  # the image has its own, empty, /etc/ssl/private
            assert "private" not in sandbox.exec("ls /etc/ssl 2>&1", timeout=30).stdout
    finally:
        in_home.unlink()


def test_sandbox_hides_host_environment(
    backend_settings: SandboxSettings, source_repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    secrets = {
        "RIBBIT_GITHUB__TOKEN": "ghp_leak1234567890",
        "AWS_SECRET_ACCESS_KEY": "aws-leak",
        "RIBBIT_GITLAB__WEBHOOK_TOKEN": "gl-leak",
    }
    for key, value in secrets.items():
        monkeypatch.setenv(key, value)
    with open_sandbox(backend_settings, source_repo) as sb:
        result = sb.exec(
            "env; cat /proc/self/environ /proc/1/environ 2>/dev/null | tr '\\0' '\\n'",
            timeout=30,
            env={"EXPLICIT": "given"},
        )
    assert result.exit_code == 0
    assert "EXPLICIT=given" in result.stdout
    for key, value in secrets.items():
        assert key not in result.stdout
        assert value not in result.stdout


def test_sandbox_runs_unprivileged(sandbox: Sandbox) -> None:
    result = sandbox.exec(
        "id -u; id -g; grep -E '^Cap(Eff|Prm)' /proc/self/status; "
        "touch /usr/ribbit-x 2>&1 || echo USR_RO; "
        "touch /etc/ribbit-x 2>&1 || echo ETC_RO",
        timeout=30,
    )
    lines = result.stdout.splitlines()
    assert lines[:2] == ["1000", "1000"]
    assert "CapEff:\t0000000000000000" in result.stdout
    assert "CapPrm:\t0000000000000000" in result.stdout
    assert "USR_RO" in result.stdout and "ETC_RO" in result.stdout


def test_sandbox_fork_bomb_is_contained(
    sandbox: Sandbox, backend_settings: SandboxSettings
) -> None:
    counted = sandbox.exec(["python3", "-c", FORK_COUNTER], timeout=60)
    assert counted.exit_code == 0, counted.stderr
    assert int(counted.stdout) < backend_settings.pids
    bomb = sandbox.exec(":(){ :|:& };:; sleep 2", timeout=5)
    assert bomb.exit_code == 0 or bomb.timed_out
    # The sandbox and the host both still work afterwards.
    assert sandbox.exec(["echo", "alive"], timeout=30).stdout == "alive\n"
    assert subprocess.run(["true"], check=False).returncode == 0


def test_sandbox_memory_hog_is_stopped(sandbox: Sandbox, backend_settings: SandboxSettings) -> None:
    hog = f"x = b'x' * ({backend_settings.memory_mb * 4} * 1024 * 1024)\nprint('ALLOCATED')"
    result = sandbox.exec(["python3", "-c", hog], timeout=60)
    assert result.exit_code != 0
    assert "ALLOCATED" not in result.stdout
    if sandbox.backend == "docker" or getattr(sandbox, "memory_cgroup", None) is not None:
        assert result.oom_killed  # a cgroup limit: the kernel's OOM killer ends it
    else:
        assert "MemoryError" in result.stderr  # RLIMIT_AS: the allocation itself fails


def test_sandbox_endless_loop_is_killed_at_timeout(sandbox: Sandbox) -> None:
    result = sandbox.exec("while :; do :; done", timeout=2)
    assert result.timed_out
    assert result.exit_code == 124
    assert result.duration_s < 30


def test_sandbox_timeout_kills_escaped_processes(sandbox: Sandbox) -> None:
    # A detached (setsid) writer leaves timeout's process group; it must die anyway.
    result = sandbox.exec(
        "setsid sh -c 'while :; do echo t >> /workspace/tick; sleep 0.1; done' & sleep 100",
        timeout=2,
    )
    assert result.timed_out
    size = len(sandbox.read_file("tick"))
    time.sleep(1)
    assert len(sandbox.read_file("tick")) == size


def test_sandbox_own_exit_124_is_not_a_timeout(sandbox: Sandbox) -> None:
    result = sandbox.exec("exit 124", timeout=30)
    assert result.exit_code == 124
    assert not result.timed_out


def test_sandbox_output_is_capped(sandbox: Sandbox) -> None:
    result = sandbox.exec(
        "yes | head -c 5000000; yes err | head -c 300000 >&2", timeout=60, output_cap=4096
    )
    assert result.exit_code == 0
    assert result.truncated
    assert len(result.stdout) == 4096 and len(result.stderr) == 4096
    small = sandbox.exec("echo small", timeout=30, output_cap=4096)
    assert not small.truncated


def test_sandbox_workspace_size_is_limited(
    sandbox: Sandbox, backend_settings: SandboxSettings
) -> None:
    if sandbox.backend == "bubblewrap" and not getattr(sandbox, "workspace_size_limited", False):
        skip_unless_root("bubblewrap limits the workspace size only when run as root")
        pytest.skip("bubblewrap could not mount the workspace's size-limited tmpfs")
    # Files under the per-file limit each, more than the workspace in total.
    chunk = backend_settings.workspace_mb // 2
    result = sandbox.exec(
        f"for i in 1 2 3; do head -c {chunk}M /dev/zero > f$i || exit 9; done", timeout=60
    )
    assert result.exit_code == 9
    assert "No space left" in result.stderr


def test_sandbox_cleans_up_after_a_crash(
    backend_settings: SandboxSettings, source_repo: Path
) -> None:
    with pytest.raises(RuntimeError), open_sandbox(backend_settings, source_repo) as sb:
        sb.exec("echo busy > f; sleep 30 &", timeout=30)
        raise RuntimeError("worker crashed")
    assert_gone(sb)
    sb.close()  # closing twice is fine


def assert_gone(sb: Sandbox) -> None:
    if sb.backend == "bubblewrap":
        assert not sb.host_root.exists()  # type: ignore[attr-defined]
        return
    import docker.errors

    with pytest.raises(docker.errors.NotFound):
        sb._client.containers.get(sb.container_id)  # type: ignore[attr-defined]


def test_sandbox_diff_has_all_changes(sandbox: Sandbox, source_repo: Path, tmp_path: Path) -> None:
    sandbox.exec(
        "echo more >> README.md; rm pkg/mod.py; mkdir -p new/deep; "
        "echo fresh > new/deep/file.txt; printf '\\x00\\x01\\x02' > blob.bin",
        timeout=30,
    )
    sandbox.write_file("written.py", b"print('via write_file')\n")
    diff = sandbox.diff()
    assert "+more" in diff
    assert "deleted file mode" in diff
    assert "new/deep/file.txt" in diff and "+fresh" in diff
    assert "GIT binary patch" in diff
    assert "via write_file" in diff
    # The diff applies to a fresh clone of the source and reproduces the workspace.
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(source_repo), str(clone))
    subprocess.run(["git", "apply", "--binary", "-"], cwd=clone, input=diff.encode(), check=True)
    assert (clone / "blob.bin").read_bytes() == b"\x00\x01\x02"
    assert not (clone / "pkg" / "mod.py").exists()


def test_sandbox_diff_includes_commits_made_inside(sandbox: Sandbox) -> None:
    sandbox.exec(
        "echo x > c.txt && git add c.txt && git -c user.name=a -c user.email=a@b commit -qm inside",
        timeout=30,
    )
    assert "+x" in sandbox.diff()


def test_sandbox_leaves_source_untouched(
    backend_settings: SandboxSettings, source_repo: Path
) -> None:
    before = tree_snapshot(source_repo)
    with open_sandbox(backend_settings, source_repo) as sb:
        sb.exec(
            "echo changed > README.md; git add -A; git -c user.name=a -c user.email=a@b "
            "commit -qm x; rm -rf /workspace/pkg",
            timeout=30,
        )
        sb.write_file("README.md", b"again")
    assert tree_snapshot(source_repo) == before


def test_sandbox_files_round_trip_and_stay_inside(sandbox: Sandbox) -> None:
    sandbox.write_file("a/b/c.bin", b"\x00data\xff")
    assert sandbox.read_file("a/b/c.bin") == b"\x00data\xff"
    assert sandbox.read_file("/workspace/a/b/c.bin") == b"\x00data\xff"
    assert sandbox.exec("cat a/b/c.bin", timeout=30).stdout.startswith("\x00data")
    for bad in ("../outside", "/etc/passwd", "a/../../x"):
        with pytest.raises(PermissionError):
            sandbox.read_file(bad)
        with pytest.raises(PermissionError):
            sandbox.write_file(bad, b"x")
    # A symlink made inside must not lead the host-side reader out of the workspace.
    sandbox.exec("ln -s /etc/hostname host_link", timeout=30)
    with pytest.raises(PermissionError):
        sandbox.read_file("host_link")


def test_sandbox_exec_cwd_env_and_exit_code(sandbox: Sandbox) -> None:
    result = sandbox.exec(
        ["sh", "-c", "pwd; echo $GREETING; exit 3"], timeout=30, cwd="pkg", env={"GREETING": "hi"}
    )
    assert (result.exit_code, result.stdout) == (3, "/workspace/pkg\nhi\n")
    with pytest.raises(PermissionError):
        sandbox.exec("true", timeout=30, cwd="../..")


def test_sandbox_network_needs_setup_network(
    backend_settings: SandboxSettings, source_repo: Path
) -> None:
    closed = backend_settings.model_copy(update={"setup_network": False})
    with pytest.raises(SandboxError, match="SETUP_NETWORK"):
        open_sandbox(closed, source_repo, network=True)


def test_sandbox_git_works_inside(sandbox: Sandbox) -> None:
    result = sandbox.exec("git status --porcelain && git log --format=%s", timeout=30)
    assert result.exit_code == 0, result.stderr
    assert result.stdout.strip() == "initial"
    assert shutil.which("git")


def test_sandbox_home_and_tmp_are_writable(sandbox: Sandbox) -> None:
    result = sandbox.exec(
        "echo h > ~/h && echo t > /tmp/t && mkdir -p ~/.cache/pip && cat ~/h /tmp/t", timeout=30
    )
    assert (result.exit_code, result.stdout) == (0, "h\nt\n"), result.stderr


def test_sandbox_factory_gives_sandboxes_of_the_protocol(
    backend_settings: SandboxSettings, source_repo: Path
) -> None:
    factory = sandbox_factory(backend_settings)
    with factory(source_repo) as sb:
        assert isinstance(sb, Sandbox)
        assert sb.backend == backend_settings.backend
        assert sb.exec(["cat", "README.md"], timeout=30).stdout == "hello\n"


def test_sandbox_diff_needs_a_git_checkout(
    backend_settings: SandboxSettings, tmp_path: Path
) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "f.txt").write_text("x")
    with open_sandbox(backend_settings, plain) as sb:
        assert sb.read_file("f.txt") == b"x"
        with pytest.raises(SandboxError, match="git checkout"):
            sb.diff()


def test_close_kills_a_command_still_running_on_another_thread(
    backend_settings: SandboxSettings, source_repo: Path
) -> None:
    """Cancellation returns while a tool still runs; closing the sandbox must end it."""
    import subprocess as sp
    import threading

    marker = f"ribbit-close-test-{os.getpid()}"
    sandbox = open_sandbox(backend_settings, source_repo)
    # A second command keeps bash (and the marker in its command line) alive; a lone
    # ``sleep`` would be exec'd in bash's place.
    ended: list[BaseException | None] = []

    def run() -> None:
        try:
            sandbox.exec(f"sleep 300; : {marker}", timeout=600)
            ended.append(None)
        except BaseException as exc:  # what the thread that ran the tool is told
            ended.append(exc)

    runner = threading.Thread(target=run, daemon=True)
    runner.start()
    deadline = time.monotonic() + 30
    while sp.run(["pgrep", "-f", marker], capture_output=True).returncode != 0:
        assert time.monotonic() < deadline, "the command never started"
        time.sleep(0.1)
    sandbox.close()
    deadline = time.monotonic() + 30
    while sp.run(["pgrep", "-f", marker], capture_output=True).returncode == 0:
        assert time.monotonic() < deadline, "the command outlived the sandbox"
        time.sleep(0.2)
    runner.join(timeout=30)
    assert not runner.is_alive()
    # The tool's caller gets the sandbox's own error, not a hang or a result.
    assert len(ended) == 1 and isinstance(ended[0], SandboxError), ended
