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
