"""A memory cgroup for one bubblewrap sandbox: one limit for all of its processes
together, where RLIMIT_AS limits each process alone (three 700 MB processes ran under
a 1024 MB RLIMIT_AS).

Needs a root worker (creating a cgroup and handing its ``cgroup.procs`` to the
sandbox's throwaway uid). Works on cgroup v2 (``memory.max``) and on v1 or hybrid
hosts (the ``memory`` controller's ``memory.limit_in_bytes``, plus ``memsw`` so swap
does not extend it). The group is made under the worker's own memory cgroup, so a
worker that is itself limited keeps its sandboxes inside its limit. Each command
enters the group itself before it execs anything (see :func:`enter_argv`), so no
process of the sandbox ever runs outside it.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from dataclasses import dataclass
from pathlib import Path

CGROUP_ROOT = Path("/sys/fs/cgroup")
CGROUP_PREFIX = "ribbit-sandbox-"


@dataclass(frozen=True)
class MemoryCgroup:
    path: Path
    version: int  # 1 or 2 (0: unknown, for removal only)

    @property
    def procs(self) -> Path:
        return self.path / "cgroup.procs"

    def oom_kills(self) -> int:
        """How many processes the kernel's OOM killer ended in this group so far."""
        name = "memory.events" if self.version == 2 else "memory.oom_control"
        try:
            for line in (self.path / name).read_text().splitlines():
                key, _, value = line.partition(" ")
                if key == "oom_kill":
                    return int(value)
        except (OSError, ValueError):
            pass
        return 0

    def remove(self) -> None:
        """Remove the group (its processes must be gone; a leftover group is harmless)."""
        with contextlib.suppress(OSError):
            self.path.rmdir()


def _own_memory_cgroup(root: Path) -> tuple[Path, int] | None:
    """Where this process's memory cgroup lives, and the hierarchy's version."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, rel = line.split(":", 2)
        if "memory" in controllers.split(","):
            base = root / "memory"
            return base / rel.lstrip("/"), 1
    unified = root / "cgroup.controllers"
    if unified.exists() and "memory" in unified.read_text().split():
        rel = next((ln.split(":", 2)[2] for ln in lines if ln.startswith("0::")), "/")
        return root / rel.lstrip("/"), 2
    return None


def create_memory_cgroup(
    memory_mb: int, owner_uid: int | None, root: Path = CGROUP_ROOT
) -> MemoryCgroup | None:
    """A fresh group limited to ``memory_mb`` (swap included) whose ``cgroup.procs`` the
    sandbox's host uid may write; None where that is not possible (not root, no memory
    controller, no delegation), in which case the per-process rlimit stays the limit."""
    if os.geteuid() != 0:
        return None
    found = _own_memory_cgroup(root)
    if found is None:
        return None
    parent, version = found
    group = MemoryCgroup(parent / f"{CGROUP_PREFIX}{secrets.token_hex(8)}", version)
    limit = str(memory_mb * 1024 * 1024)
    try:
        group.path.mkdir()
    except OSError:
        return None
    try:
        if version == 2:
            (group.path / "memory.max").write_text(limit)
            with contextlib.suppress(OSError):
                (group.path / "memory.swap.max").write_text("0")
        else:
            (group.path / "memory.limit_in_bytes").write_text(limit)
            with contextlib.suppress(OSError):  # absent without swap accounting
                (group.path / "memory.memsw.limit_in_bytes").write_text(limit)
        if owner_uid is not None:
            os.chown(group.procs, owner_uid, owner_uid)
    except OSError:
        group.remove()
        return None
    return group


def enter_argv(group: MemoryCgroup) -> list[str]:
    """Prefix for a command line: the shell moves itself into the group, then execs the
    rest, so the command and everything it starts are in the group from their first
    instruction."""
    return ["sh", "-c", 'echo $$ > "$0" && exec "$@"', str(group.procs)]
