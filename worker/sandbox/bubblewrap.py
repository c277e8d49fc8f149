"""BubblewrapSandbox: the local backend for hosts without a container engine.

One ``bwrap`` per sandbox, started when the sandbox opens, in fresh user, pid, net, ipc,
uts, mount and cgroup namespaces; its command is a small resident process
(:mod:`worker.sandbox.session_server`) that runs every ``exec`` inside those same
namespaces. So ``/tmp``, ``$HOME`` and background processes last for the whole sandbox,
as in a container (and in the pod the model was trained in), and all die when it
closes: the host kills bwrap, and with it the pid namespace. Inside, commands are uid
1000 and see only: the host's ``/usr`` and loader paths read-only, a handful of ``/etc``
files (no ``/etc/ssl/private``, no host passwd), tmpfs ``/tmp`` and ``$HOME``, the
workspace and the set-up environment (``/opt/ribbit``, a host folder kept for the
sandbox's life), the only writable host paths. A sandbox opened for the setup step
(``network=True``) also sees, read-only, the folder holding the setup proxy's unix
socket (worker/sandbox/egress.py); it never gets a network interface.
When the worker is root it also drops to a throwaway host uid before entering (so the
sandbox user is nobody on the host, and RLIMIT_NPROC counts only this sandbox's
processes) and puts the workspace on its own size-limited tmpfs.

Memory: a root worker puts each sandbox in its own memory cgroup (worker.sandbox.cgroup),
one memory_mb limit for all of its processes together, OOM kills counted. Elsewhere the
fallback is RLIMIT_AS = memory_mb, which limits each process alone.

Limits (set by ``prlimit`` before ``bwrap`` starts, inherited by everything inside):
RLIMIT_NPROC = pids, RLIMIT_FSIZE = workspace_mb (per file), RLIMIT_NOFILE = 1024,
RLIMIT_CORE = 0, and RLIMIT_AS as said above.
No CPU share limit: that needs a cgroup, which only the docker backend sets.
The workspace size limit needs root (a tmpfs mount); unprivileged, only the per-file
RLIMIT_FSIZE applies. A command that times out takes every other process of the
sandbox with it (as on docker); one that ends normally leaves its background processes.
``--die-with-parent`` ties the sandbox to the thread that opened it: open and close a
sandbox in the same (job) thread.
"""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import cast

from worker.sandbox.base import (
    DEFAULT_OUTPUT_CAP,
    TIMEOUT_EXIT_CODE,
    WORKSPACE,
    ExecResult,
    SandboxError,
    pid_alive,
)
from worker.sandbox.bubblewrap_host import BubblewrapHost
from worker.sandbox.cgroup import (
    CGROUP_PREFIX,
    CGROUP_ROOT,
    MemoryCgroup,
    OomCounter,
    enter_argv,
)
from worker.sandbox.common import (
    ENV_ROOT,
    KILL_GRACE_S,
    PROFILE,
    SANDBOX_GID,
    SANDBOX_HOME,
    SANDBOX_UID,
    HostDiffedSandbox,
    sandbox_env,
    workspace_relative,
)
from worker.sandbox.egress import EGRESS_MOUNT
from worker.sandbox.export import ExportLimits, export_host_tree, read_regular_fd
from worker.sandbox.session import (
    STOP_ALL_REQUEST,
    SessionClient,
    bootstrap_args,
    exec_request,
    parse_result,
)
from worker.sandbox.snapshot import (
    ENV_SKIP,
    SNAPSHOT_LIMITS,
    EnvSnapshot,
    restore_into_host_dirs,
)
from worker.settings import SandboxSettings

TEMP_PREFIX = "ribbit-bwrap-"
# This machine's host operations, for every sandbox opened without its own (looked up
# when one opens, so `ribbit doctor`'s test can swap it).
THIS_HOST = BubblewrapHost()
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
# The resident process, started with the host's own python3 (bwrap shares the host's /usr):
# $0 the bootstrap, $1 the length of the source it reads from stdin (session.py).
_START_SERVER = 'exec "$(command -v python3)" -I -c "$0" "$1" --inside-sandbox'
_HOST_GRACE_S = 5


class BubblewrapSandbox(HostDiffedSandbox):
    backend = "bubblewrap"

    def __init__(
        self,
        settings: SandboxSettings,
        source: Path,
        *,
        network: bool = False,
        host: BubblewrapHost | None = None,
    ) -> None:
        host = host if host is not None else THIS_HOST
        binary = host.bwrap_path()
        if binary is None:
            raise SandboxError("bubblewrap (bwrap) is not installed")
        self._bwrap = binary
        self._host = host
        self._settings = settings
        self._closed = False
        self._server: subprocess.Popen[bytes] | None = None
        self._session: SessionClient | None = None
        self._base = host.base_commit(source)
        self._source = source
        self._root = Path(tempfile.mkdtemp(prefix=TEMP_PREFIX, dir=host.temp_dir))
        self.host_root = self._root  # exposed so tests and reapers can check cleanup
        self.workspace = self._root / "workspace"
        self.workspace_size_limited = False
        self._cgroup: MemoryCgroup | None = None
        self._ooms: OomCounter | None = None
        # The set-up environment: on the host's disk, kept across this sandbox's execs.
        self.env_dir = self._root / "env"
        # Never --share-net (the host's namespace, loopback services included): a setup
        # sandbox gets only the egress folder with the proxy's unix socket.
        self.egress_dir: Path | None = None
        try:
            self._host_uid = host.throwaway_uid()
            self._open_cgroup()
            (self._root / "owner").write_text(f"{os.getpid()}\n")
            if self._cgroup is not None:  # for reap_stale, should this process crash
                (self._root / "cgroup").write_text(str(self._cgroup.path))
            self._write_identity_files()
            self.workspace.mkdir(mode=0o700)
            self.workspace_size_limited = host.mount_workspace(
                self.workspace, settings.workspace_mb, self._host_uid
            )
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
            self._start_server()
        except BaseException:
            self.close()
            raise

    def _open_cgroup(self) -> None:
        """The sandbox's own memory cgroup, where the host can make one."""
        self._cgroup = self._host.memory_cgroup(self._settings.memory_mb, self._host_uid)
        self.memory_cgroup = self._cgroup  # exposed for tests and ribbit doctor
        if self._cgroup is not None:
            self._ooms = OomCounter(self._cgroup)

    def _start_server(self) -> None:
        spawn = self._host.spawn
        if spawn is None:
            return
        command = ["/bin/sh", "-c", _START_SERVER, *bootstrap_args()]
        uid = self._host_uid
        # bwrap's options (every mount, every --setenv) come from a file (``--args``), not
        # its argv: its pid-1 reaper inside the sandbox keeps bwrap's command line, and
        # ``ps`` there (which the model reads) would show all of it.
        with tempfile.TemporaryFile() as options:
            options.write(b"".join(f"{o}\0".encode() for o in self._bwrap_options(WORKSPACE)))
            options.flush()
            options.seek(0)
            fd = options.fileno()
            # A root worker drops to the throwaway uid before prlimit runs, so RLIMIT_NPROC
            # (which root ignores) holds and counts only this sandbox's processes.
            self._server = spawn(
                [*self._limits_argv(), self._bwrap, "--args", str(fd), "--", *command],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
                close_fds=True,
                pass_fds=(fd,),
                user=uid,
                group=uid,
                extra_groups=None if uid is None else [],
                env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"},
            )
        stdin, stdout = self._server.stdin, self._server.stdout
        assert stdin is not None and stdout is not None

        def send(data: bytes) -> None:
            stdin.write(data)
            stdin.flush()

        # Through the file object, never its bare fd: close() may close the pipe while
        # the reader still waits, and the number could be another file by then.
        answers = cast(io.BufferedReader, stdout)
        self._session = SessionClient(send, lambda: answers.read1(1 << 16), bootstrap=True)

    # -- set-up ------------------------------------------------------------------------
    def _write_identity_files(self) -> None:
        (self._root / "passwd").write_text(_PASSWD)
        (self._root / "group").write_text(_GROUP)
        (self._root / "passwd").chmod(0o644)
        (self._root / "group").chmod(0o644)

    # -- running -----------------------------------------------------------------------
    def _bwrap_argv(self, argv: Sequence[str], cwd: str, env: Mapping[str, str]) -> list[str]:
        return [self._bwrap, *self._bwrap_options(cwd, env), "--", *argv]

    def _bwrap_options(self, cwd: str, env: Mapping[str, str] | None = None) -> list[str]:
        """Every bwrap option for a command run in ``cwd`` with exactly ``env`` (the
        sandbox's own environment when None)."""
        env = sandbox_env() if env is None else env
        args = [
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
        return [*args, *self._bwrap_mounts(), "--chdir", cwd]

    def _bwrap_mounts(self) -> list[str]:
        """The file system the sandbox sees, read-only but for /tmp, $HOME and the
        workspace."""
        args = ["--ro-bind", "/usr", "/usr"]
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
        ]
        return args

    def _limits_argv(self) -> list[str]:
        """prlimit in front of everything: rlimits are inherited by bwrap, the runner and the
        command. (Not preexec_fn: that is unsafe in a threaded worker.)"""
        s = self._settings
        mb = 1024 * 1024
        # RLIMIT_NPROC counts every process of the real uid. The throwaway uid of a root
        # worker has none besides the sandbox's; an unprivileged worker's own user has
        # its whole session, which the budget must not swallow.
        own = 0 if self._host_uid is not None else self._host.processes_of(os.getuid())
        nproc = s.pids + own
        limits = {
            "nproc": nproc,
            "fsize": s.workspace_mb * mb,
            "nofile": 1024,
            "core": 0,
        }
        if self._cgroup is None:
            limits["as"] = s.memory_mb * mb  # the per-process fallback
        enter = enter_argv(self._cgroup) if self._cgroup is not None else []
        return [*enter, "prlimit", *(f"--{name}={v}:{v}" for name, v in limits.items()), "--"]

    def exec(
        self,
        command: str | Sequence[str],
        *,
        timeout: float,
        cwd: str = WORKSPACE,
        env: Mapping[str, str] | None = None,
        output_cap: int = DEFAULT_OUTPUT_CAP,
    ) -> ExecResult:
        if self._closed or self._session is None:
            raise SandboxError("sandbox is closed")
        request = exec_request(command, timeout=timeout, cwd=cwd, env=env, output_cap=output_cap)
        start = time.monotonic()
        ooms = self._ooms.count() if self._ooms is not None else 0
        answer = self._call(request, timeout + KILL_GRACE_S + _HOST_GRACE_S)
        elapsed = time.monotonic() - start
        if answer is None:
            # ``timeout`` inside did not end it: the whole sandbox is the only thing left.
            self.close()
            return ExecResult(TIMEOUT_EXIT_CODE, "", "", elapsed, timed_out=True)
        result = parse_result(answer, elapsed, timeout, output_cap)
        if self._ooms is not None and self._ooms.count() > ooms:
            # The kernel's OOM killer acted in this sandbox's memory cgroup meanwhile.
            result = replace(result, oom_killed=True)
        return result

    def _call(self, request: dict[str, object], wait_s: float) -> dict[str, object] | None:
        """Send one request to the resident process and wait for its answer (None: none
        came in ``wait_s``)."""
        if self._closed or self._session is None:
            raise SandboxError("sandbox is closed")
        return self._session.call(request, wait_s)

    # -- files -------------------------------------------------------------------------
    def _inside_path(self, path: str) -> str:
        """Where ``path`` leads, resolved INSIDE the sandbox (background processes may
        change symlinks at any time, so the host never resolves one itself)."""
        rel = workspace_relative(path)
        found = self.exec(["realpath", "-m", "--", f"{WORKSPACE}/{rel}"], timeout=60)
        real = found.stdout.strip()
        if found.exit_code != 0 or not real.startswith(WORKSPACE + "/"):
            raise PermissionError(f"{path}: outside the workspace")
        return real[len(WORKSPACE) + 1 :]

    def _open(self, rel: str, flags: int, *, make_parents: bool = False) -> int:
        """Open ``rel`` under the workspace without following any symlink on the way,
        so a link swapped in after the check above fails (ELOOP) instead of escaping."""
        parts = [p for p in rel.split("/") if p]
        fd = os.open(self.workspace, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        try:
            for part in parts[:-1]:
                if make_parents:
                    with contextlib.suppress(FileExistsError):
                        os.mkdir(part, 0o755, dir_fd=fd)
                        if self._host_uid is not None:
                            os.chown(part, self._host_uid, self._host_uid, dir_fd=fd)
                try:
                    nxt = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
                except OSError as exc:
                    raise PermissionError(f"{rel}: {exc.strerror}") from exc
                os.close(fd)
                fd = nxt
            try:
                return os.open(parts[-1], flags | os.O_NOFOLLOW, 0o644, dir_fd=fd)
            except OSError as exc:
                if exc.errno == 40:  # ELOOP: a symlink where the file should be
                    raise PermissionError(f"{rel}: a symlink changed under the reader") from exc
                raise
        finally:
            os.close(fd)

    def read_file(self, path: str) -> bytes:
        # Resolved inside, opened without following any link, without blocking (a FIFO
        # would hang the host), regular files only, never more than the read cap.
        fd = self._open(self._inside_path(path), os.O_RDONLY | os.O_NONBLOCK)
        try:
            return read_regular_fd(fd, path)
        finally:
            os.close(fd)

    def write_file(self, path: str, data: bytes) -> None:
        rel = self._inside_path(path)
        fd = self._open(rel, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, make_parents=True)
        with os.fdopen(fd, "wb") as fh:
            if self._host_uid is not None:
                os.fchown(fh.fileno(), self._host_uid, self._host_uid)
            fh.write(data)

    def _export_into(self, limits: ExportLimits) -> Callable[[Path], None]:
        return lambda dest: export_host_tree(self.workspace, dest, limits)

    # -- snapshots (worker/sandbox/snapshot.py) ----------------------------------------
    def export_setup_state(self, env_dest: Path, workspace_dest: Path) -> None:
        self._stop_processes()
        export_host_tree(self.env_dir, env_dest, SNAPSHOT_LIMITS, skip_top=ENV_SKIP)
        export_host_tree(self.workspace, workspace_dest, SNAPSHOT_LIMITS)

    def restore_setup_state(self, snapshot: EnvSnapshot) -> None:
        # Host-side copies into folders the sandbox user owns: safe only while nothing
        # of the sandbox has run yet (the workspace is still the host tree's copy).
        restore_into_host_dirs(snapshot, self.env_dir, self.workspace)
        if self._host_uid is not None:
            _chown_tree(self.env_dir, self._host_uid)
            _chown_tree(self.workspace, self._host_uid)

    def _stop_processes(self) -> None:
        """Nothing of the sandbox may run while the host reads its workspace: the resident
        process kills every other process of the sandbox user (background ones too)."""
        self._call(STOP_ALL_REQUEST, 30)

    # -- teardown ----------------------------------------------------------------------
    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        server = self._server
        if server is not None:
            # Killing bwrap ends the sandbox's pid namespace and every process in it,
            # an exec still running on another thread included.
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(server.pid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                server.wait(timeout=30)
            for pipe in (server.stdin, server.stdout):
                if pipe is not None:
                    with contextlib.suppress(OSError):
                        pipe.close()
        if self._session is not None:
            self._session.wake_all()
        remove_root(self._root)
        if self._ooms is not None:
            self._ooms.close()
        if self._cgroup is not None:
            self._cgroup.remove()


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
        if pid and pid_alive(pid):
            continue
        group = _recorded_cgroup(root)
        remove_root(root)
        if group is not None:
            group.remove()
        removed.append(root)
    return removed


def _recorded_cgroup(root: Path) -> MemoryCgroup | None:
    """The memory cgroup a sandbox recorded, if it is one of ours under the cgroup root."""
    try:
        recorded = (root / "cgroup").read_text().strip()
    except OSError:
        return None
    # Normalised first: is_relative_to compares components, so "<root>/../../x" would pass.
    path = Path(os.path.normpath(recorded))
    if not path.is_absolute():
        return None
    if not path.name.startswith(CGROUP_PREFIX) or not path.is_relative_to(CGROUP_ROOT):
        return None
    return MemoryCgroup(path, version=0)


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
