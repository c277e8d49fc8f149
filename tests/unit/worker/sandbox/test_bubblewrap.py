"""BubblewrapSandbox without a running sandbox: the bwrap command line it builds (what is
bound read-only, what writable, what never: home folders, the host's /tmp and /etc
secrets; the environment cleared and set from an allow-list, never the worker's), the
rlimits and memory cgroup in front of it, the resident process's start and stop, the
host-side file access that must not follow links, and the reaping of a crashed worker's
leftovers. bwrap itself runs in one test only, where it is installed (the integration
tests run whole sandboxes)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from worker.sandbox import bubblewrap as bwrap_mod
from worker.sandbox import common as common_mod
from worker.sandbox.base import TIMEOUT_EXIT_CODE, WORKSPACE, SandboxError
from worker.sandbox.bubblewrap import (
    TEMP_PREFIX,
    BubblewrapSandbox,
    _chown_tree,
    _copy_tree,
    _recorded_cgroup,
    reap_stale,
)
from worker.sandbox.bubblewrap_host import (
    BubblewrapHost,
    bwrap_path,
    mount_workspace_tmpfs,
    pick_host_uid,
    processes_of,
)
from worker.sandbox.cgroup import CGROUP_PREFIX, CGROUP_ROOT, MemoryCgroup, enter_argv
from worker.sandbox.common import ENV_ROOT, SANDBOX_HOME, sandbox_env
from worker.sandbox.egress import EGRESS_MOUNT
from worker.sandbox.session import SERVER_BOOTSTRAP, server_payload
from worker.settings import SandboxSettings

FAKE_BWRAP = "/nonexistent/bwrap"
BASE_SHA = "a" * 40
# Host paths a sandbox must never see, whatever it is bound for.
SECRET_HOST_PATHS = ("/", "/etc", "/etc/shadow", "/etc/ssl/private", "/root", "/home", "/tmp")


class Opened:
    """Opens BubblewrapSandboxes over ``source`` on a host that starts nothing: no
    resident process, no mount, no cgroup, unless a test asks for one (``use``)."""

    def __init__(self, tmp_path: Path) -> None:
        self.tempdir = tmp_path / "tmp"
        self.tempdir.mkdir()
        self.source = tmp_path / "src"
        self.source.mkdir()
        (self.source / "a.py").write_text("x = 1\n")
        self.opened: list[BubblewrapSandbox] = []
        self.host = BubblewrapHost(
            temp_dir=self.tempdir,
            bwrap_path=lambda: FAKE_BWRAP,
            base_commit=lambda _source: BASE_SHA,
            memory_cgroup=lambda _mb, _uid: None,
            throwaway_uid=lambda: None,
            mount_workspace=lambda _workspace, _mb, _uid: False,
            # The worker user's process count moves while a test runs; fixed here.
            processes_of=lambda _uid: 3,
            spawn=None,
        )

    def use(self, **host: Any) -> None:
        """Sandboxes opened from now on get these host operations instead."""
        self.host = replace(self.host, **host)

    def __call__(self, settings: SandboxSettings | None = None, **kw: bool) -> BubblewrapSandbox:
        sandbox = BubblewrapSandbox(
            settings or SandboxSettings(), self.source, host=self.host, **kw
        )
        self.opened.append(sandbox)
        return sandbox

    def roots(self) -> list[Path]:
        return sorted(self.tempdir.glob(f"{TEMP_PREFIX}*"))


@pytest.fixture
def opened(tmp_path: Path) -> Iterator[Opened]:
    maker = Opened(tmp_path)
    yield maker
    for sandbox in maker.opened:
        sandbox.close()


def _mounts(argv: Sequence[str]) -> list[tuple[str, str, str]]:
    """(option, host source, sandbox destination) for each bind and symlink, and
    (option, "", destination) for each tmpfs, proc and dev, in bwrap's order."""
    found = []
    i = 0
    while i < len(argv) and argv[i] != "--":
        opt = argv[i]
        if opt in {"--bind", "--ro-bind", "--ro-bind-try", "--bind-try", "--dev-bind", "--symlink"}:
            found.append((opt, argv[i + 1], argv[i + 2]))
            i += 3
        elif opt in {"--tmpfs", "--proc", "--dev"}:
            found.append((opt, "", argv[i + 1]))
            i += 2
        else:
            i += 1
    return found


def _argv(sandbox: BubblewrapSandbox, env: Mapping[str, str] | None = None) -> list[str]:
    return sandbox._bwrap_argv(["cmd", "arg"], WORKSPACE, sandbox_env() if env is None else env)


# -- the bwrap command line ------------------------------------------------------------


def test_argv_isolates_every_namespace_and_drops_privileges(opened: Opened) -> None:
    argv = _argv(opened())
    assert argv[0] == FAKE_BWRAP
    for flag in ("--unshare-all", "--unshare-user", "--disable-userns", "--die-with-parent"):
        assert flag in argv
    assert "--new-session" in argv  # no TIOCSTI into the worker's terminal
    assert argv[argv.index("--cap-drop") + 1] == "ALL"
    assert argv[argv.index("--uid") + 1] == "1000"
    assert argv[argv.index("--gid") + 1] == "1000"
    # Never the host's network namespace (loopback services included).
    assert "--share-net" not in argv


def test_argv_writable_binds_are_the_workspace_and_env_only(opened: Opened) -> None:
    sandbox = opened()
    binds = {(src, dest) for opt, src, dest in _mounts(_argv(sandbox)) if opt == "--bind"}
    assert binds == {(str(sandbox.workspace), WORKSPACE), (str(sandbox.env_dir), ENV_ROOT)}


def test_argv_never_binds_home_folders_host_tmp_or_etc_secrets(opened: Opened) -> None:
    sandbox = opened()
    mounts = _mounts(_argv(sandbox))
    sources = [src for opt, src, _ in mounts if opt != "--symlink" and src]
    for src in sources:
        assert src not in SECRET_HOST_PATHS
        assert not src.startswith(("/home/", "/root/", "/etc/ssl/private"))
        # What comes from the host's temp dir is this sandbox's own folder, nothing beside.
        if src.startswith(str(opened.tempdir)):
            assert Path(src).is_relative_to(sandbox.host_root)
    host_etc = {src for src in sources if src.startswith("/etc/")}
    assert "/etc/passwd" not in host_etc and "/etc/group" not in host_etc
    # /tmp and $HOME are the sandbox's own size-limited tmpfs, not host folders.
    argv = _argv(sandbox)
    tmpfs = {argv[i + 1]: argv[i - 2 : i] for i, a in enumerate(argv) if a == "--tmpfs"}
    assert tmpfs == {
        "/tmp": ["--size", str(256 * 1024 * 1024)],
        SANDBOX_HOME: ["--size", str(256 * 1024 * 1024)],
    }


def test_argv_identity_files_name_no_host_account(opened: Opened) -> None:
    sandbox = opened()
    passwd = (sandbox.host_root / "passwd").read_text()
    assert [line.split(":")[0] for line in passwd.splitlines()] == ["root", "sandbox"]
    assert "root:x:0:0::/nonexistent:/usr/sbin/nologin" in passwd
    assert f"sandbox:x:1000:1000::{SANDBOX_HOME}:" in passwd
    mounts = _mounts(_argv(sandbox))
    assert ("--ro-bind", str(sandbox.host_root / "passwd"), "/etc/passwd") in mounts
    assert ("--ro-bind", str(sandbox.host_root / "group"), "/etc/group") in mounts
    assert ("--ro-bind", str(sandbox.host_root / "profile"), "/etc/profile") in mounts


def test_argv_environment_is_cleared_then_only_what_was_given(
    opened: Opened, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GITHUB_TOKEN", "ghs_s3cret_host_token")
    monkeypatch.setenv("RIBBIT_GITHUB__WEBHOOK_SECRET", "hook-s3cret")
    env = {"PATH": "/usr/bin", "ONLY": "this"}
    argv = _argv(opened(), env)
    clear = argv.index("--clearenv")
    set_at = [i for i, a in enumerate(argv) if a == "--setenv"]
    assert set_at and min(set_at) > clear
    assert {argv[i + 1]: argv[i + 2] for i in set_at} == env
    assert not any("s3cret" in a for a in argv)


def test_argv_root_is_read_only_after_every_mount_then_runs_the_command(opened: Opened) -> None:
    argv = opened()._bwrap_argv(["echo", "--bind", "/", "/x"], "/workspace/sub", {})
    end = argv.index("--")
    remount = argv.index("--remount-ro")
    assert argv[remount + 1] == "/"
    last_mount = max(i for i, a in enumerate(argv[:end]) if a in {"--bind", "--ro-bind", "--tmpfs"})
    assert remount > last_mount
    assert argv[argv.index("--chdir") + 1] == "/workspace/sub"
    # The command's own words come after "--": bwrap never reads them as options.
    assert argv[end + 1 :] == ["echo", "--bind", "/", "/x"]


def test_argv_system_folders_are_read_only(opened: Opened) -> None:
    mounts = _mounts(_argv(opened()))
    assert ("--ro-bind", "/usr", "/usr") in mounts
    for opt, src, dest in mounts:
        if src.startswith(("/usr", "/lib", "/bin", "/sbin", "/etc/")) and opt != "--symlink":
            assert opt in {"--ro-bind", "--ro-bind-try"}, (opt, src, dest)
    # The /etc entries are optional on a host (-try), never a whole folder of secrets.
    etc = [dest for opt, _, dest in mounts if opt == "--ro-bind-try"]
    assert etc and all(d.startswith("/etc/") for d in etc)
    assert "/etc/ssl/certs" in etc and "/etc/shadow" not in etc and "/etc/sudoers" not in etc


def test_argv_top_level_links_stay_links(
    opened: Opened, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # A merged-/usr host has /bin -> usr/bin: bwrap must recreate the link, since a bind
    # of the link would show its target under another name and /lib64 the loader.
    sandbox = opened()
    real_is_symlink = Path.is_symlink
    real_is_dir = Path.is_dir
    fake = {"/bin": "usr/bin", "/lib": "usr/lib"}
    monkeypatch.setattr(Path, "is_symlink", lambda p: str(p) in fake or real_is_symlink(p))
    monkeypatch.setattr(Path, "is_dir", lambda p: str(p) not in {"/lib32"} and real_is_dir(p))
    real_readlink = os.readlink
    monkeypatch.setattr(os, "readlink", lambda p: fake.get(str(p)) or real_readlink(p))
    mounts = _mounts(_argv(sandbox))
    assert ("--symlink", "usr/bin", "/bin") in mounts
    assert ("--symlink", "usr/lib", "/lib") in mounts
    assert not any(
        dest in {"/bin", "/lib", "/lib32"} for opt, _, dest in mounts if opt != "--symlink"
    )


def test_argv_egress_folder_only_for_a_setup_sandbox_and_read_only(opened: Opened) -> None:
    plain = opened()
    assert plain.egress_dir is None
    assert not any(dest == EGRESS_MOUNT for _, _, dest in _mounts(_argv(plain)))
    setup = opened(network=True)
    assert setup.egress_dir is not None
    assert ("--ro-bind", str(setup.egress_dir), EGRESS_MOUNT) in _mounts(_argv(setup))


# -- limits in front of bwrap ----------------------------------------------------------


def _limits(argv: Sequence[str]) -> dict[str, str]:
    return {a[2:].split("=")[0]: a.split("=")[1] for a in argv if a.startswith("--")}


def test_limits_without_a_cgroup_fall_back_to_address_space(opened: Opened) -> None:
    opened.use(processes_of=lambda uid: 7)
    settings = SandboxSettings(memory_mb=300, pids=40, workspace_mb=20)
    argv = opened(settings)._limits_argv()
    assert argv[0] == "prlimit" and argv[-1] == "--"
    mb = 1024 * 1024
    assert _limits(argv[1:-1]) == {
        # An unprivileged worker's own processes count against RLIMIT_NPROC too.
        "nproc": f"{40 + 7}:{40 + 7}",
        "fsize": f"{20 * mb}:{20 * mb}",
        "nofile": "1024:1024",
        "core": "0:0",
        "as": f"{300 * mb}:{300 * mb}",
    }


def test_limits_with_a_cgroup_enter_it_first_and_leave_address_space_alone(
    opened: Opened, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    group = MemoryCgroup(tmp_path / "cg", 2)
    group.path.mkdir()
    opened.use(
        memory_cgroup=lambda _mb, _uid: group,
        throwaway_uid=lambda: 3_000_123,
        processes_of=lambda uid: pytest.fail("not counted"),
    )
    monkeypatch.setattr(bwrap_mod, "_chown_tree", lambda root, uid: None)
    sandbox = opened(SandboxSettings(pids=40))
    argv = sandbox._limits_argv()
    enter = enter_argv(group)
    assert argv[: len(enter)] == enter
    limits = _limits(argv[len(enter) + 1 : -1])
    assert "as" not in limits
    # The throwaway host uid runs nothing else: the budget is the sandbox's alone.
    assert limits["nproc"] == "40:40"
    assert (sandbox.host_root / "cgroup").read_text() == str(group.path)
    sandbox.close()
    assert not group.path.exists()  # the group goes with the sandbox


def test_pick_host_uid_is_a_throwaway_uid_for_root_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    assert pick_host_uid() is None
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    for _ in range(20):
        uid = pick_host_uid()
        assert uid is not None and 3_000_000 <= uid < 4_000_000


def test_workspace_tmpfs_is_mounted_with_its_size_by_root_only(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    ran: list[list[str]] = []

    def run(argv: list[str], **_kw: Any) -> subprocess.CompletedProcess[bytes]:
        ran.append(argv)
        return subprocess.CompletedProcess(argv, 0)

    monkeypatch.setattr(subprocess, "run", run)
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    assert mount_workspace_tmpfs(tmp_path / "ws", 64, 3_000_001) is False
    assert ran == []
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    assert mount_workspace_tmpfs(tmp_path / "ws", 64, 3_000_001) is True
    assert ran == [
        [
            "mount",
            "-t",
            "tmpfs",
            "-o",
            "size=64m,mode=0700,uid=3000001,gid=3000001",
            "ribbit-workspace",
            str(tmp_path / "ws"),
        ]
    ]


def test_processes_of_counts_this_users_processes() -> None:
    assert processes_of(os.getuid()) >= 1  # this test's own process at least
    assert processes_of(3_999_999) == 0


# -- the resident process ---------------------------------------------------------------


class FakeServer:
    """Stands in for the bwrap process: pipes, a pid, a wait."""

    pid = 4_000_000  # never signalled for real: os.killpg is recorded

    def __init__(self, argv: list[str], **kw: Any) -> None:
        self.argv = argv
        self.kw = kw
        r_in, w_in = os.pipe()
        r_out, self.w_out = os.pipe()
        self._r_in = os.fdopen(r_in, "rb")
        self.stdin = os.fdopen(w_in, "wb")
        self.stdout = os.fdopen(r_out, "rb")
        self.waited = False
        # bwrap's options file (``--args``), read while the starter still holds it open.
        fds = kw.get("pass_fds") or ()
        self.options = os.pread(fds[0], 1 << 20, 0) if fds else b""
        STARTED.append(self)

    def wait(self, timeout: float | None = None) -> int:
        self.waited = True
        os.close(self.w_out)  # bwrap is gone: its output ends
        self._r_in.close()
        return -9


STARTED: list[FakeServer] = []


def test_server_starts_under_limits_with_only_a_path_and_dies_with_close(
    opened: Opened, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "s3cret")
    opened.use(spawn=FakeServer)
    killed: list[tuple[int, int]] = []
    monkeypatch.setattr(os, "killpg", lambda pid, sig: killed.append((pid, sig)))
    STARTED.clear()
    sandbox = opened()
    (server,) = STARTED
    limits = sandbox._limits_argv()
    assert server.argv[: len(limits)] == limits
    rest = server.argv[len(limits) :]
    (fd,) = server.kw["pass_fds"]
    payload = server_payload()
    # Nothing long on any command line the sandbox's ``ps`` shows: bwrap's options come
    # from a file, the runner's source on its stdin ahead of every request.
    assert rest == [
        FAKE_BWRAP,
        "--args",
        str(fd),
        "--",
        "/bin/sh",
        "-c",
        bwrap_mod._START_SERVER,
        SERVER_BOOTSTRAP,
        str(len(payload)),
    ]
    assert sum(map(len, rest[1:])) < 400
    assert server.options == b"".join(f"{o}\0".encode() for o in sandbox._bwrap_options(WORKSPACE))
    assert b"s3cret" not in server.options
    assert server._r_in.read(len(payload)) == payload
    assert "--inside-sandbox" in bwrap_mod._START_SERVER  # its kill(-1) is armed inside only
    # prlimit and bwrap get a bare PATH: nothing of the worker's environment.
    assert server.kw["env"] == {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}
    assert server.kw["start_new_session"] is True and server.kw["close_fds"] is True
    assert server.kw["user"] is None and server.kw["extra_groups"] is None
    root = sandbox.host_root
    sandbox.close()
    assert killed == [(FakeServer.pid, signal.SIGKILL)]
    assert server.waited and not root.exists()
    with pytest.raises(SandboxError, match="closed"):
        sandbox.exec("true", timeout=1)


def test_server_of_a_root_worker_runs_as_the_throwaway_uid(
    opened: Opened, monkeypatch: pytest.MonkeyPatch
) -> None:
    chowned: list[tuple[Path, int]] = []
    opened.use(throwaway_uid=lambda: 3_000_123, spawn=FakeServer)
    monkeypatch.setattr(bwrap_mod, "_chown_tree", lambda root, uid: chowned.append((root, uid)))
    monkeypatch.setattr(os, "killpg", lambda pid, sig: None)
    STARTED.clear()
    sandbox = opened(network=True)
    (server,) = STARTED
    assert (server.kw["user"], server.kw["group"], server.kw["extra_groups"]) == (
        3_000_123,
        3_000_123,
        [],
    )
    assert chowned == [(sandbox.host_root, 3_000_123)]
    # The egress folder is made after the chown: the sandbox user must not own it.
    assert sandbox.egress_dir is not None and sandbox.egress_dir.exists()


# -- opening and its failures -----------------------------------------------------------


def test_open_without_bwrap_fails_before_making_anything(opened: Opened) -> None:
    opened.use(bwrap_path=lambda: None)
    with pytest.raises(SandboxError, match="not installed"):
        opened()
    assert opened.roots() == []


def test_open_that_fails_midway_removes_its_folder_and_cgroup(
    opened: Opened, tmp_path: Path
) -> None:
    group = MemoryCgroup(tmp_path / "cg", 2)
    group.path.mkdir()
    opened.use(memory_cgroup=lambda _mb, _uid: group)
    opened.source = tmp_path / "not-a-dir"
    opened.source.write_text("")
    with pytest.raises(SandboxError, match="not a directory"):
        opened()
    assert opened.roots() == []
    assert not group.path.exists()


def test_open_copies_the_checkout_and_records_its_owner(opened: Opened) -> None:
    sandbox = opened()
    assert (sandbox.workspace / "a.py").read_text() == "x = 1\n"
    assert (sandbox.host_root / "owner").read_text() == f"{os.getpid()}\n"
    # Other host users cannot reach the workspace: its folder is private (the workspace
    # itself takes the checkout's mode from the copy).
    assert sandbox.host_root.stat().st_mode & 0o777 == 0o700
    assert opened.roots() == [sandbox.host_root]
    sandbox.close()
    sandbox.close()  # twice is harmless
    assert opened.roots() == []


def test_copy_keeps_links_as_links_and_refuses_a_file(tmp_path: Path) -> None:
    secret = tmp_path / "host-secret"
    secret.write_text("token")
    src = tmp_path / "src"
    src.mkdir()
    (src / "link").symlink_to(secret)
    dest = tmp_path / "dest"
    dest.mkdir()
    _copy_tree(src, dest)
    # The host file is never copied in: the sandbox sees a link to a path it lacks.
    assert (dest / "link").is_symlink()
    assert os.readlink(dest / "link") == str(secret)
    with pytest.raises(SandboxError, match="not a directory"):
        _copy_tree(secret, dest)


# -- exec and host-side files ------------------------------------------------------------


class FakeSession:
    def __init__(self, answer: Callable[[dict[str, object]], dict[str, object] | None]) -> None:
        self.answer = answer
        self.requests: list[dict[str, object]] = []
        self.woken = False

    def call(self, request: dict[str, object], wait_s: float) -> dict[str, object] | None:
        self.requests.append(request)
        return self.answer(request)

    def wake_all(self) -> None:
        self.woken = True


def _ok(out: str = "") -> dict[str, object]:
    import base64

    return {
        "rc": 0,
        "out": base64.b64encode(out.encode()).decode(),
        "err": "",
        "out_total": len(out),
        "err_total": 0,
    }


def test_exec_without_an_answer_closes_the_whole_sandbox(opened: Opened) -> None:
    sandbox = opened()
    session = FakeSession(lambda _r: None)
    sandbox._session = session  # type: ignore[assignment]
    result = sandbox.exec("sleep 9", timeout=1)
    assert (result.exit_code, result.timed_out) == (TIMEOUT_EXIT_CODE, True)
    assert session.woken and not sandbox.host_root.exists()
    with pytest.raises(SandboxError, match="closed"):
        sandbox.exec("true", timeout=1)


def test_exec_reports_an_oom_kill_seen_meanwhile(opened: Opened) -> None:
    sandbox = opened()
    counts = iter([2, 3, 3, 3])

    class Ooms:
        def count(self) -> int:
            return next(counts)

        def close(self) -> None:
            pass

    sandbox._ooms = Ooms()  # type: ignore[assignment]
    sandbox._session = FakeSession(lambda _r: _ok("hi"))  # type: ignore[assignment]
    first = sandbox.exec("true", timeout=5)
    assert first.oom_killed and first.stdout == "hi"
    assert not sandbox.exec("true", timeout=5).oom_killed


@pytest.mark.parametrize("resolved", ["/etc/passwd", "/workspace", "/workspace2/a.py", ""])
def test_inside_path_refuses_what_resolves_out_of_the_workspace(
    opened: Opened, resolved: str
) -> None:
    sandbox = opened()
    sandbox._session = FakeSession(lambda _r: _ok(resolved + "\n"))  # type: ignore[assignment]
    with pytest.raises(PermissionError, match="outside the workspace"):
        sandbox.read_file("a.py")


def test_inside_path_is_resolved_by_the_sandbox(opened: Opened) -> None:
    sandbox = opened()
    session = FakeSession(lambda _r: _ok("/workspace/a.py\n"))
    sandbox._session = session  # type: ignore[assignment]
    assert sandbox.read_file("/workspace/./a.py") == b"x = 1\n"
    (request,) = session.requests
    assert request["argv"] == ["realpath", "-m", "--", "/workspace/a.py"]


def _resolving_to(sandbox: BubblewrapSandbox, rel: str) -> None:
    sandbox._session = FakeSession(lambda _r: _ok(f"/workspace/{rel}\n"))  # type: ignore[assignment]


def test_read_and_write_never_follow_a_link_swapped_in_later(
    opened: Opened, tmp_path: Path
) -> None:
    # The sandbox said "a/f" was inside; by the time the host opens it, a link stands there.
    sandbox = opened()
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "f").write_text("host")
    (sandbox.workspace / "a").symlink_to(outside)
    (sandbox.workspace / "g").symlink_to(outside / "f")
    _resolving_to(sandbox, "a/f")
    with pytest.raises(PermissionError):
        sandbox.read_file("a/f")
    with pytest.raises(PermissionError):
        sandbox.write_file("a/f", b"pwned")
    _resolving_to(sandbox, "g")
    with pytest.raises(PermissionError, match="symlink"):
        sandbox.read_file("g")
    with pytest.raises(PermissionError, match="symlink"):
        sandbox.write_file("g", b"pwned")
    assert (outside / "f").read_text() == "host"


def test_write_makes_parent_folders_inside(opened: Opened) -> None:
    sandbox = opened()
    _resolving_to(sandbox, "new/dir/f.txt")
    sandbox.write_file("new/dir/f.txt", b"data")
    assert (sandbox.workspace / "new/dir/f.txt").read_bytes() == b"data"


def test_diff_stops_the_sandboxs_processes_first(
    opened: Opened, monkeypatch: pytest.MonkeyPatch
) -> None:
    sandbox = opened()
    session = FakeSession(lambda _r: _ok())
    sandbox._session = session  # type: ignore[assignment]
    seen: list[tuple[int, object, object]] = []

    def host_diff(source: Path, base: str, export: object, *, leave_out: object) -> str:
        seen.append((len(session.requests), base, leave_out))
        return "patch"

    # The diff both backends take lives in common.py (HostDiffedSandbox.diff).
    monkeypatch.setattr(common_mod, "host_workspace_diff", host_diff)
    sandbox.leave_out_of_diff(["pkg.egg-info"])
    assert sandbox.diff() == "patch"
    assert session.requests[0].get("stop_all") is True
    # Read only after the stop was answered, against the checkout's commit, leaving out
    # what the setup step built.
    assert seen == [(1, BASE_SHA, ("pkg.egg-info",))]


# -- leftovers of a crashed worker -------------------------------------------------------


def _leftover(base: Path, name: str, owner: str | None, cgroup: str | None = None) -> Path:
    root = base / f"{TEMP_PREFIX}{name}"
    (root / "workspace").mkdir(parents=True)
    if owner is not None:
        (root / "owner").write_text(owner)
    if cgroup is not None:
        (root / "cgroup").write_text(cgroup)
    return root


def _dead_pid() -> int:
    """A pid no process can have (above the kernel's maximum): never reused meanwhile."""
    return int(Path("/proc/sys/kernel/pid_max").read_text()) + 1


def test_reap_stale_removes_dead_owners_only(tmp_path: Path) -> None:
    live = _leftover(tmp_path, "live", f"{os.getpid()}\n")
    dead = _leftover(tmp_path, "dead", f"{_dead_pid()}\n")
    garbled = _leftover(tmp_path, "garbled", "not a pid")
    ownerless = _leftover(tmp_path, "ownerless", None)
    other = tmp_path / "not-ours"
    other.mkdir()
    removed = reap_stale(tmp_path)
    assert sorted(removed) == sorted([dead, garbled, ownerless])
    assert live.exists() and other.exists()
    assert not any(p.exists() for p in removed)


def test_reap_stale_removes_the_recorded_cgroup(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    removed_groups: list[Path] = []
    monkeypatch.setattr(MemoryCgroup, "remove", lambda self: removed_groups.append(self.path))
    group = CGROUP_ROOT / "memory" / f"{CGROUP_PREFIX}0123"
    _leftover(tmp_path, "dead", f"{_dead_pid()}\n", str(group))
    reap_stale(tmp_path)
    assert removed_groups == [group]


@pytest.mark.parametrize(
    "recorded",
    [
        "/etc",  # not under the cgroup root
        f"/home/user/{CGROUP_PREFIX}x",  # ours by name, elsewhere
        str(CGROUP_ROOT / "memory" / "system.slice"),  # under the root, not ours
        str(CGROUP_ROOT),
        f"{CGROUP_ROOT}/../../home/user/{CGROUP_PREFIX}x",  # climbs out of the root
        f"memory/{CGROUP_PREFIX}x",  # relative: wherever the reaper runs
    ],
)
def test_recorded_cgroup_only_ever_names_one_of_ours(tmp_path: Path, recorded: str) -> None:
    root = _leftover(tmp_path, "x", None, recorded)
    assert _recorded_cgroup(root) is None


def test_recorded_cgroup_reads_ours_and_tolerates_none(tmp_path: Path) -> None:
    group = CGROUP_ROOT / f"{CGROUP_PREFIX}ab"
    root = _leftover(tmp_path, "x", None, f"{group}\n")
    assert _recorded_cgroup(root) == MemoryCgroup(group, version=0)
    assert _recorded_cgroup(_leftover(tmp_path, "y", None)) is None


def test_chown_tree_changes_every_entry_without_following_links(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "root"
    (root / "d").mkdir(parents=True)
    (root / "d" / "f").write_text("")
    (root / "link").symlink_to("/etc/passwd")
    changed: list[str] = []
    monkeypatch.setattr(os, "lchown", lambda p, uid, gid: changed.append(str(p)))
    _chown_tree(root, 3_000_001)
    assert sorted(changed) == sorted(
        str(p) for p in (root, root / "d", root / "d" / "f", root / "link")
    )


# -- one real bwrap, where it is installed ------------------------------------------------


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")
def test_real_bwrap_sees_only_the_allow_listed_environment_and_no_host_secrets(
    opened: Opened, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("GITHUB_TOKEN", "ghs_s3cret")
    opened.use(bwrap_path=bwrap_path)
    sandbox = opened()
    host_file = tmp_path / "host-only"
    host_file.write_text("secret")
    script = (
        "env; "
        f"for p in /root /etc/shadow {host_file} {opened.tempdir}; do "
        'test -e "$p" && echo "SEEN $p"; done; '
        "touch /usr/x 2>/dev/null && echo WROTE-USR; "
        "touch /x 2>/dev/null && echo WROTE-ROOT; "
        "touch /workspace/w && echo WROTE-WS"
    )
    env = {"PATH": "/usr/bin:/bin", "ONLY": "this"}
    argv = sandbox._bwrap_argv(["/bin/sh", "-c", script], WORKSPACE, env)
    done = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)
    if done.returncode != 0 and "WROTE" not in done.stdout:
        pytest.skip(f"bwrap cannot start here: {done.stderr.strip()[:200]}")
    lines = done.stdout.splitlines()
    names = {line.split("=")[0] for line in lines if "=" in line}
    # What sh adds itself, and the two given: nothing of the worker's environment.
    assert names - {"PWD", "OLDPWD", "SHLVL", "_"} == {"PATH", "ONLY"}, names
    assert not any(line.startswith("SEEN") for line in lines), lines
    assert "s3cret" not in done.stdout
    # Only the workspace (and the tmpfs /tmp and $HOME) can be written.
    assert {"WROTE-USR", "WROTE-ROOT"}.isdisjoint(lines) and "WROTE-WS" in lines
    assert (sandbox.workspace / "w").exists()
