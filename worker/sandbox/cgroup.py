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

:func:`memory_limit` reads the limit this process itself runs under (``ribbit doctor``
compares the model's weights with it).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bot.retrying import retry, stop_after_seconds, wait_fixed

CGROUP_ROOT = Path("/sys/fs/cgroup")
CGROUP_PREFIX = "ribbit-sandbox-"


@dataclass(frozen=True)
class MemoryCgroup:
    path: Path
    version: int  # 1 or 2 (0: unknown, for removal only)

    @property
    def procs(self) -> Path:
        return self.path / "cgroup.procs"

    @property
    def oom_file(self) -> Path:
        return self.path / ("memory.events" if self.version == 2 else "memory.oom_control")

    def oom_kills(self) -> int:
        """How many processes the kernel's OOM killer ended in this group so far."""
        try:
            return _oom_kill_count(self.oom_file.read_bytes())
        except OSError:
            return 0

    def remove(
        self,
        *,
        wait_s: float = 5.0,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """Kill whatever still runs in the group (a crashed worker's resident sandbox
        process, say), then remove it; a group that outlives ``wait_s`` is left (harmless,
        and ``reap_stale`` tries again)."""

        def kill_and_remove() -> None:
            for pid in self._pids():
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
            with contextlib.suppress(FileNotFoundError):
                self.path.rmdir()

        with contextlib.suppress(OSError):
            retry(
                kill_and_remove,
                retry_on=(OSError,),  # busy: the killed processes are still exiting
                stop=stop_after_seconds(wait_s),
                wait=wait_fixed(0.05),
                sleep=sleep,
                clock=clock,
            )

    def _pids(self) -> list[int]:
        try:
            return [int(line) for line in self.procs.read_text().split()]
        except (OSError, ValueError):
            return []


def _oom_kill_count(text: bytes) -> int:
    for line in text.splitlines():
        key, _, value = line.partition(b" ")
        if key == b"oom_kill":
            with contextlib.suppress(ValueError):
                return int(value)
    return 0


class OomCounter:
    """``oom_kills`` of one group, its file kept open: each look is one pread (about 1 us)
    where opening the file took about 25 us, and a sandbox looks twice per exec. Usable
    from any thread; after ``close`` it reads 0, never another file given the same fd."""

    def __init__(self, group: MemoryCgroup) -> None:
        self._lock = threading.Lock()
        self._fd: int | None
        try:
            self._fd = os.open(group.oom_file, os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            self._fd = None

    def count(self) -> int:
        with self._lock:
            if self._fd is None:
                return 0
            try:
                # cgroup files render afresh on each read from offset 0.
                return _oom_kill_count(os.pread(self._fd, 4096, 0))
            except OSError:  # the group is gone
                return 0

    def close(self) -> None:
        with self._lock:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None


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


def memory_limit(root: Path = CGROUP_ROOT) -> int | None:
    """The memory limit of this process's cgroup in bytes, None when it has none (or no
    cgroup is readable). In a container with a cgroup namespace, /proc/self/cgroup names
    a path of the host's hierarchy that the container's /sys/fs/cgroup does not have:
    there the hierarchy's root is the container's own group."""
    found = _own_memory_cgroup(root)
    if found is None:
        return None
    group, version = found
    name = "memory.max" if version == 2 else "memory.limit_in_bytes"
    base = root if version == 2 else root / "memory"
    for place in (group, base):
        try:
            text = (place / name).read_text().strip()
        except OSError:
            continue
        if text == "max":
            return None
        limit = int(text)
        # v1 says "unlimited" as the largest page-aligned 64-bit value.
        return limit if limit < 2**62 else None
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
