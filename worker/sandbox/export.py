"""Reading what a sandbox wrote, on the host, without trusting it.

Everything here treats the workspace as hostile: a file may be a FIFO (an open that
blocks forever), a device, a sparse file far larger than the tmpfs it sits in, a
symlink to the host's secrets, or a tree a million folders deep. So: regular files
only (checked on the open descriptor, opened with ``O_NOFOLLOW | O_NONBLOCK``),
symlinks recreated as links and never followed, and bounds on bytes, entries and
depth that raise :class:`ExportError` rather than read on.

Two sources, one set of rules: a host folder (bubblewrap's workspace, read while
none of the sandbox's processes runs) and a tar stream (the docker engine's
``get_archive`` of ``/workspace``).
"""

from __future__ import annotations

import os
import stat
import tarfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import IO, cast

from worker.sandbox.base import SandboxError

MAX_READ_BYTES = 32 * 1024 * 1024


class ExportError(SandboxError):
    """The workspace could not be read safely (too large, too deep, not a regular file)."""


@dataclass(frozen=True)
class ExportLimits:
    max_bytes: int = 256 * 1024 * 1024  # all regular files together
    max_entries: int = 200_000
    max_depth: int = 64


def read_regular_file(path: Path, max_bytes: int = MAX_READ_BYTES) -> bytes:
    """The bytes of ``path`` if its last component is a regular file (not a link, FIFO or
    device) of at most ``max_bytes``; raises otherwise, and never blocks on the open."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise FileNotFoundError(f"{path.name}: {exc.strerror}") from None
    try:
        return read_regular_fd(fd, path.name, max_bytes)
    finally:
        os.close(fd)


def read_regular_fd(fd: int, name: str, max_bytes: int = MAX_READ_BYTES) -> bytes:
    """The bytes of the open ``fd`` if it is a regular file of at most ``max_bytes``
    (checked on the open file, so nothing can be swapped in between); raises otherwise."""
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        raise FileNotFoundError(f"{name}: not a regular file")
    if info.st_size > max_bytes:
        raise ExportError(f"{name}: {info.st_size} bytes, over the {max_bytes} limit")
    return _read_fd(fd, max_bytes, name)


def _read_fd(fd: int, max_bytes: int, name: str) -> bytes:
    chunks: list[bytes] = []
    total = 0
    while True:
        chunk = os.read(fd, 1024 * 1024)
        if not chunk:
            return b"".join(chunks)
        total += len(chunk)
        if total > max_bytes:  # grew while read
            raise ExportError(f"{name}: over the {max_bytes} byte limit")
        chunks.append(chunk)


def export_host_tree(
    source: Path,
    dest: Path,
    limits: ExportLimits = ExportLimits(),
    *,
    skip_top: frozenset[str] = frozenset({".git"}),
) -> None:
    """Copy the regular files, folders and symlinks (as links) of ``source`` into
    ``dest``, skipping the top-level entries named in ``skip_top`` (by default ``.git``,
    the sandbox's own, untrusted) and anything that is not a file, folder or link."""
    budget = _Budget(limits)
    dest.mkdir(parents=True, exist_ok=True)
    stack: list[tuple[Path, Path, int]] = [(source, dest, 0)]
    while stack:
        src_dir, dst_dir, depth = stack.pop()
        if depth > limits.max_depth:
            raise ExportError(f"the workspace is nested deeper than {limits.max_depth} folders")
        with os.scandir(src_dir) as entries:
            for entry in entries:
                if depth == 0 and entry.name in skip_top:
                    continue
                budget.entry()
                target = dst_dir / entry.name
                mode = entry.stat(follow_symlinks=False).st_mode
                if stat.S_ISLNK(mode):
                    os.symlink(os.readlink(entry.path), target)
                elif stat.S_ISDIR(mode):
                    target.mkdir()
                    stack.append((Path(entry.path), target, depth + 1))
                elif stat.S_ISREG(mode):
                    data = read_regular_file(Path(entry.path), budget.left())
                    budget.spend(len(data))
                    target.write_bytes(data)
                    if mode & 0o111:
                        target.chmod(0o755)


def extract_tar_stream(
    chunks: Iterable[bytes],
    dest: Path,
    limits: ExportLimits = ExportLimits(),
    *,
    skip_top: frozenset[str] = frozenset({".git"}),
) -> None:
    """Unpack a tar stream of the workspace (its top folder stripped) into ``dest`` with
    the same rules as :func:`export_host_tree`: no member may leave ``dest``, links stay
    links, the top-level entries in ``skip_top`` and special files are skipped, bounds
    hold while the stream is read (never buffered whole)."""
    budget = _Budget(limits)
    dest.mkdir(parents=True, exist_ok=True)
    reader = _ChunkReader(iter(chunks), limits.max_bytes * 2 + 64 * 1024 * 1024)
    with tarfile.open(fileobj=cast("IO[bytes]", reader), mode="r|") as tf:
        for member in tf:
            rel = _member_path(member.name)
            if rel is None or rel.parts[0] in skip_top:
                continue
            if len(rel.parts) > limits.max_depth:
                raise ExportError(f"the workspace is nested deeper than {limits.max_depth} folders")
            budget.entry()
            target = dest.joinpath(*rel.parts)
            if not _parent_is_real_dir(dest, target):
                raise ExportError(f"{rel}: its folder is a link or missing in the export")
            if member.isdir():
                target.mkdir(exist_ok=True)
            elif member.issym():
                os.symlink(member.linkname, target)
            elif member.isreg():
                if member.size > budget.left():
                    raise ExportError(f"{rel}: the workspace is over {limits.max_bytes} bytes")
                fh = tf.extractfile(member)
                if fh is None:
                    continue
                data = fh.read(member.size)
                budget.spend(len(data))
                fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
                with os.fdopen(fd, "wb") as out:
                    out.write(data)
                if member.mode & 0o111:
                    target.chmod(0o755)
            elif member.islnk():
                # A second name of a file already exported: its own copy (a hard link
                # would tie the export to the sandbox's inode numbering, and git has none).
                source = _member_path(member.linkname)
                original = dest.joinpath(*source.parts) if source is not None else None
                if original is None or original.is_symlink() or not original.is_file():
                    continue
                data = read_regular_file(original, budget.left())
                budget.spend(len(data))
                fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
                with os.fdopen(fd, "wb") as out:
                    out.write(data)
            # FIFOs, devices: nothing a patch can carry; skipped


def _member_path(name: str) -> PurePosixPath | None:
    """The member's path below the archive's top folder ("workspace/a/b" -> "a/b"),
    or None for the top folder itself; refuses anything that climbs."""
    parts = [p for p in PurePosixPath(name).parts if p not in {"", "."}]
    if not parts or any(p == ".." for p in parts) or name.startswith("/"):
        return None
    rest = parts[1:]
    return PurePosixPath(*rest) if rest else None


def _parent_is_real_dir(root: Path, target: Path) -> bool:
    parent = target.parent
    while parent != root:
        if parent.is_symlink() or not parent.is_dir():
            return False
        parent = parent.parent
    return True


class _Budget:
    def __init__(self, limits: ExportLimits) -> None:
        self.limits = limits
        self.bytes = 0
        self.entries = 0

    def entry(self) -> None:
        self.entries += 1
        if self.entries > self.limits.max_entries:
            raise ExportError(f"the workspace has over {self.limits.max_entries} entries")

    def left(self) -> int:
        return self.limits.max_bytes - self.bytes

    def spend(self, n: int) -> None:
        self.bytes += n
        if self.bytes > self.limits.max_bytes:
            raise ExportError(f"the workspace is over {self.limits.max_bytes} bytes")


class _ChunkReader:
    """A file-like view of an iterator of byte chunks, refusing to read past ``cap``."""

    def __init__(self, chunks: Iterator[bytes], cap: int) -> None:
        self._chunks = chunks
        self._buf = bytearray()
        self._pos = 0
        self._read = 0
        self._cap = cap

    def read(self, size: int = -1) -> bytes:
        while size < 0 or len(self._buf) - self._pos < size:
            try:
                chunk = next(self._chunks)
            except StopIteration:
                break
            self._read += len(chunk)
            if self._read > self._cap:
                raise ExportError("the workspace archive is too large")
            if self._pos:  # drop what was read before growing, so copies stay linear
                del self._buf[: self._pos]
                self._pos = 0
            self._buf += chunk
        end = len(self._buf) if size < 0 else min(len(self._buf), self._pos + size)
        out = bytes(self._buf[self._pos : end])
        self._pos = end
        return out


def read_tar_file(chunks: Iterable[bytes], max_bytes: int = MAX_READ_BYTES) -> bytes:
    """The one regular file in a tar stream (the engine's ``get_archive`` of a path),
    read without buffering more than ``max_bytes`` of it."""
    reader = _ChunkReader(iter(chunks), max_bytes + 64 * 1024 * 1024)
    with tarfile.open(fileobj=cast("IO[bytes]", reader), mode="r|") as tf:
        member = tf.next()
        if member is None or not member.isreg():
            raise FileNotFoundError("not a regular file")
        if member.size > max_bytes:
            raise ExportError(f"{member.size} bytes, over the {max_bytes} limit")
        fh = tf.extractfile(member)
        if fh is None:
            raise FileNotFoundError("not a regular file")
        return fh.read(member.size)
