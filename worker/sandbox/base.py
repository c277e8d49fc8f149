"""The one interface every command the agent or a gate runs goes through.

A sandbox owns a private copy of a repository checkout (the workspace, seen
inside as ``/workspace``) and runs untrusted commands there with no network,
no host files and no secrets. Backends: DockerSandbox (Docker or Podman via
the docker SDK), BubblewrapSandbox (local fallback). Used as a context
manager so it is always destroyed explicitly, never by a finaliser.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Protocol, Self, runtime_checkable

WORKSPACE = "/workspace"
DEFAULT_OUTPUT_CAP = 64 * 1024
TIMEOUT_EXIT_CODE = 124


class SandboxError(Exception):
    """The sandbox itself failed (engine down, image missing), not the command in it."""


@dataclass(frozen=True)
class ExecResult:
    exit_code: int
    stdout: str
    stderr: str
    duration_s: float
    timed_out: bool = False
    truncated: bool = False  # stdout or stderr was cut at the output cap
    oom_killed: bool = False


@runtime_checkable
class Sandbox(Protocol):
    backend: str

    def exec(
        self,
        command: str | Sequence[str],
        *,
        timeout: float,
        cwd: str = WORKSPACE,
        env: Mapping[str, str] | None = None,
        output_cap: int = DEFAULT_OUTPUT_CAP,
    ) -> ExecResult:
        """Run ``command`` (a string runs under ``bash -lc``). On timeout the whole process
        tree is killed and the result has exit_code 124 and timed_out=True. ``env`` is
        added to the sandbox's allow-listed environment, never the host's."""
        ...

    def read_file(self, path: str) -> bytes:
        """Read a regular file (never a FIFO or device; bounded size); ``path`` is
        relative to the workspace (or absolute under it), links out of it refused."""
        ...

    def write_file(self, path: str, data: bytes) -> None:
        """Write a file under the workspace, creating parent folders."""
        ...

    def diff(self) -> str:
        """The workspace's diff against the commit it was created at, new files included
        (binary files as git's binary diff). Computed on the host by host git from a
        bounded export of the workspace, with the sandbox's processes stopped first:
        nothing that runs inside decides what the patch is."""
        ...

    def close(self) -> None:
        """Kill everything still running and remove the sandbox; safe to call twice."""
        ...

    def __enter__(self) -> Self: ...

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None: ...


class ClosedOnExit:
    """``with`` support for anything that has a ``close()``: the sandboxes, the setup
    proxy and the job's environment all end the same way, by an explicit close."""

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def pid_alive(pid: int) -> bool:
    """Whether a process with this pid exists (one of another user's counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


SandboxFactory = Callable[[Path], Sandbox]
"""Creates a sandbox whose workspace is a private copy of the checkout at the given host
path (the copy, not the original, is what commands change)."""
