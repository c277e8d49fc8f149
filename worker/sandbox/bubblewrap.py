"""BubblewrapSandbox: the local backend for hosts without a container engine.

Each ``exec`` is one ``bwrap`` run in fresh user, pid, net, ipc, uts, mount and cgroup
namespaces. Inside, the command is uid 1000 and sees only: the host's ``/usr`` and loader
paths read-only, a handful of ``/etc`` files (no ``/etc/ssl/private``, no host passwd),
fresh tmpfs ``/tmp`` and ``$HOME``, the workspace and the set-up environment
(``/opt/ribbit``, a host folder kept for the sandbox's life), the only writable host
paths. A sandbox opened for the setup step (``network=True``) also sees, read-only, the
folder holding the setup proxy's unix socket (worker/sandbox/egress.py); it never gets
a network interface.
When the worker is root it also drops to a throwaway host uid before entering (so the
sandbox user is nobody on the host, and RLIMIT_NPROC counts only this sandbox's
processes) and puts the workspace on its own size-limited tmpfs.

Limits (set by ``prlimit`` before ``bwrap`` starts, inherited by everything inside):
RLIMIT_NPROC = pids, RLIMIT_AS = memory_mb (per process: a hog gets ENOMEM, not an OOM
kill), RLIMIT_FSIZE = workspace_mb (per file), RLIMIT_NOFILE = 1024, RLIMIT_CORE = 0.
No CPU share limit: that needs a cgroup, which only the docker backend sets.
The workspace size limit needs root (a tmpfs mount); unprivileged, only the per-file
RLIMIT_FSIZE applies. The pid namespace dies with its first process, so when a command
ends or times out nothing it started survives.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import selectors
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import IO, Self

from bot.settings import SandboxSettings
from worker.sandbox.base import (
    DEFAULT_OUTPUT_CAP,
    TIMEOUT_EXIT_CODE,
    WORKSPACE,
    ExecResult,
    SandboxError,
)
from worker.sandbox.common import (
    ENV_ROOT,
    KILL_GRACE_S,
    PROFILE,
    SANDBOX_GID,
    SANDBOX_HOME,
    SANDBOX_UID,
    CappedStream,
    base_commit,
    command_argv,
    sandbox_env,
    timed_out_exit,
    timeout_argv,
    workspace_cwd,
    workspace_diff,
    workspace_relative,
)
from worker.sandbox.egress import EGRESS_MOUNT

TEMP_PREFIX = "ribbit-bwrap-"
# Throwaway host uids for sandboxes of a root worker; far above any real account.
_HOST_UID_BASE = 3_000_000
_HOST_UID_SPAN = 1_000_000
# Read-only /etc entries the usual tools need; everything else of the host's /etc stays out.
_ETC_ALLOW = (
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "alternatives",
    "localtime",
    "nsswitch.conf",
    "hosts",
    "resolv.conf",
    "ssl/certs",
    "ca-certificates",
    "ca-certificates.conf",
    "mime.types",
    "protocols",
    "services",
    "bash.bashrc",
    "inputrc",
)
_PASSWD = (
    "root:x:0:0::/nonexistent:/usr/sbin/nologin\n"
    f"sandbox:x:{SANDBOX_UID}:{SANDBOX_GID}::{SANDBOX_HOME}:/bin/bash\n"
)
_GROUP = f"root:x:0:\nsandbox:x:{SANDBOX_GID}:\n"


def bwrap_path() -> str | None:
    return shutil.which("bwrap")


class BubblewrapSandbox:
    backend = "bubblewrap"

    def __init__(self, settings: SandboxSettings, source: Path, *, network: bool = False) -> None:
        binary = bwrap_path()
        if binary is None:
            raise SandboxError("bubblewrap (bwrap) is not installed")
        self._bwrap = binary
        self._settings = settings
        self._closed = False
        self._running: set[subprocess.Popen[bytes]] = set()
        self._base = base_commit(source)
        self._root = Path(tempfile.mkdtemp(prefix=TEMP_PREFIX))
        self.host_root = self._root  # exposed so tests and reapers can check cleanup
        self.workspace = self._root / "workspace"
        self.workspace_size_limited = False
        # The set-up environment: on the host's disk, kept across this sandbox's execs.
        self.env_dir = self._root / "env"
        # Never --share-net (the host's namespace, loopback services included): a setup
        # sandbox gets only the egress folder with the proxy's unix socket.
        self.egress_dir: Path | None = None
        try:
            self._host_uid = self._pick_host_uid()
            (self._root / "owner").write_text(f"{os.getpid()}\n")
            self._write_identity_files()
            self.workspace.mkdir(mode=0o700)
            self.workspace_size_limited = self._mount_workspace_tmpfs()
            _copy_tree(source, self.workspace)
            self.env_dir.mkdir(mode=0o755)
            (self._root / "profile").write_text(PROFILE)
            (self._root / "profile").chmod(0o644)
            if self._host_uid is not None:
                _chown_tree(self._root, self._host_uid)
            if network:
                # Made after the chown: the sandbox user must not own the socket's folder.
                self.egress_dir = self._root / "egress"
                self.egress_dir.mkdir(mode=0o755)
        except BaseException:
            self.close()
            raise

    # -- set-up ------------------------------------------------------------------------
    @staticmethod
    def _pick_host_uid() -> int | None:
        if os.geteuid() != 0:
            return None
        return _HOST_UID_BASE + secrets.randbelow(_HOST_UID_SPAN)

    def _write_identity_files(self) -> None:
        (self._root / "passwd").write_text(_PASSWD)
        (self._root / "group").write_text(_GROUP)
        (self._root / "passwd").chmod(0o644)
        (self._root / "group").chmod(0o644)

    def _mount_workspace_tmpfs(self) -> bool:
        if os.geteuid() != 0:
            return False
        uid = self._host_uid if self._host_uid is not None else 0
        opts = f"size={self._settings.workspace_mb}m,mode=0700,uid={uid},gid={uid}"
        done = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", opts, "ribbit-workspace", str(self.workspace)],
            capture_output=True,
            check=False,
        )
        return done.returncode == 0

    # -- running -----------------------------------------------------------------------
    def _bwrap_argv(self, argv: Sequence[str], cwd: str, env: Mapping[str, str]) -> list[str]:
        args = [
            self._bwrap,
            "--unshare-all",
            "--unshare-user",
            "--disable-userns",
            "--uid",
            str(SANDBOX_UID),
            "--gid",
            str(SANDBOX_GID),
            "--hostname",
            "sandbox",
            "--die-with-parent",
            "--new-session",
            "--cap-drop",
            "ALL",
            "--clearenv",
        ]
        for key, value in env.items():
            args += ["--setenv", key, value]
        args += ["--ro-bind", "/usr", "/usr"]
        for top in ("bin", "sbin", "lib", "lib64", "lib32", "libx32"):
            host = Path("/") / top
            if host.is_symlink():
                args += ["--symlink", os.readlink(host), f"/{top}"]
            elif host.is_dir():
                args += ["--ro-bind", str(host), f"/{top}"]
        for name in _ETC_ALLOW:
            args += ["--ro-bind-try", f"/etc/{name}", f"/etc/{name}"]
        args += [
            "--ro-bind",
            str(self._root / "passwd"),
            "/etc/passwd",
            "--ro-bind",
            str(self._root / "group"),
            "/etc/group",
            "--ro-bind",
            str(self._root / "profile"),
            "/etc/profile",
            "--bind",
            str(self.env_dir),
            ENV_ROOT,
            "--proc",
            "/proc",
            "--dev",
            "/dev",
            "--size",
            str(256 * 1024 * 1024),
            "--tmpfs",
            "/tmp",  # noqa: S108 (inside)
            "--size",
            str(256 * 1024 * 1024),
            "--tmpfs",
            SANDBOX_HOME,
            "--bind",
            str(self.workspace),
            WORKSPACE,
            *(["--ro-bind", str(self.egress_dir), EGRESS_MOUNT] if self.egress_dir else []),
            # bwrap builds / as a tmpfs the sandbox user owns; make it read-only so
            # only /tmp, $HOME and the workspace can be written.
            "--remount-ro",
            "/",
            "--chdir",
            cwd,
            "--",
            *argv,
        ]
        return args

    def _limits_argv(self) -> list[str]:
        """prlimit in front of everything: rlimits are inherited by timeout, bwrap and the
        command. (Not preexec_fn: that is unsafe in a threaded worker.)"""
        s = self._settings
        mb = 1024 * 1024
        # RLIMIT_NPROC counts every process of the real uid. The throwaway uid of a root
        # worker has none besides the sandbox's; an unprivileged worker's own user has
        # its whole session, which the budget must not swallow.
        nproc = s.pids if self._host_uid is not None else s.pids + _processes_of(os.getuid())
        limits = {
            "nproc": nproc,
            "as": s.memory_mb * mb,
            "fsize": s.workspace_mb * mb,
            "nofile": 1024,
            "core": 0,
        }
        return ["prlimit", *(f"--{name}={v}:{v}" for name, v in limits.items()), "--"]

    def exec(
        self,
        command: str | Sequence[str],
        *,
        timeout: float,
        cwd: str = WORKSPACE,
        env: Mapping[str, str] | None = None,
        output_cap: int = DEFAULT_OUTPUT_CAP,
    ) -> ExecResult:
        if self._closed:
            raise SandboxError("sandbox is closed")
        argv = self._bwrap_argv(command_argv(command), workspace_cwd(cwd), sandbox_env(env))
        # timeout runs on the host around bwrap: killing bwrap kills the sandbox's pid 1
        # (--die-with-parent), and with it every process in the namespace.
        start = time.monotonic()
        # A root worker drops to the throwaway uid before prlimit runs, so RLIMIT_NPROC
        # (which root ignores) holds and counts only this sandbox's processes.
        uid = self._host_uid
        proc = subprocess.Popen(
            [*self._limits_argv(), *timeout_argv(argv, timeout)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
            close_fds=True,
            user=uid,
            group=uid,
            extra_groups=None if uid is None else [],
            env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"},
        )
        self._running.add(proc)
        out, err = CappedStream(output_cap), CappedStream(output_cap)
        assert proc.stdout is not None and proc.stderr is not None
        try:
            _pump(
                proc,
                {proc.stdout: out, proc.stderr: err},
                deadline=start + timeout + KILL_GRACE_S + 5,
            )
            exit_code = proc.wait()
        finally:
            self._running.discard(proc)
        elapsed = time.monotonic() - start
        timed_out = timed_out_exit(exit_code, elapsed, timeout)
        if exit_code < 0:
            exit_code = 128 - exit_code
        return ExecResult(
            exit_code=TIMEOUT_EXIT_CODE if timed_out else exit_code,
            stdout=out.text(),
            stderr=err.text(),
            duration_s=elapsed,
            timed_out=timed_out,
            truncated=out.truncated or err.truncated,
            oom_killed=False,
        )

    # -- files -------------------------------------------------------------------------
    def _host_path(self, path: str) -> Path:
        # No process of the sandbox runs between execs (its pid namespace is gone), so
        # resolving symlinks here cannot race with the sandbox changing them.
        target = (self.workspace / workspace_relative(path)).resolve()
        if not target.is_relative_to(self.workspace.resolve()):
            raise PermissionError(f"{path}: outside the workspace")
        return target

    def read_file(self, path: str) -> bytes:
        return self._host_path(path).read_bytes()

    def write_file(self, path: str, data: bytes) -> None:
        target = self._host_path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        if self._host_uid is not None:
            _chown_tree(self.workspace, self._host_uid, only=target)

    def diff(self) -> str:
        return workspace_diff(self.exec, self._base)

    # -- teardown ----------------------------------------------------------------------
    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        # An exec may still run on another thread (the agent returned on cancel while a
        # tool ran): kill its whole process group, or it would outlive the sandbox.
        for proc in list(self._running):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
        remove_root(self._root)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def remove_root(root: Path) -> None:
    workspace = root / "workspace"
    if os.path.ismount(workspace):
        subprocess.run(["umount", "-l", str(workspace)], capture_output=True, check=False)
    shutil.rmtree(root, ignore_errors=True)


def reap_stale(temp_dir: Path | None = None) -> list[Path]:
    """Remove sandbox temp dirs whose creating process is gone (a crashed worker)."""
    base = temp_dir or Path(tempfile.gettempdir())
    removed = []
    for root in base.glob(f"{TEMP_PREFIX}*"):
        try:
            pid = int((root / "owner").read_text())
        except (OSError, ValueError):
            pid = 0
        if pid and _alive(pid):
            continue
        remove_root(root)
        removed.append(root)
    return removed


def _processes_of(uid: int) -> int:
    count = 0
    for status in Path("/proc").glob("[0-9]*/status"):
        try:
            for line in status.read_text().splitlines():
                if line.startswith("Uid:"):
                    count += int(line.split()[1]) == uid
                    break
        except (OSError, ValueError):
            continue
    return count


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _copy_tree(source: Path, dest: Path) -> None:
    if not source.is_dir():
        raise SandboxError(f"{source}: not a directory")
    shutil.copytree(source, dest, symlinks=True, dirs_exist_ok=True)


def _chown_tree(root: Path, uid: int, *, only: Path | None = None) -> None:
    if only is not None:
        # The new file and any folders write_file created on the way to it.
        for p in [only, *only.parents]:
            if p == root.parent or not p.is_relative_to(root):
                break
            os.lchown(p, uid, uid)
        return
    os.lchown(root, uid, uid)
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            os.lchown(os.path.join(dirpath, name), uid, uid)


def _pump(
    proc: subprocess.Popen[bytes], streams: dict[IO[bytes], CappedStream], deadline: float
) -> None:
    """Drain both pipes into capped buffers (the excess is read and dropped, so the
    command never blocks on a full pipe); SIGKILL the group if the host-side deadline,
    a backstop behind ``timeout``, passes."""
    sel = selectors.DefaultSelector()
    for fh, sink in streams.items():
        os.set_blocking(fh.fileno(), False)
        sel.register(fh, selectors.EVENT_READ, data=(fh, sink))
    try:
        while sel.get_map():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                deadline = time.monotonic() + 5
            for key, _ in sel.select(timeout=max(0.05, min(remaining, 1.0))):
                pipe, stream = key.data
                chunk = os.read(pipe.fileno(), 65536)
                if chunk:
                    stream.feed(chunk)
                else:
                    sel.unregister(pipe)
                    pipe.close()
    finally:
        sel.close()
