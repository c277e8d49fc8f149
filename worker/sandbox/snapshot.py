"""Snapshots of a set-up environment: taken once per job, right after the setup step,
and restored into every later sandbox of the job (each test run of the gates) and,
through the cache (worker/sandbox/envcache.py), into the next job's on the repository.

A snapshot is a host folder:

- ``env/``: the set-up environment (``ENV_ROOT``: the virtualenv, GOPATH, CARGO_HOME),
  without its download and build caches (``cache/``), which only an install needs;
- ``workspace/``: what the setup step wrote into the workspace beyond the checkout
  (``node_modules``, ``*.egg-info``, generated files): only paths the checkout lacks.

It is taken from a sandbox whose processes are stopped, under the export rules of
worker.sandbox.export (regular files, folders and links only, bounded): whatever setup
ran is untrusted. It is restored before anything runs in the new sandbox, and a path
the new sandbox's own tree has is never overwritten: the tree (the base, or the base
with the judged diff applied by the host) is what gets tested. Nothing the agent changed
outside the repository (a pytest plugin planted in site-packages, a patched tool)
reaches a verdict, since the snapshot was taken before the agent started.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, runtime_checkable

from worker.sandbox.base import WORKSPACE, ExecResult, Sandbox, SandboxError
from worker.sandbox.common import ENV_ROOT, PROFILE, SANDBOX_HOME
from worker.sandbox.export import ExportLimits
from worker.sandbox.secretscan import SecretInSnapshot, SecretScanner

# Sizes a set-up environment may reach (a virtualenv with a deep-learning stack is
# several GB; node_modules trees hold hundreds of thousands of files).
SNAPSHOT_LIMITS = ExportLimits(max_bytes=16 * 1024**3, max_entries=1_000_000, max_depth=128)
# Left out of a snapshot: package managers' download caches and build output, rebuilt
# offline from what the snapshot keeps.
ENV_SKIP = frozenset({"cache"})


@dataclass(frozen=True)
class EnvSnapshot:
    """A snapshot's host folder (see the module's docstring for its layout)."""

    root: Path

    @property
    def env(self) -> Path:
        return self.root / "env"

    @property
    def workspace(self) -> Path:
        return self.root / "workspace"


@runtime_checkable
class Snapshottable(Protocol):
    """What a sandbox backend does for snapshots (both real backends do; test fakes need
    not, and then every sandbox runs the setup step itself)."""

    def export_setup_state(self, env_dest: Path, workspace_dest: Path) -> None:
        """Stop every process of the sandbox, then copy its set-up environment (less
        ``ENV_SKIP``) and its whole workspace into the two host folders."""
        ...

    def restore_setup_state(self, snapshot: EnvSnapshot) -> None:
        """Put ``snapshot`` into this fresh sandbox: the environment, and the snapshot's
        workspace paths the sandbox's own tree lacks."""
        ...

    def exec(self, command: str | Sequence[str], *, timeout: float) -> ExecResult:
        """As :meth:`worker.sandbox.base.Sandbox.exec` (the snapshot's clean-up)."""
        ...

    def leave_out_of_diff(self, paths: Sequence[str]) -> None:
        """Keep these workspace paths (relative; what the setup step added) out of
        :meth:`~worker.sandbox.base.Sandbox.diff`: build output is no part of a patch."""
        ...


def take_snapshot(
    sandbox: Snapshottable,
    checkout: Path,
    dest: Path,
    *,
    secrets: Mapping[str, bytes] | None = None,
) -> EnvSnapshot:
    """Snapshot ``sandbox`` (opened over ``checkout``) into ``dest``, a new folder.
    ``secrets``: the credential files the setup step was shown; a snapshot holding any
    of their values raises :class:`SecretInSnapshot` and is deleted, and so is everything else the
    set-up left outside it (see :func:`clear_scratch`)."""
    snapshot = EnvSnapshot(dest)
    dest.mkdir(parents=True)
    sandbox.export_setup_state(snapshot.env, snapshot.workspace)
    prune_checkout_paths(snapshot.workspace, checkout)
    if not secrets:
        return snapshot
    scanner = SecretScanner.from_credentials(secrets)
    try:
        # Before the workspace is pruned would do too, but the checkout's own files are
        # the repository's business, not a copy the setup made.
        scanner.check_tree(snapshot.env, ENV_ROOT)
        scanner.check_tree(snapshot.workspace, WORKSPACE)
    except SecretInSnapshot:
        shutil.rmtree(dest, ignore_errors=True)
        raise
    clear_scratch(sandbox)
    return snapshot


# What a set-up sandbox keeps outside its snapshot: the agent, which works on in the
# same sandbox, would see a credential copied there. Run with every process of the
# sandbox stopped (the export did it), with tools by absolute PATH (the setup could have
# put a `find` first on the sandbox's). A login profile the backend gave $HOME is
# written anew, since setup may have appended to it.
_SCRATCH = (SANDBOX_HOME, "/tmp", f"{ENV_ROOT}/cache")  # noqa: S108 (the sandbox's own)
_CLEAR_SCRATCH = f"""PATH=/usr/bin:/bin; export PATH
profile=no
[ -e {SANDBOX_HOME}/.bash_profile ] && profile=yes
for d in {" ".join(_SCRATCH)}; do
  [ -d "$d" ] || continue
  chmod -R u+rwX "$d" 2>/dev/null
  find "$d" -mindepth 1 -delete 2>/dev/null
done
if [ "$profile" = yes ]; then
  cat > {SANDBOX_HOME}/.bash_profile <<'RIBBIT_PROFILE'
{PROFILE}RIBBIT_PROFILE
fi
find {" ".join(_SCRATCH)} -mindepth 1 ! -path {SANDBOX_HOME}/.bash_profile -print 2>/dev/null \
  | head -n 1
"""


def clear_scratch(sandbox: Snapshottable) -> None:
    """Empty $HOME, /tmp and the download caches of ``sandbox`` after a setup that was
    shown credentials; raises :class:`SecretInSnapshot` when something stays."""
    done = sandbox.exec(["/bin/sh", "-c", _CLEAR_SCRATCH], timeout=120)
    # What stayed is not named: a file's name may be the value.
    if done.exit_code != 0 or done.timed_out or done.stdout.strip():
        raise SecretInSnapshot(
            "could not empty $HOME, /tmp and the download caches after a setup that was "
            "shown credentials"
        )


def prune_checkout_paths(extras: Path, checkout: Path) -> None:
    """Leave in ``extras`` (an export of a workspace) only the paths ``checkout`` lacks:
    what setup added. Anything at or under a path the checkout has as a file or a link
    goes too, so a restore never writes through a link of the tree."""
    stack = [(extras, checkout)]
    emptied: list[Path] = []
    while stack:
        here, twin_dir = stack.pop()
        for entry in os.scandir(here):
            twin = twin_dir / entry.name
            if not os.path.lexists(twin):
                continue  # new with setup: kept whole
            if entry.is_dir(follow_symlinks=False) and _real_dir(twin):
                stack.append((Path(entry.path), twin))
                emptied.append(Path(entry.path))
            elif entry.is_dir(follow_symlinks=False):
                shutil.rmtree(entry.path)
            else:
                os.unlink(entry.path)
    for folder in reversed(emptied):  # deepest last pushed, removed first
        if not any(folder.iterdir()):
            folder.rmdir()


def overlay_paths(extras: Path, tree: Path) -> Iterator[str]:
    """The top-most paths of ``extras`` (relative) that ``tree`` lacks, below folders the
    tree has as real folders: what a restore copies whole."""
    if not extras.is_dir():
        return
    stack = [(extras, tree, "")]
    while stack:
        here, twin_dir, prefix = stack.pop()
        for entry in sorted(os.scandir(here), key=lambda e: e.name):
            twin = twin_dir / entry.name
            rel = f"{prefix}{entry.name}"
            if not os.path.lexists(twin):
                yield rel
            elif entry.is_dir(follow_symlinks=False) and _real_dir(twin):
                stack.append((Path(entry.path), twin, f"{rel}/"))


def copy_tree(source: Path, dest: Path) -> None:
    """Copy ``source`` (a folder or file) to ``dest`` with links as links, sharing data
    blocks (reflink) where the file system can; hard links are never used, since the
    copy's owner may change it in place."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        ["cp", "-a", "--reflink=auto", "--no-target-directory", "--", str(source), str(dest)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise SandboxError(f"could not copy {source}: {done.stderr.strip()[-500:]}")


def restore_into_host_dirs(snapshot: EnvSnapshot, env_dir: Path, workspace: Path) -> None:
    """Restore ``snapshot`` into a sandbox whose environment and workspace are host
    folders (bubblewrap), before anything runs in it."""
    for entry in os.scandir(snapshot.env):
        copy_tree(Path(entry.path), env_dir / entry.name)
    for rel in overlay_paths(snapshot.workspace, workspace):
        copy_tree(snapshot.workspace / rel, workspace / rel)


def workspace_copies(env: Path) -> list[str]:
    """Where in the workspace a package was installed from as a copy (``pip install .``,
    not ``-e``), per pip's ``direct_url.json``: that copy is of the commit setup ran on,
    so a sandbox over another tree must install it again, and it is never cached."""
    found = []
    for record in sorted(env.glob("venv/lib/python*/site-packages/*.dist-info/direct_url.json")):
        try:
            path = _copied_from(json.loads(record.read_text()))
        except (OSError, ValueError):
            continue
        if path is not None:
            found.append(path)
    return found


def installed_copies(sandbox: Sandbox, *, timeout: float = 120) -> list[str]:
    """:func:`workspace_copies` read in a set-up sandbox itself, from pip's own report
    (``pip inspect``, pip 22.2 and later); none where pip cannot say."""
    done = sandbox.exec(
        ["python", "-m", "pip", "inspect", "--local"], timeout=timeout, output_cap=64 * 1024**2
    )
    if done.exit_code != 0 or done.timed_out or done.truncated:
        return []
    try:
        report = json.loads(done.stdout)
    except ValueError:
        return []
    installed = report.get("installed") if isinstance(report, dict) else None
    if not isinstance(installed, list):
        return []
    found = [_copied_from(d.get("direct_url")) for d in installed if isinstance(d, dict)]
    return sorted(p for p in found if p is not None)


def _copied_from(direct_url: object) -> str | None:
    """The workspace path a distribution was installed from as a copy, from its
    ``direct_url.json`` (PEP 610); None for an editable install or anything else."""
    if not isinstance(direct_url, dict):
        return None
    url, info = direct_url.get("url"), direct_url.get("dir_info")
    if not isinstance(url, str) or (isinstance(info, dict) and info.get("editable") is True):
        return None
    path = url.removeprefix("file://")
    return path if path == WORKSPACE or path.startswith(WORKSPACE + "/") else None


def _real_dir(path: Path) -> bool:
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False
