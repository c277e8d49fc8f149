"""Host reads of hostile workspace content (worker.sandbox.export), without a sandbox:
FIFOs, sparse files, links out, deep trees, and tar streams that try to climb out."""

from __future__ import annotations

import io
import os
import tarfile
from pathlib import Path

import pytest

from worker.sandbox.export import (
    ExportError,
    ExportLimits,
    export_host_tree,
    extract_tar_stream,
    read_regular_file,
    read_tar_file,
)


def test_read_regular_file_refuses_fifo_link_and_oversize(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe")
    (tmp_path / "link").symlink_to("/etc/passwd")
    with open(tmp_path / "sparse", "wb") as fh:
        fh.truncate(400 * 1024 * 1024)
    (tmp_path / "ok").write_bytes(b"fine")
    with pytest.raises(FileNotFoundError):
        read_regular_file(tmp_path / "pipe")  # would block forever without O_NONBLOCK
    with pytest.raises(FileNotFoundError):
        read_regular_file(tmp_path / "link")
    with pytest.raises(ExportError):
        read_regular_file(tmp_path / "sparse", max_bytes=1024 * 1024)
    assert read_regular_file(tmp_path / "ok") == b"fine"


def test_export_host_tree_keeps_links_skips_specials_and_git(tmp_path: Path) -> None:
    src, dest = tmp_path / "src", tmp_path / "dest"
    (src / "pkg").mkdir(parents=True)
    (src / "pkg" / "a.py").write_text("x = 1\n")
    (src / "run.sh").write_text("echo\n")
    (src / "run.sh").chmod(0o755)
    (src / ".git").mkdir()
    (src / ".git" / "config").write_text("[core]\n\tfsmonitor = evil\n")
    (src / "out").symlink_to("/etc")
    os.mkfifo(src / "pipe")
    export_host_tree(src, dest)
    assert (dest / "pkg" / "a.py").read_text() == "x = 1\n"
    assert os.access(dest / "run.sh", os.X_OK)
    assert (dest / "out").is_symlink() and os.readlink(dest / "out") == "/etc"
    assert not (dest / ".git").exists() and not (dest / "pipe").exists()


def test_export_host_tree_bounds_bytes_entries_and_depth(tmp_path: Path) -> None:
    src = tmp_path / "src"
    deep = src.joinpath(*["d"] * 10)
    deep.mkdir(parents=True)
    (deep / "f").write_bytes(b"x" * 100)
    with pytest.raises(ExportError, match="deeper"):
        export_host_tree(src, tmp_path / "a", ExportLimits(max_depth=5))
    with pytest.raises(ExportError, match="entries"):
        export_host_tree(src, tmp_path / "b", ExportLimits(max_entries=5))
    with pytest.raises(ExportError, match="bytes"):
        export_host_tree(src, tmp_path / "c", ExportLimits(max_bytes=50))


def _tar(*members: tuple[str, str, bytes | str]) -> list[bytes]:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tf:
        for name, kind, payload in members:
            info = tarfile.TarInfo(name)
            if kind == "dir":
                info.type = tarfile.DIRTYPE
                tf.addfile(info)
            elif kind == "sym":
                info.type, info.linkname = tarfile.SYMTYPE, str(payload)
                tf.addfile(info)
            elif kind == "hard":
                info.type, info.linkname = tarfile.LNKTYPE, str(payload)
                tf.addfile(info)
            elif kind == "fifo":
                info.type = tarfile.FIFOTYPE
                tf.addfile(info)
            else:
                data = payload if isinstance(payload, bytes) else payload.encode()
                info.size = len(data)
                tf.addfile(info, io.BytesIO(data))
    raw = buf.getvalue()
    return [raw[i : i + 4096] for i in range(0, len(raw), 4096)]  # streamed in chunks


def test_extract_tar_stream_strips_top_and_refuses_climbing(tmp_path: Path) -> None:
    stream = _tar(
        ("workspace", "dir", b""),
        ("workspace/a.txt", "file", b"a"),
        ("workspace/.git/config", "file", b"evil"),
        ("workspace/../escape.txt", "file", b"x"),
        ("/abs.txt", "file", b"x"),
        ("workspace/p", "fifo", b""),
        ("workspace/l", "sym", "/etc/passwd"),
    )
    dest = tmp_path / "dest"
    extract_tar_stream(stream, dest)
    assert sorted(p.name for p in dest.iterdir()) == ["a.txt", "l"]
    assert not (tmp_path / "escape.txt").exists()
    assert os.readlink(dest / "l") == "/etc/passwd"


def test_extract_tar_stream_never_writes_through_a_link(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    stream = _tar(
        ("workspace/out", "sym", str(outside)),
        ("workspace/out/x", "file", b"pwned"),
    )
    with pytest.raises(ExportError):
        extract_tar_stream(stream, tmp_path / "dest")
    assert list(outside.iterdir()) == []


def test_extract_tar_stream_refuses_a_member_over_the_budget(tmp_path: Path) -> None:
    stream = _tar(("workspace/big", "file", b"x" * 10_000))
    with pytest.raises(ExportError):
        extract_tar_stream(stream, tmp_path / "dest", ExportLimits(max_bytes=1000))


def test_read_tar_file_reads_one_regular_file_within_the_cap() -> None:
    assert read_tar_file(_tar(("f", "file", b"hello"))) == b"hello"
    with pytest.raises(ExportError):
        read_tar_file(_tar(("f", "file", b"x" * 5000)), max_bytes=100)
    with pytest.raises(FileNotFoundError):
        read_tar_file(_tar(("p", "fifo", b"")))


def test_extract_tar_stream_copies_hard_links_inside_only(tmp_path: Path) -> None:
    stream = _tar(
        ("workspace/a.txt", "file", b"same"),
        ("workspace/b.txt", "hard", "workspace/a.txt"),
        ("workspace/c.txt", "hard", "/etc/passwd"),
        ("workspace/d.txt", "hard", "workspace/../../etc/passwd"),
    )
    dest = tmp_path / "dest"
    extract_tar_stream(stream, dest)
    assert (dest / "b.txt").read_bytes() == b"same"
    assert not (dest / "b.txt").samefile(dest / "a.txt")
    assert not (dest / "c.txt").exists() and not (dest / "d.txt").exists()
