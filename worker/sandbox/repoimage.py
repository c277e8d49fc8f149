"""A repository's own sandbox image: ``.ribbit.yml`` ``image``, or
``.devcontainer/devcontainer.json`` (an ``image``, or a Dockerfile to build).

Only on the docker backend, and only within what the deployment allows
(``SandboxSettings.repo_images``; the sandbox image itself always): a repository names
an image, it never brings one the deployment did not accept. A Dockerfile is built
through the engine (asked for no network: see SandboxSettings.repo_image_builds), from a context tar Ribbit makes itself (links kept
as links, nothing above the checkout), and every image it reads (``FROM``,
``COPY --from``, ``RUN --mount=from=``) must be an allowed image or an earlier stage:
a build must not fetch what the allow-list refused. The result is tagged per
repository and content hash, so the next job with the same Dockerfile and context
reuses it.

Whatever the repository names must still meet the sandbox's contract (what the docker
backend, the setup step and the agent's in-sandbox tool runner use): a uid 1000 user,
``/workspace``, ``/usr/bin/python3`` (3.6 or later, with ``venv``), bash and the
coreutils the exec wrapper runs. An image that does not is refused, saying what it
lacks. On bubblewrap no image applies: the job says so and runs on the worker's own
toolchains.
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import os
import re
import shlex
import tarfile
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from bot.repo_config import CONFIG_PATH, RepoConfig
from bot.settings import SandboxSettings
from worker.sandbox.base import SandboxError
from worker.sandbox.common import LABEL, SANDBOX_GID, SANDBOX_UID

log = logging.getLogger(__name__)

DEVCONTAINER_PATHS = (".devcontainer/devcontainer.json", ".devcontainer.json")
_DEVCONTAINER_MAX_BYTES = 256 * 1024
_CONTEXT_MAX_BYTES = 512 * 1024 * 1024
_IMAGE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/:@-]{0,299}$")
_BUILD_ARG = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,99}$")
# Run in a throwaway container of the candidate image, as the sandbox runs it; prints
# what is missing (nothing when the image will do).
_CONTRACT_PROBE = """\
miss=""
[ -x /usr/bin/python3 ] || miss="$miss /usr/bin/python3"
if [ -x /usr/bin/python3 ]; then
  /usr/bin/python3 -I -c 'import sys, venv, subprocess, json; \
sys.exit(0 if sys.version_info >= (3, 6) else 1)' >/dev/null 2>&1 \
    || miss="$miss python3>=3.6-with-venv"
fi
for tool in bash timeout realpath base64 mkdir rm cat; do
  command -v "$tool" >/dev/null 2>&1 || miss="$miss $tool"
done
grep -q '^[^:]*:[^:]*:1000:' /etc/passwd 2>/dev/null || miss="$miss uid-1000-user"
[ -d /workspace ] || miss="$miss /workspace"
echo "RIBBIT-MISSING:$miss"
"""
_MISSING_MARK = "RIBBIT-MISSING:"


class RepoImageError(Exception):
    """The repository's image was refused or could not be built; the message is meant
    for the issue comment."""


@dataclass(frozen=True)
class ImageRequest:
    """The environment a repository names for itself."""

    source: str  # the file that named it
    image: str | None = None
    dockerfile: str | None = None  # relative to the checkout
    context: str | None = None  # relative to the checkout
    build_args: tuple[tuple[str, str], ...] = ()

    def describe(self) -> str:
        # Paths are the repository's text: no backticks to break out of the code span.
        name = (self.image or self.dockerfile or "").replace("`", "'")[:200]
        what = f"image `{name}`" if self.image else f"Dockerfile `{name}`"
        return f"{what} (from `{self.source}`)"


@dataclass(frozen=True)
class ImageChoice:
    """The image a job's sandboxes run, and why."""

    image: str
    requested: ImageRequest | None = None
    built: bool = False  # built for this job (False: reused, named, or the default)
    note: str | None = None  # said on the issue and in the PR: why the request did not apply

    @property
    def applied(self) -> bool:
        return self.requested is not None and self.note is None

    def to_dict(self) -> dict[str, object]:
        return {
            "image": self.image,
            "requested": self.requested.describe() if self.requested else None,
            "built": self.built,
            "note": self.note,
        }


# -- what the repository asks for ------------------------------------------------------


def image_request(config: RepoConfig, checkout: Path) -> ImageRequest | None:
    """``.ribbit.yml``'s ``image`` first, else the checkout's devcontainer.json."""
    if config.image:
        return ImageRequest(source=CONFIG_PATH, image=config.image.strip())
    for rel in DEVCONTAINER_PATHS:
        path = checkout / rel
        if path.is_file() and not path.is_symlink():
            return devcontainer_request(path, checkout, rel)
    return None


def devcontainer_request(path: Path, checkout: Path, rel: str) -> ImageRequest | None:
    """The image or build a devcontainer.json names (None: neither, e.g. compose only)."""
    raw = path.read_bytes()[: _DEVCONTAINER_MAX_BYTES + 1]
    if len(raw) > _DEVCONTAINER_MAX_BYTES:
        raise RepoImageError(f"`{rel}` is larger than {_DEVCONTAINER_MAX_BYTES} bytes")
    try:
        data = json.loads(strip_jsonc(raw.decode("utf-8")))
    except (UnicodeDecodeError, ValueError) as exc:
        raise RepoImageError(f"`{rel}` is not valid JSON (with comments): {exc}") from None
    if not isinstance(data, dict):
        raise RepoImageError(f"`{rel}` must be an object")
    build = data.get("build")
    build = build if isinstance(build, dict) else {}
    dockerfile = build.get("dockerfile", data.get("dockerFile"))
    context = build.get("context", data.get("context", "."))
    folder = Path(rel).parent
    if isinstance(dockerfile, str) and dockerfile.strip():
        if not isinstance(context, str):
            raise RepoImageError(f"`{rel}`: build.context must be a string")
        args = build.get("args") or {}
        if not isinstance(args, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in args.items()
        ):
            raise RepoImageError(f"`{rel}`: build.args must map names to strings")
        for name in args:
            if not _BUILD_ARG.match(name):
                raise RepoImageError(f"`{rel}`: build arg `{name[:50]}` is not a valid name")
        return ImageRequest(
            source=rel,
            dockerfile=_inside(checkout, folder / dockerfile, rel),
            context=_inside(checkout, folder / context, rel),
            # Taken literally: ${localEnv:...} is never expanded (the worker's
            # environment is not the repository's to read).
            build_args=tuple(sorted(args.items())),
        )
    image = data.get("image")
    if isinstance(image, str) and image.strip():
        return ImageRequest(source=rel, image=image.strip())
    return None


def _inside(checkout: Path, rel: Path, source: str) -> str:
    """``rel`` normalised, refused when it leaves the checkout (also through a link)."""
    root = checkout.resolve()
    target = (checkout / rel).resolve()
    if target != root and root not in target.parents:
        raise RepoImageError(f"`{source}` names `{rel}`, outside the repository")
    return target.relative_to(root).as_posix() or "."


def strip_jsonc(text: str) -> str:
    """devcontainer.json is JSON with comments and trailing commas: drop both, leaving
    strings (which may hold ``//``) alone."""
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append(text[i : j + 1])
            i = j + 1
        elif text.startswith("//", i):
            end = text.find("\n", i)
            i = n if end < 0 else end
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            i = n if end < 0 else end + 2
        else:
            out.append(ch)
            i += 1
    return re.sub(r",(\s*[}\]])", r"\1", "".join(out))


# -- what the deployment allows ----------------------------------------------------------


def image_allowed(name: str, settings: SandboxSettings) -> bool:
    """The sandbox image, or an entry of ``repo_images`` (``*`` at the end: a prefix).
    Compared as written: no registry or tag is filled in, so ``evil/python`` never
    matches an entry ``python``."""
    if name == settings.image:
        return True
    for entry in settings.repo_images:
        if entry.endswith("*"):
            if name.startswith(entry[:-1]) and len(name) > len(entry) - 1:
                return True
        elif name == entry:
            return True
    return False


def dockerfile_images(text: str) -> list[str]:
    """Every image a Dockerfile reads that is not one of its own stages: ``FROM``,
    ``COPY --from=`` and ``RUN --mount=...,from=``. A reference with a variable in it is
    returned as written (and then refused: its value is only known inside the build)."""
    stages: set[str] = set()
    found: list[str] = []

    def note(ref: str) -> None:
        if ref.lower() not in stages and not ref.isdigit() and ref not in found:
            found.append(ref)

    for line in _logical_lines(text):
        try:
            words = shlex.split(line, comments=False, posix=True)
        except ValueError:
            raise RepoImageError(f"Dockerfile line cannot be parsed: {line[:120]}") from None
        if not words:
            continue
        instruction = words[0].upper()
        flags = [w for w in words[1:] if w.startswith("--")]
        rest = [w for w in words[1:] if not w.startswith("--")]
        if instruction == "FROM" and rest:
            note(rest[0])
            if len(rest) >= 3 and rest[1].upper() == "AS":
                stages.add(rest[2].lower())
        for flag in flags:
            name, _, value = flag[2:].partition("=")
            if name.lower() == "from" and value:
                note(value)
            elif name.lower() == "mount":
                for part in value.split(","):
                    key, _, val = part.partition("=")
                    if key.strip().lower() == "from" and val:
                        note(val.strip())
    return found


def _logical_lines(text: str) -> list[str]:
    lines: list[str] = []
    current = ""
    for raw in text.splitlines():
        stripped = raw.strip()
        if not current and (not stripped or stripped.startswith("#")):
            continue
        if stripped.startswith("#") and current:
            continue  # a comment inside a continued instruction
        if stripped.endswith("\\"):
            current += stripped[:-1] + " "
            continue
        lines.append(current + stripped)
        current = ""
    if current.strip():
        lines.append(current)
    return lines


# -- choosing, building and checking -------------------------------------------------------


def choose_image(
    settings: SandboxSettings,
    backend: str,
    config: RepoConfig,
    checkout: Path,
    *,
    repo: str,
    client: Any | None = None,
) -> ImageChoice:
    """The image this job's sandboxes run. Raises RepoImageError (for the issue) when
    the repository names one the deployment does not allow, that does not build, or
    that does not meet the sandbox's contract."""
    request = image_request(config, checkout)
    if request is None:
        return ImageChoice(image=settings.image)
    if backend != "docker":
        return ImageChoice(
            image=settings.image,
            requested=request,
            note=f"The repository names {request.describe()}, but this worker runs "
            f"sandboxes with bubblewrap, where no image applies: the job runs with the "
            f"worker's own toolchains instead.",
        )
    if request.image is not None:
        if not _IMAGE_NAME.match(request.image):
            raise RepoImageError(f"{request.describe()}: not an image name")
        if not image_allowed(request.image, settings):
            raise RepoImageError(
                f"The repository names {request.describe()}, which this deployment does "
                f"not allow (allowed: {_allowed_list(settings)}; an admin adds images with "
                f"RIBBIT_SANDBOX__REPO_IMAGES)."
            )
    elif not settings.repo_image_builds:
        raise RepoImageError(
            f"The repository asks for {request.describe()}, but this deployment does not "
            f"build repository images (RIBBIT_SANDBOX__REPO_IMAGE_BUILDS=false)."
        )
    from worker.sandbox.docker import docker_client

    own = client is None
    engine = client or docker_client(settings, timeout=max(60, settings.setup_timeout_s))
    try:
        if request.image is not None:
            image, built = _local_image(engine, request.image, request), False
        else:
            image, built = _build(engine, settings, request, checkout, repo=repo)
        check_contract(engine, image, request)
    finally:
        if own:
            engine.close()
    return ImageChoice(image=image, requested=request, built=built)


def _allowed_list(settings: SandboxSettings) -> str:
    return ", ".join(f"`{name}`" for name in [settings.image, *settings.repo_images])


def _local_image(client: Any, name: str, request: ImageRequest) -> str:
    import docker.errors

    try:
        client.images.get(name)
    except docker.errors.ImageNotFound:
        raise RepoImageError(
            f"{request.describe()} is allowed but not on this worker: an admin pulls it "
            f"(workers never pull a repository's image themselves)."
        ) from None
    except docker.errors.DockerException as exc:
        raise SandboxError(f"cannot look up image {name}: {exc}") from exc
    return name


def build_tag(repo: str, content: str) -> str:
    """``ribbit-repo-<repo digest>:<content digest>``: one name per repository, one tag
    per Dockerfile and context."""
    return f"ribbit-repo-{hashlib.sha256(repo.encode()).hexdigest()[:16]}:{content[:24]}"


def _build(
    client: Any,
    settings: SandboxSettings,
    request: ImageRequest,
    checkout: Path,
    *,
    repo: str,
) -> tuple[str, bool]:
    import docker.errors

    assert request.dockerfile is not None and request.context is not None
    dockerfile = (checkout / request.dockerfile).resolve()
    if not dockerfile.is_file():
        raise RepoImageError(f"{request.describe()}: the Dockerfile is not in the repository")
    text = dockerfile.read_text(errors="replace")
    refused = [ref for ref in dockerfile_images(text) if not image_allowed(ref, settings)]
    if refused:
        names = ", ".join(f"`{r}`" for r in refused)
        raise RepoImageError(
            f"{request.describe()} builds on {names}, which this deployment does not allow "
            f"(allowed: {_allowed_list(settings)}; an admin adds images with "
            f"RIBBIT_SANDBOX__REPO_IMAGES)."
        )
    context_dir = checkout / request.context
    dockerfile_rel = dockerfile.relative_to(checkout.resolve()).as_posix()
    with ContextTar(context_dir, checkout, dockerfile_rel) as (tar, digest):
        h = hashlib.sha256(digest.encode())
        # The bases' ids: a rebuilt base image makes a new tag.
        for ref in dockerfile_images(text):
            h.update(f"\n{ref}={_image_id(client, ref)}".encode())
        h.update(json.dumps(request.build_args).encode())
        tag = build_tag(repo, h.hexdigest())
        try:
            client.images.get(tag)
            return tag, False
        except docker.errors.ImageNotFound:
            pass
        log.info("building %s for %s", tag, request.describe())
        labels = {f"{LABEL}.repo-image": repo[:200]}
        try:
            if _is_podman(client):
                _podman_build(client, tar, tag, dict(request.build_args), labels)
            else:
                client.images.build(
                    fileobj=tar,
                    custom_context=True,
                    dockerfile=_IN_TAR_DOCKERFILE,
                    tag=tag,
                    network_mode="none",
                    pull=False,
                    rm=True,
                    forcerm=True,
                    buildargs=dict(request.build_args),
                    labels=labels,
                    timeout=settings.setup_timeout_s,
                )
        except docker.errors.BuildError as exc:
            tail = "\n".join(
                str(chunk.get("stream") or chunk.get("error") or "").rstrip()
                for chunk in list(exc.build_log)[-30:]
                if isinstance(chunk, dict)
            ).strip()
            raise RepoImageError(
                f"{request.describe()} did not build (no network during the build): "
                f"{exc.msg}\n\n```\n{tail[-3000:].replace('```', '`​``')}\n```"
            ) from None
        except docker.errors.DockerException as exc:
            raise SandboxError(f"could not build {request.describe()}: {exc}") from exc
    return tag, True


def _is_podman(client: Any) -> bool:
    try:
        components = client.version().get("Components") or []
    except Exception:  # an engine that cannot say is treated as Docker
        return False
    return any("podman" in str(c.get("Name", "")).lower() for c in components)


def _podman_build(
    client: Any, tar: IO[bytes], tag: str, args: dict[str, str], labels: dict[str, str]
) -> None:
    """Podman's Docker-compatible build ignores ``networkmode`` (checked on Podman 4.3:
    a RUN step reached the internet); its own endpoint honours it."""
    import docker.errors

    api = client.api
    params = {
        "t": tag,
        "dockerfile": _IN_TAR_DOCKERFILE,
        "networkmode": "none",
        "pull": "false",
        "rm": "true",
        "forcerm": "true",
        "buildargs": json.dumps(args),
        "labels": json.dumps(labels),
    }
    response = api._post(
        api.base_url + "/v4.0.0/libpod/build",
        params=params,
        data=tar,
        headers={"Content-Type": "application/x-tar"},
        stream=True,
        timeout=None,
    )
    log_lines: list[dict[str, Any]] = []
    for line in response.iter_lines():
        if not line:
            continue
        try:
            chunk = json.loads(line)
        except ValueError:
            continue
        if isinstance(chunk, dict):
            log_lines.append(chunk)
    if response.status_code >= 400 or any("error" in c for c in log_lines):
        message = next(
            (str(c["error"]) for c in log_lines if "error" in c), f"HTTP {response.status_code}"
        )
        raise docker.errors.BuildError(message.strip()[:500], iter(log_lines))
    client.images.get(tag)  # raises when nothing was tagged


def _image_id(client: Any, name: str) -> str:
    import docker.errors

    try:
        return str(client.images.get(name).id)
    except docker.errors.DockerException:
        return "missing"


# The Dockerfile goes into the context tar under a fixed name, whatever its path: a
# Dockerfile outside the context (devcontainer's usual ../Dockerfile layout) works too.
_IN_TAR_DOCKERFILE = ".ribbit.Dockerfile"


class ContextTar:
    """The build context as a deterministic tar (sorted, zeroed owners and times, links
    kept as links, ``.git`` left out) with the Dockerfile added as
    ``.ribbit.Dockerfile``, and the tar's sha256."""

    def __init__(self, context: Path, checkout: Path, dockerfile_rel: str) -> None:
        self._context = context
        self._checkout = checkout
        self._dockerfile = dockerfile_rel
        self._spool: IO[bytes] | None = None

    def __enter__(self) -> tuple[IO[bytes], str]:
        spool = tempfile.SpooledTemporaryFile(max_size=64 * 1024 * 1024)
        self._spool = spool
        total = 0
        with tarfile.open(fileobj=spool, mode="w", format=tarfile.PAX_FORMAT) as tf:
            for path in _walk(self._context):
                rel = path.relative_to(self._context).as_posix()
                info = tf.gettarinfo(str(path), arcname=rel)
                total += info.size
                if total > _CONTEXT_MAX_BYTES:
                    raise RepoImageError(
                        f"the build context is larger than {_CONTEXT_MAX_BYTES >> 20} MB"
                    )
                _normalise(info)
                if info.isreg():
                    with path.open("rb") as fh:
                        tf.addfile(info, fh)
                elif info.isdir() or info.issym():
                    tf.addfile(info)
            data = (self._checkout / self._dockerfile).read_bytes()
            info = _normalise(tarfile.TarInfo(_IN_TAR_DOCKERFILE))
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
        spool.seek(0)
        h = hashlib.sha256()
        for chunk in iter(lambda: spool.read(1 << 20), b""):
            h.update(chunk)
        spool.seek(0)
        return spool, h.hexdigest()

    def __exit__(self, *exc: object) -> None:
        if self._spool is not None:
            self._spool.close()


def _walk(root: Path) -> list[Path]:
    found: list[Path] = []
    for dirpath, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d != ".git")
        here = Path(dirpath)
        # Links to folders are listed among dirs by os.walk but not followed: keep them
        # as links.
        found += [here / d for d in dirs]
        found += [here / f for f in sorted(files) if f != ".git"]
    return sorted(found)


def _normalise(info: tarfile.TarInfo) -> tarfile.TarInfo:
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    info.mtime = 0
    info.mode = (info.mode & 0o755) | (0o755 if info.isdir() else 0)
    return info


_checked: dict[str, str] = {}
_checked_lock = threading.Lock()


def check_contract(client: Any, image: str, request: ImageRequest | None = None) -> None:
    """Refuse (RepoImageError) an image the sandbox cannot run in; each image id is
    probed once per worker process."""
    import docker.errors

    try:
        image_id = str(client.images.get(image).id)
    except docker.errors.DockerException as exc:
        raise SandboxError(f"cannot look up image {image}: {exc}") from exc
    with _checked_lock:
        missing = _checked.get(image_id)
    if missing is None:
        missing = _probe(client, image)
        with _checked_lock:
            _checked[image_id] = missing
    if missing:
        what = request.describe() if request else f"image `{image}`"
        raise RepoImageError(
            f"{what} cannot run Ribbit's sandbox: it lacks {missing}. A repository image "
            f"needs a uid 1000 user, a /workspace folder, /usr/bin/python3 (3.6 or later, "
            f"with venv: the setup step and the agent's tools run on it), bash and coreutils "
            f"(timeout, realpath, base64). Build it FROM the sandbox image to get them all."
        )


def _probe(client: Any, image: str) -> str:
    import docker.errors

    try:
        output = client.containers.run(
            image,
            ["/bin/sh", "-c", _CONTRACT_PROBE],
            entrypoint=[],
            user=f"{SANDBOX_UID}:{SANDBOX_GID}",
            network_mode="none",
            read_only=True,
            cap_drop=["ALL"],
            security_opt=["no-new-privileges"],
            mem_limit="256m",
            pids_limit=64,
            labels={LABEL: "1"},
            remove=True,
            stdout=True,
            stderr=True,
        )
    except docker.errors.ContainerError as exc:
        return f"a working /bin/sh (the probe exited {exc.exit_status})"
    except docker.errors.APIError as exc:
        return f"a working /bin/sh ({str(exc)[:200]})"
    text = output.decode(errors="replace") if isinstance(output, bytes) else str(output)
    for line in text.splitlines():
        if line.startswith(_MISSING_MARK):
            return ", ".join(line[len(_MISSING_MARK) :].split())
    return "a working /bin/sh (the probe printed nothing)"
