"""The environment cache's keys, entries and eviction, and the snapshot's host-side
rules, on host folders (the real backends are in tests/integration/test_env_snapshot.py)."""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path

import pytest

from worker.sandbox.base import ExecResult
from worker.sandbox.envcache import MARKER, EnvCache, EnvKey, env_key, manifest_digest
from worker.sandbox.snapshot import (
    EnvSnapshot,
    installed_copies,
    overlay_paths,
    prune_checkout_paths,
    workspace_copies,
)
from worker.settings import SandboxSettings

MB = 1024 * 1024


class FakeClock:
    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def key(repo: str = "github:o/r", manifests: str = "m1", **changes: object) -> EnvKey:
    base = EnvKey(
        repo=repo, backend="bubblewrap", base="host:x", setup_command="pip install -e .",
        manifests=manifests,
    )  # fmt: skip
    return replace(base, **changes)  # type: ignore[arg-type]


def snapshot(root: Path, marker: str = "built", size: int = 10) -> EnvSnapshot:
    snap = EnvSnapshot(root)
    (snap.env / "venv").mkdir(parents=True)
    (snap.env / "venv" / "marker").write_text(marker)
    (snap.env / "venv" / "blob").write_bytes(b"x" * size)
    (snap.workspace / "node_modules").mkdir(parents=True)
    return snap


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


def make_cache(
    tmp_path: Path, clock: FakeClock, max_mb: float = 100, age: float = 3600
) -> EnvCache:
    return EnvCache(tmp_path / "cache", max_bytes=int(max_mb * MB), max_age_s=age, clock=clock)


def read_marker(entry_snapshot: EnvSnapshot) -> str:
    return (entry_snapshot.env / "venv" / "marker").read_text()


def test_put_then_get_returns_a_copy_of_the_snapshot(tmp_path: Path, clock: FakeClock) -> None:
    cache = make_cache(tmp_path, clock)
    snap = snapshot(tmp_path / "snap", "first")
    stored = cache.put(key(), snap)
    assert stored is not None
    (snap.env / "venv" / "marker").write_text("changed after caching")
    hit = cache.get(key())
    assert hit is not None and read_marker(hit.snapshot) == "first"
    assert (hit.snapshot.workspace / "node_modules").is_dir()


@pytest.mark.parametrize(
    "other",
    [
        key(manifests="m2"),  # a lock file changed
        key(repo="github:o/other"),  # another repository, same files
        key(repo="gitlab:o/r"),  # same name on another forge
        key(setup_command="pip install ."),
        key(base="host:y"),  # another image or host toolchain
        key(backend="docker"),
        key(setup_version=999),  # Ribbit's setup step changed
        key(index_url="https://mirror.example/simple"),
        key(setup_hosts=("pkgs.example.org",)),  # the setup may reach another registry
    ],
)
def test_any_part_of_the_key_changed_misses(
    tmp_path: Path, clock: FakeClock, other: EnvKey
) -> None:
    cache = make_cache(tmp_path, clock)
    cache.put(key(), snapshot(tmp_path / "snap"))
    assert cache.get(key()) is not None
    assert cache.get(other) is None


def test_repositories_never_share_a_folder(tmp_path: Path, clock: FakeClock) -> None:
    cache = make_cache(tmp_path, clock)
    a = cache.put(key(repo="github:o/a"), snapshot(tmp_path / "a"))
    b = cache.put(key(repo="github:o/b"), snapshot(tmp_path / "b"))
    assert a is not None and b is not None
    assert a.path.parent != b.path.parent


def test_a_write_that_never_finished_is_not_found(tmp_path: Path, clock: FakeClock) -> None:
    cache = make_cache(tmp_path, clock)
    cache.put(key(), snapshot(tmp_path / "snap"))
    entry = cache.get(key())
    assert entry is not None
    # What a worker killed while writing leaves: the temp folder, never the entry's path.
    leftover = cache.root / ".tmp" / "dead"
    (leftover / "snapshot" / "env").mkdir(parents=True)
    os.utime(leftover, (clock.now, clock.now))
    assert cache.get(key(manifests="m2")) is None
    clock.now += 7 * 3600
    cache.evict()
    assert not leftover.exists()


@pytest.mark.parametrize("damage", ["no-marker", "bad-json", "other-key", "no-env"])
def test_a_damaged_entry_is_never_used_and_is_removed(
    tmp_path: Path, clock: FakeClock, damage: str
) -> None:
    cache = make_cache(tmp_path, clock)
    entry = cache.put(key(), snapshot(tmp_path / "snap"))
    assert entry is not None
    marker = entry.path / MARKER
    if damage == "no-marker":
        marker.unlink()
    elif damage == "bad-json":
        marker.write_text('{"key": ')
    elif damage == "other-key":
        data = json.loads(marker.read_text())
        data["key"]["setup_command"] = "something else"
        marker.write_text(json.dumps(data))
    else:
        os.rename(entry.snapshot.env, entry.path / "elsewhere")
    assert cache.get(key()) is None
    assert not entry.path.exists()


def test_entries_unused_past_the_maximum_age_are_evicted(tmp_path: Path, clock: FakeClock) -> None:
    cache = make_cache(tmp_path, clock, age=3600)
    cache.put(key(manifests="old"), snapshot(tmp_path / "old"))
    clock.now += 1800
    cache.put(key(manifests="new"), snapshot(tmp_path / "new"))
    clock.now += 1801  # "old" unused for 3601 s, "new" for 1801 s
    removed = cache.evict()
    assert len(removed) == 1
    assert cache.get(key(manifests="old")) is None
    assert cache.get(key(manifests="new")) is not None


def test_a_hit_keeps_an_entry_young(tmp_path: Path, clock: FakeClock) -> None:
    cache = make_cache(tmp_path, clock, age=3600)
    cache.put(key(), snapshot(tmp_path / "snap"))
    clock.now += 3000
    assert cache.get(key()) is not None
    clock.now += 3000
    assert cache.get(key()) is not None


def test_size_evicts_the_least_recently_used_first(tmp_path: Path, clock: FakeClock) -> None:
    cache = make_cache(tmp_path, clock, max_mb=2.5)
    for name in ("a", "b"):
        cache.put(key(manifests=name), snapshot(tmp_path / name, size=MB))
        clock.now += 10
    assert cache.get(key(manifests="a")) is not None  # a is now the most recently used
    clock.now += 10
    cache.put(key(manifests="c"), snapshot(tmp_path / "c", size=MB))
    kept = {e.key.manifests for e in cache.entries()}
    assert kept == {"a", "c"}


def test_a_snapshot_larger_than_the_whole_cache_is_not_stored(
    tmp_path: Path, clock: FakeClock
) -> None:
    cache = make_cache(tmp_path, clock, max_mb=0.5)
    assert cache.put(key(), snapshot(tmp_path / "big", size=MB)) is None
    assert cache.entries() == []


def test_a_key_with_setup_hosts_is_found_again_after_its_marker_is_read(
    tmp_path: Path, clock: FakeClock
) -> None:
    cache = make_cache(tmp_path, clock)
    with_hosts = key(setup_hosts=("a.example.org", "b.example.org"))
    cache.put(with_hosts, snapshot(tmp_path / "snap"))
    assert cache.get(with_hosts) is not None
    assert [e.key for e in cache.entries()] == [with_hosts]


def test_the_key_holds_the_setup_hosts_the_deployment_permits(tmp_path: Path) -> None:
    checkout = tmp_path / "repo"
    checkout.mkdir()
    (checkout / "requirements.txt").write_text("toolz==1\n")
    settings = SandboxSettings(backend="bubblewrap", repo_setup_hosts=["*.example.org"])

    def hosts(*requested: str) -> EnvKey:
        return env_key("github:o/r", settings, checkout, "pip install .", setup_hosts=requested)

    none = hosts()
    assert none.setup_hosts == ()
    one = hosts("pkgs.example.org")
    assert one.setup_hosts == ("pkgs.example.org",) and one.digest() != none.digest()
    # Order, case and repeats do not make another environment.
    assert hosts("b.example.org", "A.example.org", "b.example.org") == hosts(
        "a.example.org", "b.example.org"
    )
    # A host the deployment refuses is never reached: the environment is the same.
    assert hosts("pkgs.example.org", "evil.test") == one


def test_manifest_digest_follows_lock_files_only(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / "requirements").mkdir(parents=True)
    (repo / "requirements.txt").write_text("toolz==1\n")
    (repo / "requirements" / "dev.txt").write_text("pytest\n")
    (repo / "module.py").write_text("x = 1\n")
    first = manifest_digest(repo)
    (repo / "module.py").write_text("x = 2\n")
    assert manifest_digest(repo) == first
    (repo / "requirements" / "dev.txt").write_text("pytest==8\n")
    second = manifest_digest(repo)
    assert second != first
    (repo / "package-lock.json").write_text("{}")
    assert manifest_digest(repo) != second


def test_manifest_digest_does_not_follow_a_link(tmp_path: Path) -> None:
    secret = tmp_path / "secret"
    secret.write_text("one")
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "pyproject.toml").symlink_to(secret)
    first = manifest_digest(repo)
    secret.write_text("two")
    assert manifest_digest(repo) == first


def test_pruning_keeps_only_what_setup_added(tmp_path: Path) -> None:
    checkout = tmp_path / "checkout"
    (checkout / "pkg").mkdir(parents=True)
    (checkout / "pkg" / "mod.py").write_text("x")
    (checkout / "linked").symlink_to("/etc")
    extras = tmp_path / "extras"
    (extras / "pkg").mkdir(parents=True)
    (extras / "pkg" / "mod.py").write_text("changed by setup")
    (extras / "pkg" / "generated.py").write_text("new")
    (extras / "node_modules" / "a").mkdir(parents=True)
    (extras / "linked").mkdir()
    (extras / "linked" / "passwd").write_text("through the link")
    prune_checkout_paths(extras, checkout)
    left = sorted(str(p.relative_to(extras)) for p in extras.rglob("*"))
    assert left == ["node_modules", "node_modules/a", "pkg", "pkg/generated.py"]


def test_overlay_never_replaces_or_writes_through_the_tree(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    (tree / "pkg").mkdir(parents=True)
    (tree / "pkg" / "mod.py").write_text("the judged file")
    (tree / "node_modules").symlink_to("/etc")  # a link the patch added
    extras = tmp_path / "extras"
    (extras / "pkg").mkdir(parents=True)
    (extras / "pkg" / "mod.py").write_text("stale")
    (extras / "pkg" / "mod.egg-info").write_text("meta")
    (extras / "node_modules" / "x").mkdir(parents=True)
    (extras / "build").mkdir()
    assert list(overlay_paths(extras, tree)) == ["build", "pkg/mod.egg-info"]


def test_copies_of_the_workspace_are_found_and_editable_installs_are_not(tmp_path: Path) -> None:
    site = tmp_path / "env" / "venv" / "lib" / "python3.11" / "site-packages"
    records = {
        "copy-1.dist-info": {"url": "file:///workspace", "dir_info": {}},
        "sub-1.dist-info": {"url": "file:///workspace/libs/sub", "dir_info": {}},
        "editable-1.dist-info": {"url": "file:///workspace", "dir_info": {"editable": True}},
        "elsewhere-1.dist-info": {"url": "file:///workspaces-other", "dir_info": {}},
        "pypi-1.dist-info": {"url": "https://files.pythonhosted.org/x.whl", "archive_info": {}},
    }
    for name, data in records.items():
        (site / name).mkdir(parents=True)
        (site / name / "direct_url.json").write_text(json.dumps(data))
    assert workspace_copies(tmp_path / "env") == ["/workspace", "/workspace/libs/sub"]


class _PipSays:
    """A sandbox whose ``python -m pip inspect --local`` prints ``out`` (and exits ``rc``)."""

    def __init__(self, out: str, rc: int = 0) -> None:
        self.out, self.rc = out, rc
        self.ran: list[list[str]] = []

    def exec(self, command: list[str], **_: object) -> ExecResult:
        self.ran.append(command)
        return ExecResult(exit_code=self.rc, stdout=self.out, stderr="", duration_s=0.1)


def test_copies_in_a_set_up_sandbox_come_from_pips_own_report() -> None:
    installed = [
        {"metadata": {"name": "copy"}, "direct_url": {"url": "file:///workspace", "dir_info": {}}},
        {
            "metadata": {"name": "editable"},
            "direct_url": {"url": "file:///workspace", "dir_info": {"editable": True}},
        },
        {"metadata": {"name": "requests"}},
        {"metadata": {"name": "x"}, "direct_url": {"url": "file:///workspaces-other"}},
    ]
    sandbox = _PipSays(json.dumps({"version": "1", "installed": installed}))
    assert installed_copies(sandbox) == ["/workspace"]  # type: ignore[arg-type]
    assert sandbox.ran == [["python", "-m", "pip", "inspect", "--local"]]
    # A pip too old for ``inspect``, or no pip: nothing to say.
    assert installed_copies(_PipSays("", rc=1)) == []  # type: ignore[arg-type]
    assert installed_copies(_PipSays("not json")) == []  # type: ignore[arg-type]
