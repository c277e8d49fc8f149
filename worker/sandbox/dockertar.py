"""The tars a Docker sandbox is filled from (``put_archive``): every entry owned by the
sandbox user, so nothing the container extracts belongs to root or to the host's user."""

from __future__ import annotations

import io
import tarfile
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO

from worker.sandbox.common import SANDBOX_GID, SANDBOX_UID


def _owned(info: tarfile.TarInfo) -> tarfile.TarInfo:
    info.uid, info.gid, info.uname, info.gname = SANDBOX_UID, SANDBOX_GID, "", ""
    return info


def tar_tree(source: Path) -> IO[bytes]:
    """The checkout as a tar owned by the sandbox user (symlinks kept as links), in a
    spooled file so a large checkout is not held in memory."""
    spool = tempfile.SpooledTemporaryFile(max_size=64 * 1024 * 1024)  # noqa: SIM115
    with tarfile.open(fileobj=spool, mode="w") as tf:
        tf.add(str(source), arcname=".", recursive=True, filter=_owned)
    spool.seek(0)
    return spool


def tar_paths(root: Path, names: Sequence[str]) -> IO[bytes]:
    """``names`` (paths relative to ``root``, folders whole) as a tar owned by the
    sandbox user, links kept as links, in a spooled file."""
    spool = tempfile.SpooledTemporaryFile(max_size=64 * 1024 * 1024)  # noqa: SIM115
    with tarfile.open(fileobj=spool, mode="w") as tf:
        for name in names:
            tf.add(str(root / name), arcname=name, recursive=True, filter=_owned)
    spool.seek(0)
    return spool


def tar_owned_dir(mode: int = 0o700, files: Mapping[str, str] | None = None) -> bytes:
    """A tar whose "." entry hands the folder it is extracted into to the sandbox user,
    with ``files`` in it."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tf:
        info = tarfile.TarInfo(".")
        info.type, info.mode = tarfile.DIRTYPE, mode
        tf.addfile(_owned(info))
        for name, text in (files or {}).items():
            data = text.encode()
            item = tarfile.TarInfo(name)
            item.size, item.mode = len(data), 0o644
            tf.addfile(_owned(item), io.BytesIO(data))
    return buf.getvalue()
