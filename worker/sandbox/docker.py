"""DockerSandbox: one container per sandbox, through the Docker Engine API (Docker, or
Podman's compatible service; see deploy/sandbox/README.md).

The container: image's non-root user (uid 1000), no network (``network_mode="none"``
always; a sandbox for the setup step also gets, read-only, the host folder holding the
setup proxy's unix socket, see worker/sandbox/egress.py), the set-up environment
(``/opt/ribbit``) on an anonymous volume, read-only root file system, every capability
dropped, no-new-privileges, cgroup limits for memory (no swap), CPUs and pids, and
size-limited tmpfs mounts for /workspace, /tmp and $HOME. The checkout is copied in with
``put_archive``; the host source dir is never mounted. Containers carry the LABEL so a
crashed worker's leftovers are found by ``reap_stale``.

Commands run through a resident process (worker/sandbox/session_server.py, the one the
bubblewrap backend runs), started at the first exec as one engine exec whose attached
stdin/stdout carry every request and answer: a command costs a spawn inside the
container, not an engine exec (runc exec and three API round trips, about 100 ms each on
Podman). It runs each command as ``timeout -k G T CMD``, in its own process group:
``timeout`` signals that group at T (SIGKILL G seconds later), and what is left in it
when the command ends is killed. Processes it started in a session of their own (the
agent's tool runner runs Bash that way) keep running, and ``/tmp`` and ``$HOME`` keep
their files, for the life of the container (as in the pod the model was trained in);
removing the container ends them all. A command that TIMES OUT is followed by
``kill(-1)``, which kills every process of the sandbox user but the runner, those that
escaped the group (setsid, daemons) included. A command that kills the runner itself
(``kill -9 -1``) reads as killed (137) and the next exec starts a new one. Pid 1 is a
bash loop that survives all that (the kernel does not let a namespace's init be killed
from inside it) and reaps adopted zombies, which would otherwise use up the pids limit.
A host-side deadline behind ``timeout`` kills the whole container. An image without
``python3`` runs each command as an engine exec of its own, ``sh -c 'timeout -k G T
CMD'`` with the same rules.
"""

from __future__ import annotations

import base64
import contextlib
import os
import shutil
import socket
import struct
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import docker
import docker.errors
from docker.models.containers import Container
from docker.types import Mount

from bot.retrying import retry, stop_after_attempts, wait_fixed
from worker.sandbox.base import (
    DEFAULT_OUTPUT_CAP,
    TIMEOUT_EXIT_CODE,
    WORKSPACE,
    ExecResult,
    SandboxError,
    pid_alive,
)
from worker.sandbox.common import (
    ENV_ROOT,
    KILL_GRACE_S,
    LABEL,
    PROFILE,
    SANDBOX_GID,
    SANDBOX_HOME,
    SANDBOX_UID,
    CappedStream,
    HostDiffedSandbox,
    base_commit,
    command_argv,
    sandbox_env,
    timed_out_exit,
    timeout_argv,
    workspace_cwd,
    workspace_relative,
)
from worker.sandbox.dockertar import tar_owned_dir, tar_paths, tar_tree
from worker.sandbox.egress import EGRESS_MOUNT, make_egress_dir
from worker.sandbox.export import ExportLimits, extract_tar_stream, read_tar_file
from worker.sandbox.session import (
    STOP_ALL_REQUEST,
    SessionClient,
    bootstrap_args,
    exec_request,
    parse_result,
)
from worker.sandbox.snapshot import ENV_SKIP, SNAPSHOT_LIMITS, EnvSnapshot, overlay_paths
from worker.settings import SandboxSettings

# Pid 1: never exits on its own, reaps every child it adopts.
_INIT = "trap 'exit 0' TERM; while :; do sleep 3600 & wait $!; done"
# $0.. are the timeout argv. timeout leads its own process group: what the command left
# there dies with it. After a timeout (124, or 137 when it had to SIGKILL) the kill -1
# takes out whatever escaped that group too.
_EXEC_WRAPPER = (
    '"$0" "$@" & t=$!; wait $t; rc=$?; kill -9 "-$t" 2>/dev/null; '
    "case $rc in 124|137) kill -9 -1 2>/dev/null;; esac; exit $rc"
)
_HOST_GRACE_S = 15
# The resident runner (session_server.py, bootstrapped: session.py) on the image's own
# python3 with site off (-S), so nothing installed in the set-up environment runs in it.
# Without python3 this exits 127, and the sandbox runs one engine exec per command.
_START_SERVER = (
    "for p in /usr/bin/python3 /usr/local/bin/python3; do "
    '[ -x "$p" ] && exec "$p" -I -S -c "$0" "$1" --inside-sandbox; done; exit 127'
)
_KILLED_EXIT = 128 + 9
# Base64 characters per argv element: under Linux's 128 KiB limit on one argument.
_ARG_CHUNK = 96 * 1024
# $1 base64 data, $2 the file, $3 its folder: refused (exit 86) when the folder resolves
# outside the workspace or the file is a link, then written by the redirect.
_OUTSIDE_EXIT = 86
_WRITE_SCRIPT = (
    'd=$(realpath -e -- "$3") || exit 1; case "$d/" in /workspace/*) ;; *) exit 86;; esac; '
    '[ -L "$2" ] && exit 86; printf %s "$1" | base64 -d REDIRECT "$2"'
)
# The image's /etc/profile resets PATH for a login shell (the agent's Bash); bash reads
# ~/.bash_profile after it, which puts the set-up environment first again.
_LOGIN_PROFILE = PROFILE
_OOM_PROBE = (
    "cat /sys/fs/cgroup/memory.events /sys/fs/cgroup/memory/memory.oom_control "
    "2>/dev/null | awk '$1 == \"oom_kill\" {n += $2} END {print n + 0}'"
)


def docker_client(settings: SandboxSettings, *, timeout: float = 60) -> docker.DockerClient:
    try:
        if settings.docker_url:
            return docker.DockerClient(base_url=settings.docker_url, timeout=int(timeout))
        return docker.from_env(timeout=int(timeout))
    except docker.errors.DockerException as exc:
        raise SandboxError(f"no Docker engine: {exc}") from exc


class DockerSandbox(HostDiffedSandbox):
    backend = "docker"

    def __init__(
        self,
        settings: SandboxSettings,
        source: Path,
        *,
        network: bool = False,
        client: docker.DockerClient | None = None,
    ) -> None:
        if not source.is_dir():
            raise SandboxError(f"{source}: not a directory")
        self._settings = settings
        self._client = client or docker_client(settings)
        self._closed = False
        self._base = base_commit(source)
        self._source = source
        self._oom_seen = 0
        self.container: Container | None = None
        # The resident runner, started at the first exec; None until then, and for good
        # when the image cannot run it (then each command is an engine exec of its own).
        self._session: SessionClient | None = None
        self._session_socket: socket.socket | None = None
        self._session_unavailable = False
        self._session_lock = threading.Lock()
        # The setup step's only way out: a host folder with the proxy's unix socket,
        # bound read-only (so this needs an engine on this host); never a network.
        self.egress_dir: Path | None = make_egress_dir() if network else None
        s = settings
        tmpfs_opts = "mode=1777,nosuid,nodev"
        mounts = [
            # The set-up environment on an anonymous volume (disk, not the memory a
            # tmpfs takes), removed with the container (remove(v=True)).
            Mount(target=ENV_ROOT, source=None, type="volume"),
        ]
        if self.egress_dir is not None:
            mounts.append(
                Mount(target=EGRESS_MOUNT, source=str(self.egress_dir), type="bind", read_only=True)
            )
        try:
            self.container = self._client.containers.create(
                s.image,
                ["-c", _INIT],
                # A repository's image may have an entrypoint of its own; pid 1 must be
                # the loop (an empty entrypoint does not reset it on Podman).
                entrypoint=["bash"],
                user=f"{SANDBOX_UID}:{SANDBOX_GID}",
                network_mode="none",
                mounts=mounts,
                mem_limit=f"{s.memory_mb}m",
                memswap_limit=f"{s.memory_mb}m",
                nano_cpus=int(s.cpus * 1e9),
                pids_limit=s.pids,
                read_only=True,
                cap_drop=["ALL"],
                security_opt=["no-new-privileges"],
                tmpfs={
                    WORKSPACE: f"size={s.workspace_mb}m,{tmpfs_opts}",
                    "/tmp": f"size=256m,{tmpfs_opts}",  # noqa: S108 (the container's own)
                    SANDBOX_HOME: f"size=256m,{tmpfs_opts}",
                },
                labels={
                    LABEL: "1",
                    f"{LABEL}.owner": f"{socket.gethostname()}:{os.getpid()}",
                    f"{LABEL}.created": str(int(time.time())),
                },
                environment=sandbox_env(),
                working_dir=WORKSPACE,
                hostname="sandbox",
                stdin_open=False,
                tty=False,
            )
            self.container.start()
            # Engines create tmpfs mounts root-owned (Podman 4 rejects uid=); a tar's "."
            # entry, extracted by the engine, hands each mount to the sandbox user.
            with tar_tree(source) as checkout:
                copied = self.container.put_archive(WORKSPACE, checkout)
            owned = all(
                self.container.put_archive(path, data)
                for path, data in (
                    (SANDBOX_HOME, tar_owned_dir(files={".bash_profile": _LOGIN_PROFILE})),
                    (ENV_ROOT, tar_owned_dir(0o755)),
                )
            )
            if not (copied and owned):
                raise SandboxError("could not copy the checkout into the container")
        except docker.errors.ImageNotFound as exc:
            self.close()
            raise SandboxError(
                f"sandbox image {s.image} is missing: build it with deploy/sandbox/build-image.sh"
            ) from exc
        except docker.errors.DockerException as exc:
            self.close()
            raise SandboxError(f"could not start the sandbox container: {exc}") from exc
        except BaseException:
            self.close()
            raise

    @property
    def container_id(self) -> str | None:
        return self.container.id if self.container is not None else None

    def _live(self) -> Container:
        if self._closed or self.container is None:
            raise SandboxError("sandbox is closed")
        return self.container

    def exec(
        self,
        command: str | Sequence[str],
        *,
        timeout: float,
        cwd: str = WORKSPACE,
        env: Mapping[str, str] | None = None,
        output_cap: int = DEFAULT_OUTPUT_CAP,
    ) -> ExecResult:
        request = exec_request(command, timeout=timeout, cwd=cwd, env=env, output_cap=output_cap)
        session = self._session_client()
        if session is None:
            return self._exec_once(
                command, timeout=timeout, cwd=cwd, env=env, output_cap=output_cap
            )
        start = time.monotonic()
        try:
            answer = session.call(request, timeout + KILL_GRACE_S + _HOST_GRACE_S)
        except SandboxError:
            if self._closed:
                raise
            # The runner died while the command ran: what kills it from inside (a
            # ``kill -9 -1`` in the command, the OOM killer) killed the command too, as
            # it killed an exec's own shell before. The next exec starts a new runner.
            answer = {"rc": _KILLED_EXIT, "out": "", "err": "", "out_total": 0, "err_total": 0}
        elapsed = time.monotonic() - start
        if answer is None:
            # timeout inside did not end it (the runner stopped answering): the container
            # is the only thing left to kill.
            self.close()
            return ExecResult(TIMEOUT_EXIT_CODE, "", "", elapsed, timed_out=True)
        result = parse_result(answer, elapsed, timeout, output_cap)
        if not result.timed_out and result.exit_code == _KILLED_EXIT and self._oom_events():
            result = replace(result, oom_killed=True)
        return result

    def _session_client(self) -> SessionClient | None:
        """The running runner, (re)started when there is none; None when this image
        cannot run it."""
        with self._session_lock:
            self._live()
            if self._session is not None and not self._session.ended.is_set():
                return self._session
            if self._session_unavailable:
                return None
            self._close_session_socket()
            self._session = self._start_session()
            self._session_unavailable = self._session is None
            return self._session

    def _start_session(self) -> SessionClient | None:
        container = self._live()
        api = self._client.api
        try:
            exec_id = api.exec_create(
                container.id,
                ["sh", "-c", _START_SERVER, *bootstrap_args()],
                stdout=True,
                stderr=True,
                stdin=True,
                tty=False,
                user=f"{SANDBOX_UID}:{SANDBOX_GID}",
                environment=sandbox_env(),
                workdir=WORKSPACE,
            )["Id"]
            attached = api.exec_start(exec_id, socket=True)
        except docker.errors.DockerException as exc:
            raise SandboxError(f"exec failed: {exc}") from exc
        raw: socket.socket = getattr(attached, "_sock", attached)
        # The client's timeout would end an idle runner's stream: commands wait on it.
        raw.settimeout(None)
        self._session_socket = raw
        session = SessionClient(raw.sendall, _StdoutFrames(raw).read, bootstrap=True)
        probe = exec_request(["true"], timeout=30, cwd=WORKSPACE, env=None, output_cap=1024)
        try:
            answered = session.call(probe, 30 + KILL_GRACE_S + _HOST_GRACE_S)
        except SandboxError:
            answered = None
        if answered is None or answered.get("rc") != 0:
            self._close_session_socket()
            return None
        return session

    def _close_session_socket(self) -> None:
        if self._session_socket is not None:
            with contextlib.suppress(OSError):
                self._session_socket.close()
            self._session_socket = None

    def _exec_once(
        self,
        command: str | Sequence[str],
        *,
        timeout: float,
        cwd: str = WORKSPACE,
        env: Mapping[str, str] | None = None,
        output_cap: int = DEFAULT_OUTPUT_CAP,
    ) -> ExecResult:
        """One engine exec for this command alone (images the runner cannot start in)."""
        container = self._live()
        argv = ["sh", "-c", _EXEC_WRAPPER, *timeout_argv(command_argv(command), timeout)]
        api = self._client.api
        start = time.monotonic()
        try:
            exec_id = api.exec_create(
                container.id,
                argv,
                stdout=True,
                stderr=True,
                stdin=False,
                tty=False,
                user=f"{SANDBOX_UID}:{SANDBOX_GID}",
                environment=sandbox_env(env),
                workdir=workspace_cwd(cwd),
            )["Id"]
            chunks = api.exec_start(exec_id, stream=True, demux=True)
        except docker.errors.DockerException as exc:
            raise SandboxError(f"exec failed: {exc}") from exc
        out, err = CappedStream(output_cap), CappedStream(output_cap)
        reader = threading.Thread(target=_drain, args=(chunks, out, err), daemon=True)
        reader.start()
        reader.join(timeout + KILL_GRACE_S + _HOST_GRACE_S)
        if reader.is_alive():
            # timeout inside did not end it (engine wedged, or the container stopped
            # answering): the container is the only thing left to kill.
            self.close()
            return ExecResult(
                exit_code=TIMEOUT_EXIT_CODE,
                stdout=out.text(),
                stderr=err.text(),
                duration_s=time.monotonic() - start,
                timed_out=True,
                truncated=out.truncated or err.truncated,
            )
        elapsed = time.monotonic() - start
        exit_code = _exit_code(api, exec_id)
        timed_out = timed_out_exit(exit_code, elapsed, timeout)
        oom = not timed_out and exit_code == 128 + 9 and self._oom_events()
        return ExecResult(
            exit_code=TIMEOUT_EXIT_CODE if timed_out else exit_code,
            stdout=out.text(),
            stderr=err.text(),
            duration_s=elapsed,
            timed_out=timed_out,
            truncated=out.truncated or err.truncated,
            oom_killed=oom,
        )

    def _oom_events(self) -> bool:
        """Whether the kernel's OOM killer fired in the container since the last check.
        Engines flag OOMKilled only for pid 1, and a sandbox's hog is never pid 1, so
        this reads the cgroup's own counter (v2 memory.events, v1 memory.oom_control)."""
        probe = self.exec(["sh", "-c", _OOM_PROBE], timeout=30)
        try:
            count = int(probe.stdout.split()[-1])
        except (IndexError, ValueError):
            return False
        fired = count > self._oom_seen
        self._oom_seen = count
        return fired

    # -- files -------------------------------------------------------------------------
    def read_file(self, path: str) -> bytes:
        rel = workspace_relative(path)
        # Symlinks are resolved inside the container, where nothing of the host exists.
        found = self.exec(["realpath", "-e", "--", f"{WORKSPACE}/{rel}"], timeout=60)
        if found.exit_code != 0:
            raise FileNotFoundError(f"{path}: {found.stderr.strip()}")
        real = found.stdout.strip()
        if not real.startswith(WORKSPACE + "/"):
            raise PermissionError(f"{path}: outside the workspace")
        return self._read_bytes(real)

    def _read_bytes(self, real: str) -> bytes:
        try:
            stream, _ = self._live().get_archive(real)
        except docker.errors.NotFound as exc:
            raise FileNotFoundError(real) from exc
        except docker.errors.DockerException as exc:
            raise SandboxError(f"{real}: {exc}") from exc
        # Streamed with a cap: a sparse file can claim far more than its tmpfs holds.
        return read_tar_file(stream)

    def write_file(self, path: str, data: bytes) -> None:
        """Written by the sandbox user with a shell redirect, not by the engine's copier:
        the copier runs as root and follows links, the sandbox user can only write what
        it could write anyway. The bytes travel base64-encoded in argv chunks."""
        rel = workspace_relative(path)
        target = f"{WORKSPACE}/{rel}"
        parent = f"{WORKSPACE}/{rel.parent}" if str(rel.parent) != "." else WORKSPACE
        made = self.exec(["mkdir", "-p", "--", parent], timeout=60)
        if made.exit_code != 0:
            raise SandboxError(f"{path}: cannot create its folder: {made.stderr.strip()}")
        encoded = base64.b64encode(data).decode()
        pieces = [encoded[i : i + _ARG_CHUNK] for i in range(0, len(encoded), _ARG_CHUNK)] or [""]
        for n, piece in enumerate(pieces):
            redirect = ">" if n == 0 else ">>"
            script = _WRITE_SCRIPT.replace("REDIRECT", redirect)
            done = self.exec(["sh", "-c", script, "sh", piece, target, parent], timeout=60)
            if done.exit_code == _OUTSIDE_EXIT:
                raise PermissionError(f"{path}: outside the workspace (through a link)")
            if done.exit_code != 0:
                raise SandboxError(f"{path}: could not write: {done.stderr.strip()[:500]}")

    def _export_into(self, limits: ExportLimits) -> Callable[[Path], None]:
        def export(dest: Path) -> None:
            try:
                stream, _ = self._live().get_archive(WORKSPACE)
            except docker.errors.DockerException as exc:
                raise SandboxError(f"could not read the workspace: {exc}") from exc
            extract_tar_stream(stream, dest, limits)

        return export

    def _stop_processes(self) -> None:
        """Every process of the sandbox user is stopped before the host reads the
        workspace (pid 1 is out of reach of signals from inside and only waits), so
        nothing changes files while read. The runner does it and stays; should it not
        answer, an engine exec's ``kill -9 -1`` does, runner included."""
        session = self._session_client()
        if session is not None:
            with contextlib.suppress(SandboxError):
                if session.call(STOP_ALL_REQUEST, 30) is not None:
                    return
        self._exec_once(["kill", "-9", "-1"], timeout=30)

    # -- snapshots (worker/sandbox/snapshot.py) ----------------------------------------
    def export_setup_state(self, env_dest: Path, workspace_dest: Path) -> None:
        self._stop_processes()
        try:
            stream, _ = self._live().get_archive(ENV_ROOT)
        except docker.errors.DockerException as exc:
            raise SandboxError(f"could not read the set-up environment: {exc}") from exc
        extract_tar_stream(stream, env_dest, SNAPSHOT_LIMITS, skip_top=ENV_SKIP)
        self._export_into(SNAPSHOT_LIMITS)(workspace_dest)

    def restore_setup_state(self, snapshot: EnvSnapshot) -> None:
        """Copied in by the engine (as root, following links), so only before anything
        ran in the container, and only paths the host tree lacks below real folders."""
        container = self._live()
        with tar_paths(snapshot.env, sorted(p.name for p in snapshot.env.iterdir())) as env:
            ok = container.put_archive(ENV_ROOT, env)
        extras = list(overlay_paths(snapshot.workspace, self._source))
        if ok and extras:
            with tar_paths(snapshot.workspace, extras) as tree:
                ok = container.put_archive(WORKSPACE, tree)
        if not ok:
            raise SandboxError("could not copy the set-up environment into the container")

    # -- teardown ----------------------------------------------------------------------
    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._session is not None:
            self._session.wake_all()
        if self.container is not None:
            try:
                self.container.remove(force=True, v=True)
            except docker.errors.NotFound:
                pass
            except docker.errors.DockerException as exc:
                raise SandboxError(
                    f"could not remove container {self.container.id}: {exc}"
                ) from exc
            finally:
                self._close_session_socket()
                self._remove_egress_dir()
        else:
            self._remove_egress_dir()

    def _remove_egress_dir(self) -> None:
        if self.egress_dir is not None:
            shutil.rmtree(self.egress_dir, ignore_errors=True)


def reap_stale(
    settings: SandboxSettings,
    *,
    max_age_s: float = 6 * 3600,
    client: docker.DockerClient | None = None,
) -> list[str]:
    """Remove sandbox containers left by a crashed worker: those whose owner process on
    this host is gone, and any older than ``max_age_s``. Returns the removed ids."""
    client = client or docker_client(settings)
    host = socket.gethostname()
    removed = []
    for container in client.containers.list(all=True, filters={"label": LABEL}):
        labels = container.labels or {}
        owner_host, _, owner_pid = labels.get(f"{LABEL}.owner", "").partition(":")
        created = int(labels.get(f"{LABEL}.created", "0") or 0)
        orphan = owner_host == host and owner_pid.isdigit() and not pid_alive(int(owner_pid))
        too_old = time.time() - created > max_age_s
        if orphan or too_old:
            try:
                container.remove(force=True, v=True)
                removed.append(container.id)
            except docker.errors.NotFound:
                pass
    return removed


def _drain(
    chunks: Iterator[tuple[bytes | None, bytes | None]], out: CappedStream, err: CappedStream
) -> None:
    try:
        for stdout, stderr in chunks:
            if stdout:
                out.feed(stdout)
            if stderr:
                err.feed(stderr)
    except (docker.errors.DockerException, OSError):
        pass


class _StdoutFrames:
    """The runner's stdout from an attached exec stream without a tty: frames of an
    8-byte header (stream, size) and their payload; stderr frames are dropped."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        self._stream = 0
        self._left = 0

    def _exactly(self, size: int) -> bytes:
        data = b""
        while len(data) < size:
            chunk = self._sock.recv(size - len(data))
            if not chunk:
                return b""
            data += chunk
        return data

    def read(self) -> bytes:
        """The next bytes of stdout; b"" when the stream ends."""
        while True:
            if self._left == 0:
                header = self._exactly(8)
                if not header:
                    return b""
                if header[0] not in (0, 1, 2) or header[1:4] != b"\0\0\0":
                    # Not a frame: the stream is out of step, and nothing on it can be
                    # matched to a request any more. Ending it fails the waiting calls.
                    return b""
                self._stream, self._left = struct.unpack(">BxxxL", header)
                continue
            chunk = self._sock.recv(min(self._left, 1 << 16))
            if not chunk:
                return b""
            self._left -= len(chunk)
            if self._stream == 1:
                return chunk


class _NotRecorded(Exception):
    """The engine has no exit code for the command yet."""


def _exit_code(api: Any, exec_id: str, *, sleep: Callable[[float], None] = time.sleep) -> int:
    # The stream can end a moment before the engine records the exit code.
    def inspect() -> int:
        code = api.exec_inspect(exec_id).get("ExitCode")
        if code is None:
            raise _NotRecorded
        return int(code)

    try:
        return retry(
            inspect,
            retry_on=(_NotRecorded,),
            stop=stop_after_attempts(50),
            wait=wait_fixed(0.02),
            sleep=sleep,
        )
    except _NotRecorded:
        raise SandboxError("the engine did not report the command's exit code") from None
