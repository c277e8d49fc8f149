"""Set-up credentials stay with the setup step (issue #32, item 2), on host folders and
a fake sandbox: the cache key says which credentials built an entry, entries of the
old setup version are purged, and a snapshot holding a copy is refused, cached nowhere
and restored into no later sandbox (the real backends: tests/integration/
test_setup_credentials.py)."""

from __future__ import annotations

import base64
import json
from collections.abc import Sequence
from pathlib import Path

import pytest

from worker.repo_config import RepoConfig
from worker.sandbox.base import ExecResult
from worker.sandbox.envcache import MARKER, EnvCache, EnvKey, JobEnvironment, env_key
from worker.sandbox.setup import SETUP_VERSION, SetupResult
from worker.sandbox.snapshot import EnvSnapshot
from worker.settings import SandboxSettings

TOKEN = "npm_Q29weU1lSWZZb3VDYW4xMjM0"
NPMRC = f"//registry.npmjs.org/:_authToken={TOKEN}\n"


def creds_settings(tmp_path: Path, **more: object) -> SandboxSettings:
    folder = tmp_path / "creds"
    folder.mkdir(exist_ok=True)
    (folder / "npmrc").write_text(NPMRC)
    return SandboxSettings.model_validate(
        {"backend": "bubblewrap", "setup_credentials_dir": str(folder), **more}
    )


def checkout(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir(exist_ok=True)
    (repo / "package.json").write_text('{"name": "x"}\n')
    return repo


def test_cache_key_records_whether_and_which_credentials_were_used(tmp_path: Path) -> None:
    repo = checkout(tmp_path)
    plain = env_key("github:o/r", SandboxSettings(backend="bubblewrap"), repo, "npm ci")
    with_creds = env_key("github:o/r", creds_settings(tmp_path), repo, "npm ci")
    assert plain.credentials is None
    assert with_creds.credentials is not None and TOKEN not in with_creds.credentials
    assert plain.digest() != with_creds.digest()
    changed = creds_settings(tmp_path)
    (tmp_path / "creds" / "npmrc").write_text(NPMRC.replace(TOKEN, TOKEN[::-1]))
    other = env_key("github:o/r", changed, repo, "npm ci")
    assert other.credentials != with_creds.credentials
    # No network, or no command: the setup is shown none, and the key says so.
    offline = creds_settings(tmp_path, setup_network=False)
    assert env_key("github:o/r", offline, repo, "npm ci").credentials is None
    assert env_key("github:o/r", creds_settings(tmp_path), repo, None).credentials is None


def _entry(root: Path, key: dict[str, object], name: str) -> Path:
    path = root / "repo-digest" / name
    (path / "snapshot" / "env" / "venv").mkdir(parents=True)
    (path / "snapshot" / "env" / "venv" / ".npmrc").write_text(NPMRC)
    (path / MARKER).write_text(json.dumps({"key": key, "size_bytes": 10, "created": 0}))
    return path


def test_entries_of_an_older_setup_version_are_purged(tmp_path: Path) -> None:
    cache = EnvCache(tmp_path / "cache", max_bytes=10**9, max_age_s=10**9)
    fields = {
        "repo": "github:o/r", "backend": "bubblewrap", "base": "host:x",
        "setup_command": "npm ci", "manifests": "m", "index_url": None, "setup_hosts": [],
    }  # fmt: skip
    # Version 1's marker, as it was written (no credentials field), under its own digest.
    old = EnvKey(**{**fields, "setup_hosts": (), "setup_version": 1})  # type: ignore[arg-type]
    v1 = {**fields, "setup_version": 1}
    old_path = _entry(cache.root, v1, old.digest())
    # A marker claiming version 1 under a name that matches its digest is purged too.
    current = EnvKey(**{**fields, "setup_hosts": ()})  # type: ignore[arg-type]
    assert current.setup_version == SETUP_VERSION > 1
    kept = _entry(cache.root, {**fields, "setup_version": SETUP_VERSION}, current.digest())
    cache.evict()
    assert not old_path.exists()
    assert kept.exists()


class SetUpSandbox:
    """A sandbox whose setup step left ``workspace`` and ``env`` files (what the real
    backends export), and which runs the scratch clean-up the snapshot asks for."""

    backend = "fake"

    def __init__(self, env: dict[str, str], workspace: dict[str, str]) -> None:
        self.env, self.workspace = env, workspace
        self.commands: list[str] = []
        self.left_out: list[str] = []

    def exec(self, command: str | Sequence[str], **_: object) -> ExecResult:
        self.commands.append(" ".join(command) if not isinstance(command, str) else command)
        return ExecResult(0, "", "", 0.0)

    def export_setup_state(self, env_dest: Path, workspace_dest: Path) -> None:
        for files, dest in ((self.env, env_dest), (self.workspace, workspace_dest)):
            dest.mkdir(parents=True)
            for rel, text in files.items():
                (dest / rel).parent.mkdir(parents=True, exist_ok=True)
                (dest / rel).write_text(text)

    def restore_setup_state(self, snapshot: EnvSnapshot) -> None:
        raise AssertionError("nothing may be restored from a refused snapshot")

    def leave_out_of_diff(self, paths: Sequence[str]) -> None:
        self.left_out = list(paths)

    def diff(self) -> str:
        return ""

    def close(self) -> None:
        pass


def _job_env(tmp_path: Path, settings: SandboxSettings) -> tuple[JobEnvironment, EnvCache]:
    repo = checkout(tmp_path)
    cache = EnvCache(tmp_path / "cache", max_bytes=10**9, max_age_s=10**9)
    key = env_key("github:o/r", settings, repo, "npm ci")
    job = JobEnvironment(
        RepoConfig(setup="npm ci"), settings, checkout=repo, workdir=tmp_path / "work",
        cache=cache, key=key,
    )  # fmt: skip
    return job, cache


SET_UP = SetupResult(command="npm ci", ok=True, exit_code=0, output="added 1", duration_s=0)
COPIES = {
    "workspace": ({}, {".npmrc": NPMRC}),
    "env": ({"venv/lib/.npmrc": NPMRC}, {}),
    "install-script-base64": (
        {},
        {"node_modules/evil/stash.txt": base64.b64encode(NPMRC.encode()).decode()},
    ),
    "hex-in-env": ({"go/pkg/t": TOKEN.encode().hex()}, {}),
}


@pytest.mark.parametrize("where", sorted(COPIES))
def test_a_snapshot_with_a_copy_is_refused_cached_nowhere_and_never_restored(
    tmp_path: Path, where: str
) -> None:
    env_files, workspace_files = COPIES[where]
    job, cache = _job_env(tmp_path, creds_settings(tmp_path))
    sandbox = SetUpSandbox(env_files, workspace_files)
    result = job.adopt(sandbox, SET_UP, cache=True)  # type: ignore[arg-type]
    assert not result.ok
    assert "set-up refused" in result.output and "`npmrc`" in result.output
    assert TOKEN not in result.output
    assert job.snapshot is None
    assert not (tmp_path / "work" / "env-snapshot").exists()
    assert cache.entries() == []
    # A gate's sandbox gets the refusal, not a set-up run of its own.
    assert job.restore(SetUpSandbox({}, {})) is result  # type: ignore[arg-type]


def test_a_clean_snapshot_is_kept_cached_and_scratch_is_emptied(tmp_path: Path) -> None:
    job, cache = _job_env(tmp_path, creds_settings(tmp_path))
    sandbox = SetUpSandbox({"venv/ok": "fine"}, {"node_modules/a/index.js": "1"})
    result = job.adopt(sandbox, SET_UP, cache=True)  # type: ignore[arg-type]
    assert result.ok and job.snapshot is not None
    assert len(cache.entries()) == 1
    assert any("/home/sandbox" in c and "-delete" in c for c in sandbox.commands)


def test_without_credentials_nothing_is_searched_or_emptied(tmp_path: Path) -> None:
    job, _cache = _job_env(tmp_path, SandboxSettings(backend="bubblewrap"))
    sandbox = SetUpSandbox({}, {".npmrc": NPMRC})  # the repository's own business
    assert job.adopt(sandbox, SET_UP).ok
    assert sandbox.commands == []
