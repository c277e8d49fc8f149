"""Pieces both backends share: the allow-listed environment, the in-sandbox command
wrapper, capped output capture, the host-side diff and :class:`HostDiffedSandbox`, the
methods around it both backends run the same way."""

from __future__ import annotations

import abc
import os
import re
import shutil
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from bot.hostgit import GitError, head_commit, host_diff
from worker.sandbox.base import TIMEOUT_EXIT_CODE, WORKSPACE, ClosedOnExit, SandboxError
from worker.sandbox.export import ExportLimits
from worker.settings import SandboxSettings

SANDBOX_UID = 1000
SANDBOX_GID = 1000
SANDBOX_HOME = "/home/sandbox"
# Label every container and temp dir carries so leftovers of a crashed worker can be reaped.
LABEL = "org.ribbit.sandbox"
# Seconds between the polite signal and SIGKILL when a command runs past its timeout.
KILL_GRACE_S = 2
# A patch cut at a cap would be corrupt, so diffs get a far larger cap and fail beyond it.
DIFF_CAP = 32 * 1024 * 1024
# The set-up environment: what the setup step installs (a virtualenv, package caches)
# lives here, outside the workspace so none of it lands in the diff, on storage that
# lasts for the sandbox's life (a host folder or an engine volume, not a tmpfs).
ENV_ROOT = "/opt/ribbit"
VENV = f"{ENV_ROOT}/venv"
_SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
_SAFE_PATH = f"{VENV}/bin:{_SYSTEM_PATH}"
# A login shell (the agent's Bash) reads /etc/profile, which on Debian resets PATH; the
# sandboxes get this one instead so the set-up environment stays first on PATH.
PROFILE = f"""\
# Ribbit sandbox profile: the set-up environment ({VENV}) comes first on PATH.
PATH="{_SAFE_PATH}"
export PATH
if [ -d /etc/profile.d ]; then
  for i in /etc/profile.d/*.sh; do
    if [ -r "$i" ]; then . "$i"; fi
  done
  unset i
fi
"""
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def sandbox_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The whole environment a sandboxed command sees: a fixed allow-list plus ``extra``.
    Nothing is taken from the host's environment."""
    env = {
        "PATH": _SAFE_PATH,
        "VIRTUAL_ENV": VENV,
        "PIP_CACHE_DIR": f"{ENV_ROOT}/cache/pip",
        "npm_config_cache": f"{ENV_ROOT}/cache/npm",
        # Go's and cargo's caches and build output in the set-up environment (on disk,
        # kept by its snapshot), not in the size-limited $HOME or the workspace, where
        # a target/ folder would land in the diff. GOTOOLCHAIN=local: a go.mod's
        # toolchain line never makes go fetch another toolchain.
        "GOPATH": f"{ENV_ROOT}/go",
        "GOCACHE": f"{ENV_ROOT}/cache/go-build",
        "GOTOOLCHAIN": "local",
        "GOTELEMETRY": "off",
        "CARGO_HOME": f"{ENV_ROOT}/cargo",
        "CARGO_TARGET_DIR": f"{ENV_ROOT}/cache/cargo-target",
        "HOME": SANDBOX_HOME,
        "USER": "sandbox",
        "LOGNAME": "sandbox",
        "SHELL": "/bin/bash",
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "TERM": "dumb",
        "TMPDIR": "/tmp",  # noqa: S108 (the sandbox's own tmpfs)
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONUNBUFFERED": "1",
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        "PIP_NO_INPUT": "1",
        "GIT_TERMINAL_PROMPT": "0",
        # The workspace is owned by another uid than the sandbox user on some hosts;
        # git refuses such repositories unless told they are safe.
        "GIT_CONFIG_COUNT": "1",
        "GIT_CONFIG_KEY_0": "safe.directory",
        "GIT_CONFIG_VALUE_0": "*",
    }
    for key, value in (extra or {}).items():
        if not _ENV_NAME.fullmatch(key) or "\0" in value:
            raise ValueError(f"invalid environment variable for the sandbox: {key!r}")
        env[key] = value
    return env


def command_argv(command: str | Sequence[str]) -> list[str]:
    if isinstance(command, str):
        return ["bash", "-lc", command]
    argv = list(command)
    if not argv:
        raise ValueError("empty command")
    return argv


def timeout_argv(argv: Sequence[str], timeout: float) -> list[str]:
    """``timeout`` puts the command in its own process group and signals the whole group,
    then SIGKILLs it after the grace period."""
    if timeout <= 0:
        raise ValueError("timeout must be positive")
    return ["timeout", "-k", str(KILL_GRACE_S), f"{timeout:.3f}", *argv]


def workspace_relative(path: str) -> PurePosixPath:
    """``path`` (relative, or absolute under /workspace) as a relative path that cannot
    climb out of the workspace lexically. Symlinks are the caller's concern."""
    p = PurePosixPath(path)
    if p.is_absolute():
        try:
            p = p.relative_to(WORKSPACE)
        except ValueError:
            raise PermissionError(f"{path}: outside {WORKSPACE}") from None
    if ".." in p.parts or str(p) in {"", "."}:
        raise PermissionError(f"{path}: not a file under {WORKSPACE}")
    return p


def workspace_cwd(cwd: str) -> str:
    if cwd == WORKSPACE:
        return cwd
    return f"{WORKSPACE}/{workspace_relative(cwd)}"


def base_commit(source: Path) -> str | None:
    """The commit the host checkout is at (None when it is not a git checkout)."""
    return head_commit(source)


@dataclass
class CappedStream:
    """Keeps the first ``cap`` bytes of a stream and counts the rest."""

    cap: int
    data: bytearray = field(default_factory=bytearray)
    total: int = 0

    def feed(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = self.cap - len(self.data)
        if room > 0:
            self.data += chunk[:room]

    @property
    def truncated(self) -> bool:
        return self.total > self.cap

    def text(self) -> str:
        return self.data.decode(errors="replace")


def _remove_exported(tree: Path, rel: str) -> None:
    """Remove ``rel`` from the export ``tree``, never through a link the sandbox made."""
    parts = PurePosixPath(rel).parts
    if not parts or any(p in {"", ".", ".."} for p in parts) or rel.startswith("/"):
        return
    here = tree
    for part in parts[:-1]:
        here = here / part
        if here.is_symlink() or not here.is_dir():
            return
    target = here / parts[-1]
    if target.is_dir() and not target.is_symlink():
        shutil.rmtree(target)
    elif os.path.lexists(target):
        target.unlink()


def timed_out_exit(exit_code: int, elapsed: float, timeout: float) -> bool:
    """``timeout`` exits 124 (137 when it had to SIGKILL); a command that exits 124 by
    itself before its time is not a timeout."""
    return exit_code in {TIMEOUT_EXIT_CODE, 128 + 9, -9} and elapsed >= timeout * 0.98


def host_workspace_diff(
    source: Path,
    base: str | None,
    export: Callable[[Path], None],
    *,
    leave_out: Sequence[str] = (),
) -> str:
    """The workspace's diff against ``base``, computed on the host: ``export`` copies the
    workspace (with the sandbox's processes stopped) into a host folder under the rules
    of worker.sandbox.export, and host git compares it with ``base`` from ``source``.
    Nothing in the sandbox (a ``git`` function in a profile, a doctored index) decides
    what the patch is. ``leave_out`` names workspace paths the base lacks that the
    setup step created (``*.egg-info``, ``node_modules``): build output, never part of
    a patch."""
    if base is None:
        raise SandboxError("the workspace was not created from a git checkout")
    with tempfile.TemporaryDirectory(prefix="ribbit-export-") as tmp:
        tree = Path(tmp) / "tree"
        export(tree)
        for rel in leave_out:
            _remove_exported(tree, rel)
        try:
            return host_diff(source, base, tree, max_bytes=DIFF_CAP)
        except GitError as exc:
            raise SandboxError(f"could not compute the diff: {exc}") from None


class HostDiffedSandbox(ClosedOnExit, abc.ABC):
    """What both backends do alike around :func:`host_workspace_diff`; a backend says only
    how its processes stop and how its workspace is exported (abstract: a backend missing
    either fails when it is made, not at its first diff)."""

    _settings: SandboxSettings
    _source: Path
    _base: str | None
    # What the setup step added to the workspace (see leave_out_of_diff).
    _setup_paths: tuple[str, ...] = ()

    def diff(self) -> str:
        self._stop_processes()
        limits = ExportLimits(max_bytes=self._settings.workspace_mb * 1024 * 1024)
        return host_workspace_diff(
            self._source, self._base, self._export_into(limits), leave_out=self._setup_paths
        )

    def leave_out_of_diff(self, paths: Sequence[str]) -> None:
        self._setup_paths = tuple(paths)

    def stop_processes(self) -> None:
        """Kill every process left in the sandbox (a setup step's daemons, an earlier
        run's children): a test run starts as the only process tree here."""
        self._stop_processes()

    @abc.abstractmethod
    def _stop_processes(self) -> None:
        """Nothing of the sandbox may run while the host reads its workspace."""

    @abc.abstractmethod
    def _export_into(self, limits: ExportLimits) -> Callable[[Path], None]:
        """Copies the workspace into a host folder under ``limits``."""
