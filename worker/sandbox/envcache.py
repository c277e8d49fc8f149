"""Set-up environments: one per job, snapshotted, and cached per repository.

A job sets its environment up once, in the agent's sandbox, and a snapshot
(worker/sandbox/snapshot.py) is taken right after; every test run of the gates starts
from a fresh copy of that snapshot, with no network. The snapshot also goes into the
repository's cache, keyed by what decides the environment (:class:`EnvKey`): the next
job on the repository restores it instead of installing again.

The cache is a folder (``RIBBIT_SANDBOX__ENV_CACHE_DIR``, default DATA_DIR/envs):

    <sha of the repository>/<sha of the whole key>/entry.json   the marker, written last
                                                  /snapshot/     the snapshot's folder
    .tmp/                                          entries being written, and removed ones

An entry is built under ``.tmp`` and renamed into place whole, only after a setup that
worked; one whose marker is missing or does not match the key asked for is never used.
Entries unused for ``env_cache_max_age_days`` go, then the least recently used ones
until the cache is within ``env_cache_max_mb``. A repository's entries sit under its own
folder and its name is part of the key: no repository ever restores another's.
"""

from __future__ import annotations

import contextlib
import fnmatch
import hashlib
import json
import logging
import os
import secrets
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from worker.repo_config import RepoConfig
from worker.sandbox.base import ClosedOnExit, Sandbox, SandboxError
from worker.sandbox.egress_policy import repo_setup_hosts
from worker.sandbox.export import ExportError, read_regular_file
from worker.sandbox.reinstall import (
    SetupManner,
    build_requirements,
    fetch_build_backend,
    reinstall_copies,
)
from worker.sandbox.secretscan import SecretInSnapshot, credential_digest
from worker.sandbox.setup import (
    OUTPUT_TAIL,
    SETUP_VERSION,
    SetupResult,
    credentials_in_use,
    run_setup,
)
from worker.sandbox.snapshot import (
    EnvSnapshot,
    Snapshottable,
    copy_tree,
    overlay_paths,
    take_snapshot,
    workspace_copies,
)
from worker.settings import SandboxSettings

log = logging.getLogger(__name__)

MARKER = "entry.json"
_TMP = ".tmp"
# A folder under .tmp this old belongs to a worker that died while writing it.
_STALE_TMP_S = 6 * 3600
_MANIFEST_MAX_BYTES = 8 * 1024 * 1024
# Files that decide what a setup step installs, at the top of the checkout.
MANIFEST_NAMES = frozenset(
    {
        "pyproject.toml",
        "setup.py",
        "setup.cfg",
        "hatch.toml",  # with the next two: test environments (worker/sandbox/testenvs.py)
        "tox.ini",
        "noxfile.py",
        "Pipfile",
        "Pipfile.lock",
        "poetry.lock",
        "pdm.lock",
        "uv.lock",
        "environment.yml",
        "package.json",
        "package-lock.json",
        "npm-shrinkwrap.json",
        "yarn.lock",
        "pnpm-lock.yaml",
        ".npmrc",
        "go.mod",
        "go.sum",
        "Cargo.toml",
        "Cargo.lock",
        "rust-toolchain",
        "rust-toolchain.toml",
        "Gemfile",
        "Gemfile.lock",
    }
)
MANIFEST_GLOBS = ("*requirements*.txt", "requirements*.in", "constraints*.txt")
# Folders whose *.txt / *.in files are requirement files too (pip's -r includes).
MANIFEST_DIRS = ("requirements",)
# The toolchains a bubblewrap sandbox takes from the host's /usr.
_HOST_TOOLS = ("python3", "node", "npm", "go", "cargo", "rustc", "gcc", "git")


@dataclass(frozen=True)
class EnvKey:
    """What decides a set-up environment."""

    repo: str  # "github:owner/name": an entry is never shared across repositories
    backend: str
    base: str  # the sandbox image's id (docker), the host toolchains' (bubblewrap)
    setup_command: str | None
    manifests: str  # digest of the checkout's lock and manifest files
    index_url: str | None = None  # the deployment's package mirror
    # The extra hosts the setup step may reach (.ribbit.yml setup_hosts the deployment
    # permits): a host added or dropped can change what the setup installs.
    setup_hosts: tuple[str, ...] = ()
    setup_version: int = SETUP_VERSION
    # Which registry credentials the setup step was shown (a digest of the set, never
    # the values; None: none): a job without them never restores what was built with
    # them, nor one with other credentials.
    credentials: str | None = None

    def digest(self) -> str:
        return _sha(json.dumps(asdict(self), sort_keys=True))

    def repo_digest(self) -> str:
        return _sha(self.repo)[:32]


@dataclass(frozen=True)
class CacheEntry:
    key: EnvKey
    path: Path
    size_bytes: int
    last_used: float

    @property
    def snapshot(self) -> EnvSnapshot:
        return EnvSnapshot(self.path / "snapshot")


class EnvCache:
    """Cached set-up environments under ``root``. ``clock`` gives the time entries are
    used and aged by (tests pass a fake one)."""

    def __init__(
        self,
        root: Path,
        *,
        max_bytes: int,
        max_age_s: float,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.root = root
        self.max_bytes = max_bytes
        self.max_age_s = max_age_s
        self._clock = clock

    @classmethod
    def from_settings(
        cls, settings: SandboxSettings, data_dir: Path, *, clock: Callable[[], float] = time.time
    ) -> EnvCache | None:
        """The deployment's cache; None when it is turned off (``env_cache_max_mb=0``)."""
        if settings.env_cache_max_mb <= 0:
            return None
        return cls(
            settings.env_cache_dir or data_dir / "envs",
            max_bytes=settings.env_cache_max_mb * 1024 * 1024,
            max_age_s=settings.env_cache_max_age_days * 86400,
            clock=clock,
        )

    def _path(self, key: EnvKey) -> Path:
        return self.root / key.repo_digest() / key.digest()

    def get(self, key: EnvKey) -> CacheEntry | None:
        """The entry for exactly ``key``, marked as used now; None when there is none, it
        is too old, or it is not whole (then it is removed)."""
        path = self._path(key)
        if not path.is_dir():
            return None
        entry = self._read(path)
        if entry is None or entry.key != key:
            log.warning("removing a damaged environment cache entry: %s", path)
            self._remove(path)
            return None
        now = self._clock()
        if now - entry.last_used > self.max_age_s:
            self._remove(path)
            return None
        os.utime(path / MARKER, (now, now))
        return replace(entry, last_used=now)

    def put(self, key: EnvKey, snapshot: EnvSnapshot) -> CacheEntry | None:
        """Store a copy of ``snapshot`` (of a setup that worked) under ``key``, then evict.
        None when it is larger than the whole cache may be."""
        size = _tree_size(snapshot.root)
        if size > self.max_bytes:
            log.info("not caching a %d-byte environment (cache: %d bytes)", size, self.max_bytes)
            return None
        existing = self.get(key)
        if existing is not None:
            return existing
        tmp = self._tmp_dir()
        try:
            copy_tree(snapshot.root, tmp / "snapshot")
            now = self._clock()
            marker = {"key": asdict(key), "size_bytes": size, "created": now}
            with (tmp / MARKER).open("w") as fh:
                json.dump(marker, fh)
                fh.flush()
                os.fsync(fh.fileno())
            os.utime(tmp / MARKER, (now, now))
            final = self._path(key)
            final.parent.mkdir(parents=True, exist_ok=True)
            try:
                tmp.rename(final)  # atomic: readers see the whole entry or none
            except OSError:  # another job stored the same key meanwhile
                return self.get(key)
        finally:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)
        self.evict()
        return CacheEntry(key, final, size, now)

    def entries(self) -> list[CacheEntry]:
        """Every whole entry (damaged ones are removed on the way)."""
        found: list[CacheEntry] = []
        if not self.root.is_dir():
            return found
        for repo_dir in self.root.iterdir():
            if repo_dir.name == _TMP or not repo_dir.is_dir():
                continue
            for path in repo_dir.iterdir():
                entry = self._read(path)
                # An entry of another setup version is never asked for again, and one
                # from before version 2 may hold credentials: gone at once, not aged out.
                if (
                    entry is None
                    or entry.key.digest() != path.name
                    or entry.key.setup_version != SETUP_VERSION
                ):
                    self._remove(path)
                else:
                    found.append(entry)
        return found

    def evict(self) -> list[Path]:
        """Remove entries unused for longer than the maximum age, then the least recently
        used until the rest fit the maximum size, and leftovers of dead writers."""
        now = self._clock()
        removed = []
        kept = []
        for entry in sorted(self.entries(), key=lambda e: e.last_used, reverse=True):
            if now - entry.last_used > self.max_age_s:
                removed.append(entry.path)
            else:
                kept.append(entry)
        total = 0
        for entry in kept:  # most recently used first
            total += entry.size_bytes
            if total > self.max_bytes:
                removed.append(entry.path)
        for path in removed:
            self._remove(path)
        tmp_root = self.root / _TMP
        if tmp_root.is_dir():
            for leftover in tmp_root.iterdir():
                with contextlib.suppress(OSError):
                    if now - leftover.lstat().st_mtime > _STALE_TMP_S:
                        shutil.rmtree(leftover, ignore_errors=True)
        return removed

    def _read(self, path: Path) -> CacheEntry | None:
        try:
            marker = path / MARKER
            data = json.loads(marker.read_text())
            raw = data["key"]
            # JSON keeps the hosts as a list; the key compared against holds a tuple.
            key = EnvKey(**{**raw, "setup_hosts": tuple(raw.get("setup_hosts", ()))})
            size = int(data["size_bytes"])
            last_used = marker.stat().st_mtime
        except (OSError, ValueError, TypeError, KeyError):
            return None
        if not (path / "snapshot" / "env").is_dir():
            return None
        return CacheEntry(key, path, size, last_used)

    def _tmp_dir(self) -> Path:
        tmp = self.root / _TMP / secrets.token_hex(8)
        tmp.mkdir(parents=True)
        now = self._clock()
        os.utime(tmp, (now, now))  # aged by the cache's clock, like the entries
        return tmp

    def _remove(self, path: Path) -> None:
        """Out of sight at once (a rename), then deleted: a reader never finds half."""
        try:
            trash = self._tmp_dir()
            path.rename(trash / "entry")
        except OSError:
            trash = path
        shutil.rmtree(trash, ignore_errors=True)


def manifest_digest(checkout: Path) -> str:
    """Digest of the lock and manifest files at the top of ``checkout`` (and requirement
    files in ``requirements/``), read without following links."""
    h = hashlib.sha256()
    for rel in sorted(_manifest_paths(checkout)):
        try:
            data = read_regular_file(checkout / rel, _MANIFEST_MAX_BYTES)
        except (FileNotFoundError, ExportError):
            data = b"\0not a regular file"
        h.update(f"{rel}\0{len(data)}\0".encode())
        h.update(data)
    return h.hexdigest()


def is_manifest(rel: str) -> bool:
    """Whether the checkout path ``rel`` is one of the files :func:`manifest_digest`
    reads (what decides a setup's installs)."""
    parts = rel.split("/")
    if len(parts) == 1:
        return rel in MANIFEST_NAMES or any(fnmatch.fnmatch(rel, g) for g in MANIFEST_GLOBS)
    return len(parts) == 2 and parts[0] in MANIFEST_DIRS and parts[1].endswith((".txt", ".in"))


def _manifest_paths(checkout: Path) -> list[str]:
    paths = []
    with os.scandir(checkout) as entries:
        for entry in entries:
            name = entry.name
            if name in MANIFEST_NAMES or any(fnmatch.fnmatch(name, g) for g in MANIFEST_GLOBS):
                paths.append(name)
            elif name in MANIFEST_DIRS and entry.is_dir(follow_symlinks=False):
                paths += [
                    f"{name}/{sub.name}"
                    for sub in os.scandir(entry.path)
                    if sub.name.endswith((".txt", ".in"))
                ]
    return paths


def base_fingerprint(settings: SandboxSettings, backend: str) -> str:
    """What the environment is built on: the image's id on docker (raises SandboxError
    when the engine does not answer), the host's toolchains on bubblewrap."""
    if backend == "docker":
        import docker.errors

        from worker.sandbox.docker import docker_client

        client = docker_client(settings, timeout=30)
        try:
            return str(client.images.get(settings.image).id)
        except docker.errors.DockerException as exc:
            raise SandboxError(f"cannot identify the sandbox image: {exc}") from exc
        finally:
            client.close()
    return _host_fingerprint()


def _host_fingerprint() -> str:
    h = hashlib.sha256()
    with contextlib.suppress(OSError):
        h.update(Path("/etc/os-release").read_bytes())
    for tool in _HOST_TOOLS:
        found = shutil.which(tool, path="/usr/local/bin:/usr/bin:/bin")
        if found is None:
            continue
        real = os.path.realpath(found)
        info = os.stat(real)
        h.update(f"{tool}:{real}:{info.st_size}:{info.st_mtime_ns}\n".encode())
    return "host:" + h.hexdigest()


def env_key(
    repo: str,
    settings: SandboxSettings,
    checkout: Path,
    setup_command: str | None,
    *,
    setup_hosts: Sequence[str] = (),
) -> EnvKey:
    """``setup_hosts``: the repository's ``.ribbit.yml`` ``setup_hosts``; the key holds
    those the deployment permits, as the setup step reaches them."""
    from worker.sandbox import resolve_backend

    backend = resolve_backend(settings)
    allowed = repo_setup_hosts(setup_hosts, settings.repo_setup_hosts).allowed
    return EnvKey(
        repo=repo,
        backend=backend,
        base=base_fingerprint(settings, backend),
        setup_command=setup_command,
        manifests=manifest_digest(checkout),
        index_url=settings.package_index_url,
        setup_hosts=tuple(sorted(allowed)),
        credentials=credential_digest(credentials_in_use(settings, setup_command)),
    )


class JobEnvironment(ClosedOnExit):
    """One job's set-up environment. :meth:`setup` is the agent's sandbox's setup step:
    it restores the repository's cached environment, or runs the setup step and
    snapshots (and caches) what it built. :meth:`restore` is the setup step of every
    later sandbox of the job (the gates' test runs): a fresh copy of that snapshot, no
    install, no network."""

    def __init__(
        self,
        repo_config: RepoConfig,
        settings: SandboxSettings,
        *,
        checkout: Path,
        workdir: Path,
        cache: EnvCache | None = None,
        key: EnvKey | None = None,
    ) -> None:
        self._config = repo_config
        self._settings = settings
        self.manner = SetupManner()  # a patch's manifests' set-up sets its own
        self._checkout = checkout
        self._workdir = workdir
        self._cache = cache if key is not None else None
        self._key = key
        self.snapshot: EnvSnapshot | None = None
        # The setup step's result when its snapshot held a credential.
        self.refused: SetupResult | None = None

    @classmethod
    def for_job(
        cls,
        repo_config: RepoConfig,
        settings: SandboxSettings,
        *,
        repo: str,
        checkout: Path,
        workdir: Path,
        data_dir: Path,
    ) -> JobEnvironment:
        """The deployment's way: cached per repository when the cache is on and the
        sandbox's base can be identified."""
        cache = EnvCache.from_settings(settings, data_dir)
        key = None
        if cache is not None:
            try:
                cache.evict()  # entries of an older setup version go on the first job
            except OSError as exc:
                log.warning("could not clean the environment cache: %s", exc)
            try:
                key = env_key(
                    repo, settings, checkout, repo_config.setup, setup_hosts=repo_config.setup_hosts
                )
            except (SandboxError, OSError) as exc:
                log.warning("no environment cache for this job: %s", exc)
        return cls(repo_config, settings, checkout=checkout, workdir=workdir, cache=cache, key=key)

    def setup(self, sandbox: Sandbox) -> SetupResult:
        if not isinstance(sandbox, Snapshottable):
            return run_setup(sandbox, self._config, self._settings)
        start = time.monotonic()
        cached = self._from_cache()
        if cached is not None:
            sandbox.restore_setup_state(cached)
            self.snapshot = cached
            sandbox.leave_out_of_diff(list(overlay_paths(cached.workspace, self._checkout)))
            return self._restored("cache", start)
        result = run_setup(sandbox, self._config, self._settings)
        if not result.ok:
            return result
        return replace(self.adopt(sandbox, result, cache=True), duration_s=time.monotonic() - start)

    def adopt(self, sandbox: Sandbox, result: SetupResult, *, cache: bool = False) -> SetupResult:
        """Snapshot ``sandbox``, just set up (``result``, a step that worked) over the
        checkout, for :meth:`restore`; ``cache``: and store it in the repository's cache.
        A snapshot holding a copy of the setup's credentials is refused: the result
        says so, and the sandbox must not be used further. Where the set-up installed
        a copy of the package, its build backend is fetched first (reinstall.py), while
        the sandbox still has the set-up's network, and the snapshot taken again."""
        if not isinstance(sandbox, Snapshottable):
            return result
        result = self._take(sandbox, result)
        copies = workspace_copies(self.snapshot.env) if result.ok and self.snapshot else []
        wanted = build_requirements(self._checkout, copies)
        if wanted:
            said = fetch_build_backend(sandbox, wanted, self._settings, self.manner)
            output = f"{result.output}\n{said}"[-OUTPUT_TAIL:]
            result = self._take(sandbox, replace(result, output=output))
        if not cache or not result.ok or self.snapshot is None:
            return result
        if copies:
            log.info("not caching an environment with a copy of the repository's own code")
        elif self._cache is not None and self._key is not None:
            try:
                self._cache.put(self._key, self.snapshot)
            except (SandboxError, OSError) as exc:
                log.warning("could not cache the set-up environment: %s", exc)
        return result

    def _take(self, sandbox: Snapshottable, result: SetupResult) -> SetupResult:
        """:meth:`adopt`'s snapshot (none while it is taken: the folder is emptied)."""
        shown = credentials_in_use(self._settings, result.command)
        self.snapshot = None
        try:
            dest = self._snapshot_dir()
            self.snapshot = take_snapshot(sandbox, self._checkout, dest, secrets=shown)
        except SecretInSnapshot as exc:
            log.warning("set-up refused: %s", exc)
            self.refused = replace(
                result,
                ok=False,
                output=f"{result.output}\n[set-up refused: {exc}. Nothing the setup step "
                "built is used or cached; the credentials must stay in the files Ribbit "
                "mounts for the step.]",
            )
            return self.refused
        except (SandboxError, OSError) as exc:
            # The gates could not start from what the agent starts from: stop here.
            return replace(
                result,
                ok=False,
                output=f"{result.output}\n[could not snapshot the set-up environment: {exc}]",
            )
        # What setup wrote into the workspace (toolz.egg-info from `pip install -e .`)
        # would otherwise be a new file in the agent's patch.
        sandbox.leave_out_of_diff(list(overlay_paths(self.snapshot.workspace, self._checkout)))
        return result

    def restore(self, sandbox: Sandbox) -> SetupResult:
        """The setup step of a sandbox after the agent's (a gate's test run)."""
        if self.refused is not None:
            return self.refused  # never set up again: the same step would copy again
        if self.snapshot is None or not isinstance(sandbox, Snapshottable):
            # No snapshot to start from (a sandbox without snapshots): set up here.
            return run_setup(sandbox, self._config, self._settings)
        start = time.monotonic()
        sandbox.restore_setup_state(self.snapshot)
        restored = self._restored("snapshot", start)
        timeout = float(self._settings.setup_timeout_s)
        return reinstall_copies(sandbox, self.snapshot, restored, timeout, started=start)

    def _from_cache(self) -> EnvSnapshot | None:
        if self._cache is None or self._key is None:
            return None
        entry = self._cache.get(self._key)
        if entry is None:
            return None
        # The job's own copy: the cache may evict the entry while the job runs.
        dest = self._snapshot_dir()
        try:
            copy_tree(entry.snapshot.root, dest)
        except SandboxError as exc:
            log.warning("could not copy the cached environment (evicted meanwhile?): %s", exc)
            shutil.rmtree(dest, ignore_errors=True)
            return None
        return EnvSnapshot(dest)

    def _snapshot_dir(self) -> Path:
        self._workdir.mkdir(parents=True, exist_ok=True)
        dest = self._workdir / "env-snapshot"
        shutil.rmtree(dest, ignore_errors=True)
        return dest

    def _restored(self, source: str, start: float) -> SetupResult:
        what = "the repository's cache" if source == "cache" else "this job's snapshot"
        return SetupResult(
            command=self._config.setup,
            ok=True,
            exit_code=0 if self._config.setup else None,
            output=f"[set-up environment restored from {what}; nothing installed]",
            duration_s=time.monotonic() - start,
            restored_from=source,
            restored_at_ns=time.time_ns(),  # called right after the restore: see the field
        )

    def close(self) -> None:
        shutil.rmtree(self._workdir / "env-snapshot", ignore_errors=True)


def _tree_size(root: Path) -> int:
    total = 0
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(dirpath, name)).st_size
    return total


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()
