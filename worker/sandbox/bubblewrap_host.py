"""What a BubblewrapSandbox asks of the machine it runs on, as one injected record.

Everything here touches the host beyond the sandbox's own temp folder: finding ``bwrap``,
reading the source's commit, a memory cgroup, a throwaway uid and a workspace tmpfs (root
only), counting a user's processes, and starting the resident process. The sandbox takes
a :class:`BubblewrapHost` (this machine's by default), so a test hands it one that starts
nothing instead of patching the sandbox's insides.
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from worker.sandbox.cgroup import MemoryCgroup, create_memory_cgroup
from worker.sandbox.common import base_commit

# Throwaway host uids for sandboxes of a root worker; far above any real account.
_HOST_UID_BASE = 3_000_000
_HOST_UID_SPAN = 1_000_000


def bwrap_path() -> str | None:
    return shutil.which("bwrap")


def pick_host_uid() -> int | None:
    """A throwaway host uid for a root worker's sandbox; None when not root (the worker
    cannot switch users)."""
    if os.geteuid() != 0:
        return None
    return _HOST_UID_BASE + secrets.randbelow(_HOST_UID_SPAN)


def mount_workspace_tmpfs(workspace: Path, size_mb: int, host_uid: int | None) -> bool:
    """Put ``workspace`` on its own size-limited tmpfs (root only); whether it worked."""
    if os.geteuid() != 0:
        return False
    uid = host_uid if host_uid is not None else 0
    opts = f"size={size_mb}m,mode=0700,uid={uid},gid={uid}"
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", opts, "ribbit-workspace", str(workspace)],
        capture_output=True,
        check=False,
    )
    return done.returncode == 0


def processes_of(uid: int) -> int:
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


@dataclass(frozen=True)
class BubblewrapHost:
    """The host operations a BubblewrapSandbox uses; the defaults are this machine's."""

    temp_dir: Path | None = None
    """Where sandbox folders are made (None: the system's temp dir, where reap_stale looks)."""
    bwrap_path: Callable[[], str | None] = bwrap_path
    """The bwrap binary, None when it is not installed."""
    base_commit: Callable[[Path], str | None] = base_commit
    """The commit the source checkout is at (what the diff is taken against; None: not a
    git checkout)."""
    memory_cgroup: Callable[[int, int | None], MemoryCgroup | None] = create_memory_cgroup
    """A memory cgroup of memory_mb for the host uid, None where none can be made."""
    throwaway_uid: Callable[[], int | None] = pick_host_uid
    """The host uid the sandbox runs as, None: the worker's own."""
    mount_workspace: Callable[[Path, int, int | None], bool] = mount_workspace_tmpfs
    """A size-limited tmpfs on the workspace (size in MB, owner uid); whether mounted."""
    processes_of: Callable[[int], int] = processes_of
    """How many processes a uid runs (they count against RLIMIT_NPROC)."""
    spawn: Callable[..., Any] | None = subprocess.Popen
    """Starts the resident process (subprocess.Popen's signature); None starts none, for
    a sandbox whose command line and host folders are all that is looked at."""
