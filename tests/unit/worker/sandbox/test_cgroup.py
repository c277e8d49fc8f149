"""The OOM counter a bubblewrap sandbox reads twice per exec: one pread of a file kept
open, read afresh each time, and 0 (never another file's text) once closed or gone."""

from __future__ import annotations

from pathlib import Path

import pytest

from worker.sandbox.cgroup import MemoryCgroup, OomCounter


@pytest.mark.parametrize(
    ("version", "name", "text"),
    [
        (1, "memory.oom_control", "oom_kill_disable 0\nunder_oom 0\noom_kill {n}\n"),
        (2, "memory.events", "low 0\nhigh 0\nmax 4\noom 3\noom_kill {n}\noom_group_kill 7\n"),
    ],
)
def test_counter_reads_each_look_afresh(tmp_path: Path, version: int, name: str, text: str) -> None:
    group = MemoryCgroup(tmp_path, version)
    (tmp_path / name).write_text(text.format(n=0))
    counter = OomCounter(group)
    assert counter.count() == 0
    # Rewritten in place, as the kernel renders it anew: the kept descriptor sees it.
    with (tmp_path / name).open("r+") as f:
        f.write(text.format(n=2))
    assert counter.count() == group.oom_kills() == 2
    counter.close()
    assert counter.count() == 0
    counter.close()  # twice is harmless


def test_counter_of_a_missing_group_reads_zero(tmp_path: Path) -> None:
    counter = OomCounter(MemoryCgroup(tmp_path / "gone", 2))
    assert counter.count() == 0
    counter.close()


def test_counter_ignores_a_garbled_line(tmp_path: Path) -> None:
    (tmp_path / "memory.events").write_text("oom_kill x\n")
    counter = OomCounter(MemoryCgroup(tmp_path, 2))
    assert counter.count() == 0
    counter.close()


def test_remove_deletes_an_empty_group_and_ignores_a_gone_one(tmp_path: Path) -> None:
    group = MemoryCgroup(tmp_path / "g", 2)
    group.path.mkdir()
    group.remove(sleep=lambda _s: pytest.fail("no wait for an empty group"))
    assert not group.path.exists()
    group.remove(sleep=lambda _s: pytest.fail("no wait for a gone group"))


def test_remove_gives_up_on_a_busy_group_after_its_wait(tmp_path: Path) -> None:
    group = MemoryCgroup(tmp_path / "g", 2)
    group.path.mkdir()
    (group.path / "busy").write_text("")  # rmdir fails, as on a group whose processes live
    now = [0.0]
    waits: list[float] = []

    def sleep(seconds: float) -> None:
        waits.append(seconds)
        now[0] += seconds

    group.remove(wait_s=0.12, sleep=sleep, clock=lambda: now[0])
    assert group.path.exists()  # left for reap_stale
    assert waits == [0.05] * 3  # failed at 0, 0.05, 0.10; at 0.15 past the wait
