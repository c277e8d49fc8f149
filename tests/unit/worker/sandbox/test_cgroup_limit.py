"""The memory limit this process runs under, as `ribbit doctor` reads it, on cgroup v2
and v1 hierarchies laid out in a temporary folder."""

from __future__ import annotations

from pathlib import Path

import pytest

from worker.sandbox import cgroup


def _own(monkeypatch: pytest.MonkeyPatch, group: Path, version: int) -> None:
    monkeypatch.setattr(cgroup, "_own_memory_cgroup", lambda root: (group, version))


def test_v2_limit_of_the_own_group(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    group = tmp_path / "kubepods" / "pod1"
    group.mkdir(parents=True)
    (group / "memory.max").write_text("8589934592\n")
    (tmp_path / "memory.max").write_text("max\n")
    _own(monkeypatch, group, 2)
    assert cgroup.memory_limit(tmp_path) == 8 * 2**30
    (group / "memory.max").write_text("max\n")
    assert cgroup.memory_limit(tmp_path) is None


def test_a_namespaced_container_reads_its_root(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # /proc/self/cgroup names the host's path, which the container's view lacks.
    (tmp_path / "memory.max").write_text("4294967296\n")
    _own(monkeypatch, tmp_path / "host" / "path", 2)
    assert cgroup.memory_limit(tmp_path) == 4 * 2**30


def test_v1_unlimited_is_none(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    group = tmp_path / "memory" / "docker" / "abc"
    group.mkdir(parents=True)
    (group / "memory.limit_in_bytes").write_text("9223372036854771712\n")
    _own(monkeypatch, group, 1)
    assert cgroup.memory_limit(tmp_path) is None
    (group / "memory.limit_in_bytes").write_text("2147483648\n")
    assert cgroup.memory_limit(tmp_path) == 2 * 2**30


def test_no_cgroup_is_no_limit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cgroup, "_own_memory_cgroup", lambda root: None)
    assert cgroup.memory_limit(tmp_path) is None
    _own(monkeypatch, tmp_path / "gone", 2)  # nothing readable anywhere
    assert cgroup.memory_limit(tmp_path) is None


def test_this_machine_reads_without_error() -> None:
    limit = cgroup.memory_limit()
    assert limit is None or limit > 0
