"""Base weights on disk: pulled once into the models volume, checked before use.

``ribbit model pull`` is the one step that reaches a hub (the public one, an internal
mirror via its endpoint) or imports a local directory. It writes the files into
``<weights dir>/<model id>/`` together with a manifest (``ribbit-weights.json``) of
every file's SHA-256, so workers and inference servers can run with the hub offline
(``HF_HUB_OFFLINE=1``) and a job can tell, cheaply and before the agent starts, whether
the weights are there.

What is verified:

- from a hub: every file against the hub's own record of it (the LFS SHA-256 for weight
  shards, the git blob id for small files), read back from disk after the download;
- from a directory: against that directory's manifest when it has one (a copy of another
  models volume), and in every case the copy is read back and compared with the source.

A pull writes into a staging folder next to the target and renames it into place, so a
half-finished pull never looks like weights.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from huggingface_hub.hf_api import RepoFile

MANIFEST = "ribbit-weights.json"
_CHUNK = 1 << 20
# owner/name as the hub spells it; no "..", no absolute paths: it becomes a folder name.
_MODEL_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,95}(/[A-Za-z0-9][A-Za-z0-9_.-]{0,95})?$")


class WeightsError(Exception):
    """Weights missing, incomplete or not what they claim to be; the message says which."""


@dataclass(frozen=True)
class WeightsManifest:
    model: str
    source: str
    revision: str | None
    files: dict[str, str] = field(default_factory=dict)  # relative path -> sha256
    sizes: dict[str, int] = field(default_factory=dict)

    @property
    def digest(self) -> str:
        """One SHA-256 for the whole set: what a model version records as its base."""
        h = hashlib.sha256()
        for path in sorted(self.files):
            h.update(f"{path}\0{self.files[path]}\n".encode())
        return h.hexdigest()

    def write(self, folder: Path) -> None:
        data = {**asdict(self), "digest": self.digest}
        (folder / MANIFEST).write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")

    @classmethod
    def read(cls, folder: Path) -> WeightsManifest:
        try:
            data = json.loads((folder / MANIFEST).read_text())
            return cls(
                model=str(data["model"]),
                source=str(data["source"]),
                revision=data.get("revision"),
                files={str(k): str(v) for k, v in data["files"].items()},
                sizes={str(k): int(v) for k, v in data["sizes"].items()},
            )
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            raise WeightsError(f"{folder / MANIFEST} is missing or unreadable: {exc}") from None


def weights_path(root: Path, model: str) -> Path:
    """Where ``model``'s weights live under ``root``."""
    if not _MODEL_ID.fullmatch(model) or ".." in model:
        raise WeightsError(f"{model!r} is not a model id (owner/name)")
    return root / model


def pull_command(model: str) -> str:
    """The exact command an operator runs to get ``model`` onto this host."""
    return f"ribbit model pull {model}"


def find_weights(folder: Path) -> WeightsManifest:
    """The manifest of complete weights in ``folder`` (files present, sizes as recorded),
    without hashing: cheap enough for every job. :func:`verify_weights` hashes."""
    manifest = WeightsManifest.read(folder)
    for rel, size in manifest.sizes.items():
        path = folder / rel
        if not path.is_file() or path.stat().st_size != size:
            raise WeightsError(f"{path} is missing or has the wrong size")
    if "config.json" not in manifest.files:
        raise WeightsError(f"{folder} has no config.json: not a model folder")
    return manifest


def folder_digest(folder: Path) -> str:
    """The digest a manifest of ``folder`` would have (an adapter, unpulled weights)."""
    files = {rel: sha256_file(path) for rel, path in _files(folder)}
    return WeightsManifest(model="", source="", revision=None, files=files).digest


def base_digest(model: str, root: Path) -> str | None:
    """The digest of the base weights ``model`` names on this host, if they are here."""
    folder = Path(model)
    if not (folder.is_absolute() or folder.is_dir()):
        try:
            folder = weights_path(root, model)
        except WeightsError:
            return None
    if (folder / MANIFEST).is_file():
        return WeightsManifest.read(folder).digest
    return folder_digest(folder) if (folder / "config.json").is_file() else None


def verify_weights(folder: Path) -> WeightsManifest:
    """Re-hash every file in ``folder`` against its manifest."""
    manifest = find_weights(folder)
    for rel, expected in manifest.files.items():
        if sha256_file(folder / rel) != expected:
            raise WeightsError(f"{folder / rel}: SHA-256 differs from {MANIFEST}")
    return manifest


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(_CHUNK):
            h.update(chunk)
    return h.hexdigest()


def git_blob_id(path: Path) -> str:
    """git's object id of a file: how a hub identifies files not stored in LFS."""
    h = hashlib.sha1(usedforsecurity=False)
    h.update(f"blob {path.stat().st_size}\0".encode())
    with path.open("rb") as f:
        while chunk := f.read(_CHUNK):
            h.update(chunk)
    return h.hexdigest()


def _files(folder: Path) -> Iterator[tuple[str, Path]]:
    for path in sorted(folder.rglob("*")):
        rel = path.relative_to(folder).as_posix()
        if rel == MANIFEST or rel.startswith(".cache/") or not path.is_file():
            continue
        yield rel, path


def pull_from_directory(source: Path, root: Path, model: str) -> WeightsManifest:
    """Import ``source`` (a model folder, e.g. a snapshot copied in from elsewhere)."""
    if not (source / "config.json").is_file():
        raise WeightsError(f"{source} has no config.json: not a model folder")
    expected = WeightsManifest.read(source).files if (source / MANIFEST).exists() else None
    target = weights_path(root, model)
    with _staging(target) as staging:
        files: dict[str, str] = {}
        sizes: dict[str, int] = {}
        for rel, path in _files(source):
            out = staging / rel
            out.parent.mkdir(parents=True, exist_ok=True)
            h = hashlib.sha256()
            with path.open("rb") as src, out.open("wb") as dst:
                while chunk := src.read(_CHUNK):
                    h.update(chunk)
                    dst.write(chunk)
            files[rel], sizes[rel] = h.hexdigest(), out.stat().st_size
            if expected is not None and expected.get(rel) != files[rel]:
                raise WeightsError(f"{path}: SHA-256 differs from the source's {MANIFEST}")
        if expected is not None and set(expected) != set(files):
            missing = sorted(set(expected) - set(files))
            raise WeightsError(f"{source} lacks files its {MANIFEST} lists: {missing[:5]}")
        manifest = WeightsManifest(
            model=model, source=str(source.resolve()), revision=None, files=files, sizes=sizes
        )
        manifest.write(staging)
        verify_weights(staging)  # read back: what landed on the volume is what was read
    return manifest


def pull_from_hub(
    model: str, root: Path, *, revision: str | None = None, endpoint: str | None = None
) -> tuple[WeightsManifest, bool]:
    """Download ``model`` from a hub (``endpoint``: an internal mirror) and check every file
    against the hub's record of it; also whether anything was downloaded. Weights already in
    place at the hub's commit, every file re-hashed and matching its record, are kept as
    they are (Helm runs the pull before every upgrade)."""
    from huggingface_hub import HfApi, constants, snapshot_download
    from huggingface_hub.hf_api import RepoFile

    if constants.HF_HUB_OFFLINE:
        raise WeightsError(
            "HF_HUB_OFFLINE is set in this environment; pull where the hub (or mirror) is "
            f"reachable: HF_HUB_OFFLINE=0 {pull_command(model)}"
        )
    source = endpoint or constants.ENDPOINT
    target = weights_path(root, model)
    try:
        api = HfApi(endpoint=endpoint)
        sha = api.repo_info(model, revision=revision).sha
        if sha is None:
            raise WeightsError(f"{source} gave no commit for {model}")
        tree = {
            f.path: f
            for f in api.list_repo_tree(model, revision=sha, recursive=True)
            if isinstance(f, RepoFile)
        }
    except WeightsError:
        raise
    except Exception as exc:  # the hub client's error types change between its versions
        raise WeightsError(f"cannot list {model} at {source}: {exc}") from exc
    for rel in tree:
        # A mirror is trusted to serve bytes, not to choose where they are written.
        parts = PurePosixPath(rel).parts
        if not parts or rel.startswith("/") or ".." in parts or "\\" in rel:
            raise WeightsError(f"{source} lists a file outside the model folder: {rel!r}")
    if (present := _pulled_already(target, model, sha, tree)) is not None:
        return present, False
    with _staging(target) as staging:
        try:
            snapshot_download(model, revision=sha, endpoint=endpoint, local_dir=staging)
        except Exception as exc:
            raise WeightsError(f"cannot download {model} from {source}: {exc}") from exc
        files: dict[str, str] = {}
        sizes: dict[str, int] = {}
        for rel, info in tree.items():
            path = staging / rel
            if not path.is_file():
                raise WeightsError(f"{rel} was listed by the hub but not downloaded")
            digest = sha256_file(path)
            ok = (
                digest == info.lfs.sha256
                if info.lfs is not None
                else (git_blob_id(path) == info.blob_id)
            )
            if not ok:
                raise WeightsError(f"{rel}: checksum differs from the hub's record")
            files[rel], sizes[rel] = digest, path.stat().st_size
        manifest = WeightsManifest(
            model=model, source=source, revision=sha, files=files, sizes=sizes
        )
        shutil.rmtree(staging / ".cache", ignore_errors=True)  # the hub client's own notes
        manifest.write(staging)
    return manifest, True


def _pulled_already(
    target: Path, model: str, sha: str, tree: dict[str, RepoFile]
) -> WeightsManifest | None:
    """The manifest of ``target`` if it holds exactly the hub's files at commit ``sha``,
    each re-read from disk and matching the hub's record; else None (pull again)."""
    if not (target / MANIFEST).is_file():
        return None
    try:
        manifest = verify_weights(target)
    except WeightsError:
        return None
    if manifest.model != model or manifest.revision != sha or set(manifest.files) != set(tree):
        return None
    for rel, info in tree.items():
        if info.lfs is not None:
            if manifest.files[rel] != info.lfs.sha256:
                return None
        elif git_blob_id(target / rel) != info.blob_id:
            return None
    return manifest


class _staging:
    """A folder beside ``target`` that becomes ``target`` only if the block succeeds."""

    def __init__(self, target: Path) -> None:
        self.target = target

    def __enter__(self) -> Path:
        self.target.parent.mkdir(parents=True, exist_ok=True)
        self.path = Path(tempfile.mkdtemp(prefix=".pull-", dir=self.target.parent))
        self.path.chmod(0o755)  # inference servers may run as another user and only read
        return self.path

    def __exit__(self, exc_type: object, *_: object) -> None:
        if exc_type is not None:
            shutil.rmtree(self.path, ignore_errors=True)
            return
        old = self.target.with_name(self.target.name + ".old")
        shutil.rmtree(old, ignore_errors=True)
        if self.target.exists():
            os.replace(self.target, old)
        os.replace(self.path, self.target)
        shutil.rmtree(old, ignore_errors=True)
