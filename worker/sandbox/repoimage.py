"""A repository's own sandbox image: ``.ribbit.yml`` ``image``, or
``.devcontainer/devcontainer.json`` (an ``image``, or a Dockerfile to build).

Only on the docker backend, and only within what the deployment allows
(``SandboxSettings.repo_images``; the sandbox image itself always): a repository names
an image, it never brings one the deployment did not accept. A Dockerfile is built step
by step in a container of its base image with no network (``DockerfileRun``: the
engines' own builds do not all honour "no network"), copying only from the build
context (links kept as links, nothing above it), on an allowed base image only. The
result is tagged per repository and content hash, so the next job with the same
Dockerfile and context reuses it.

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

from bot.store.records import ImageRecord
from worker.repo_config import CONFIG_PATH, RepoConfig
from worker.sandbox.base import SandboxError
from worker.sandbox.common import LABEL, SANDBOX_GID, SANDBOX_UID
from worker.settings import SandboxSettings

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

    def to_record(self) -> ImageRecord:
        requested = self.requested.describe() if self.requested else None
        return ImageRecord(self.image, requested, self.built, self.note)

    def to_dict(self) -> dict[str, object]:
        return self.to_record().to_json()


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
            if not _BUILD_ARG.fullmatch(name):
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
    config: RepoConfig,
    checkout: Path,
    *,
    repo: str,
    backend: str | None = None,
    client: Any | None = None,
) -> ImageChoice:
    """The image this job's sandboxes run. Raises RepoImageError (for the issue) when
    the repository names one the deployment does not allow, that does not build, or
    that does not meet the sandbox's contract. ``backend``: the resolved one (None:
    resolved here, only when the repository names an image)."""
    request = image_request(config, checkout)
    if request is None:
        return ImageChoice(image=settings.image)
    if backend is None:
        from worker.sandbox import resolve_backend

        backend = resolve_backend(settings)
    if backend != "docker":
        return ImageChoice(
            image=settings.image,
            requested=request,
            note=f"The repository names {request.describe()}, but this worker runs "
            f"sandboxes with bubblewrap, where no image applies: the job runs with the "
            f"worker's own toolchains instead.",
        )
    if request.image is not None:
        if not _IMAGE_NAME.fullmatch(request.image):
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
    with ContextTar(context_dir, checkout, dockerfile_rel) as (_tar, digest):
        h = hashlib.sha256(f"{_BUILDER_VERSION}:{digest}".encode())
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
    steps = parse_dockerfile(text)
    try:
        DockerfileRun(client, settings, steps, context_dir, dict(request.build_args)).build(
            tag, labels={f"{LABEL}.repo-image": repo[:200]}
        )
    except BuildFailed as exc:
        raise RepoImageError(
            f"{request.describe()} did not build (its RUN steps have no network): {exc}"
            f"\n\n```\n{exc.output[-3000:].replace('```', '`​``')}\n```"
        ) from None
    except docker.errors.DockerException as exc:
        raise SandboxError(f"could not build {request.describe()}: {exc}") from exc
    return tag, True


# -- the build ------------------------------------------------------------------------
#
# Not the engine's build: Podman's (4.3, through either API) runs RUN steps in the
# host's network namespace whatever networkmode says. Ribbit runs the steps itself in
# a container with network_mode="none" (which every engine honours, as the sandbox
# relies on) and commits it. The Dockerfile subset a devcontainer needs: one FROM, RUN,
# COPY/ADD of local files, ENV, ARG, WORKDIR, USER, CMD, ENTRYPOINT; LABEL, EXPOSE,
# VOLUME, SHELL and HEALTHCHECK are accepted and ignored; anything else is refused.

# Part of every built image's tag: bump it when what DockerfileRun makes of a Dockerfile
# changes, so no job reuses an image built the old way.
_BUILDER_VERSION = 2
_IGNORED = frozenset({"LABEL", "EXPOSE", "VOLUME", "SHELL", "HEALTHCHECK", "STOPSIGNAL"})
# Kept in the image's config as written (the sandbox overrides both; a devcontainer
# user's own tools may not).
_CONFIG = frozenset({"CMD", "ENTRYPOINT"})
_KEPT = frozenset({"ENV", "ARG", "WORKDIR", "USER"}) | _CONFIG
_BUILD_INIT = "trap 'exit 0' TERM; while :; do sleep 3600 & wait $!; done"
_STEP_OUTPUT = 64 * 1024


class BuildFailed(Exception):
    def __init__(self, message: str, output: str = "") -> None:
        super().__init__(message)
        self.output = output


@dataclass(frozen=True)
class Step:
    instruction: str
    args: str  # the rest of the line, as written


def parse_dockerfile(text: str) -> list[Step]:
    """The Dockerfile's instructions, refused (RepoImageError) when it uses what Ribbit
    does not build: more than one stage, ``--from``/``--mount`` flags, heredocs."""
    steps: list[Step] = []
    for line in _logical_lines(text):
        head, _, rest = line.partition(" ")
        instruction = head.upper()
        rest = rest.strip()
        if instruction == "FROM":
            if any(s.instruction == "FROM" for s in steps):
                raise RepoImageError("multi-stage Dockerfiles are not built (one FROM only)")
        elif instruction in ("RUN", "COPY", "ADD"):
            if re.search(r"(^|\s)--(from|mount|network|security)\b", rest):
                raise RepoImageError(f"`{instruction} {rest[:80]}`: that flag is not supported")
            if instruction == "RUN" and "<<" in rest.split(" ", 1)[0]:
                raise RepoImageError("heredoc RUN steps are not supported")
        elif instruction not in _KEPT | _IGNORED:
            raise RepoImageError(f"unsupported Dockerfile instruction `{head[:40]}`")
        steps.append(Step(instruction, rest))
    if not steps or steps[0].instruction not in ("FROM", "ARG"):
        raise RepoImageError("the Dockerfile must start with FROM")
    if not any(s.instruction == "FROM" for s in steps):
        raise RepoImageError("the Dockerfile has no FROM")
    return steps


class DockerfileRun:
    """One build: a container of the base image with no network, the steps run in it
    one by one, then committed as the tag."""

    def __init__(
        self,
        client: Any,
        settings: SandboxSettings,
        steps: list[Step],
        context: Path,
        build_args: dict[str, str],
    ) -> None:
        self._client = client
        self._settings = settings
        self._steps = steps
        self._context = context.resolve()
        self._args = dict(build_args)
        self._env: dict[str, str] = {}
        self._workdir = "/"
        self._user = "0"
        self._log: list[str] = []

    def build(self, tag: str, *, labels: dict[str, str]) -> None:
        base = None
        for step in self._steps:
            if step.instruction == "FROM":
                base = self._subst(shlex.split(step.args)[0])
                break
            self._arg(step.args)
        assert base is not None
        container = self._client.containers.create(
            base,
            ["-c", _BUILD_INIT],
            entrypoint=["/bin/sh"],
            user="0:0",
            network_mode="none",
            mem_limit=f"{self._settings.memory_mb}m",
            memswap_limit=f"{self._settings.memory_mb}m",
            pids_limit=self._settings.pids,
            security_opt=["no-new-privileges"],
            labels={LABEL: "1", **labels},
        )
        try:
            container.start()
            inspect = self._client.api.inspect_image(base).get("Config") or {}
            for item in inspect.get("Env") or []:
                name, _, value = str(item).partition("=")
                self._env[name] = value
            self._workdir = inspect.get("WorkingDir") or "/"
            self._user = inspect.get("User") or "0"
            started = False
            for step in self._steps:
                if step.instruction == "FROM":
                    started = True
                elif started:
                    self._run_step(container, step)
            changes = [f"ENV {k}={v}" for k, v in sorted(self._env.items())]
            changes += [f"WORKDIR {self._workdir}", f"USER {self._user}"]
            changes += [
                f"{s.instruction} {s.args}" for s in self._steps if s.instruction in _CONFIG
            ]
            changes += [f"LABEL {k}={v}" for k, v in labels.items()]
            name, _, version = tag.rpartition(":")
            container.commit(repository=name, tag=version, changes=changes)
        finally:
            container.remove(force=True, v=True)

    def _run_step(self, container: Any, step: Step) -> None:
        kind, args = step.instruction, step.args
        if kind == "ARG":
            self._arg(args)
        elif kind == "ENV":
            self._env_step(args)
        elif kind == "WORKDIR":
            self._workdir = posix_join(self._workdir, self._subst(args))
            self._exec(container, ["mkdir", "-p", "--", self._workdir], "0", f"WORKDIR {args}")
        elif kind == "USER":
            self._user = self._subst(args)
        elif kind == "RUN":
            argv = _run_argv(args)
            self._exec(container, argv, self._user, f"RUN {args[:200]}")
        elif kind in ("COPY", "ADD"):
            self._copy(container, args)

    def _arg(self, args: str) -> None:
        name, eq, default = args.partition("=")
        name = name.strip()
        if name and name not in self._args and eq:
            self._args[name] = self._subst(shlex.split(default)[0] if default.strip() else "")
        self._args.setdefault(name, "")

    def _env_step(self, args: str) -> None:
        words = shlex.split(args)
        if words and "=" not in words[0]:
            self._env[words[0]] = self._subst(args.split(None, 1)[1] if len(words) > 1 else "")
            return
        for word in words:
            name, _, value = word.partition("=")
            self._env[name] = self._subst(value)

    def _subst(self, text: str) -> str:
        values = {**self._args, **self._env}

        def one(match: re.Match[str]) -> str:
            return values.get(match.group(1) or match.group(2), "")

        return re.sub(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)", one, text)

    def _exec(self, container: Any, argv: list[str], user: str, what: str) -> None:
        env = {**self._args, **self._env}
        timeout = str(self._settings.setup_timeout_s)
        result = container.exec_run(
            ["timeout", "-k", "10", timeout, *argv],
            user=user,
            environment=env,
            workdir=self._workdir,
            demux=False,
        )
        output = (result.output or b"").decode(errors="replace")[-_STEP_OUTPUT:]
        self._log.append(f"$ {what}\n{output}")
        if result.exit_code != 0:
            raise BuildFailed(f"`{what[:200]}` exited {result.exit_code}", "\n".join(self._log))

    def _copy(self, container: Any, args: str) -> None:
        words = shlex.split(args)
        owner = (0, 0)
        flags = [w for w in words if w.startswith("--")]
        words = [w for w in words if not w.startswith("--")]
        for flag in flags:
            name, _, value = flag[2:].partition("=")
            if name == "chown":
                uid, _, gid = value.partition(":")
                if not (uid.isdigit() and (not gid or gid.isdigit())):
                    raise BuildFailed(f"COPY --chown takes numeric ids here, not {value[:40]}")
                owner = (int(uid), int(gid or uid))
            elif name != "chmod":
                raise BuildFailed(f"COPY --{name[:40]} is not supported")
        if len(words) < 2:
            raise BuildFailed(f"COPY needs a source and a destination: {args[:100]}")
        *sources, dest_raw = (self._subst(w) for w in words)
        dest = posix_join(self._workdir, dest_raw)
        into_dir = dest_raw.endswith("/") or len(sources) > 1
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tf:
            for source in sources:
                if any(ch in source for ch in "*?["):
                    raise BuildFailed(f"COPY with wildcards is not supported: {source[:100]}")
                if "://" in source:
                    raise BuildFailed("ADD of a URL is not supported (no network)")
                path = (self._context / source).resolve()
                if path != self._context and self._context not in path.parents:
                    raise BuildFailed(f"COPY {source[:100]}: outside the build context")
                if not path.exists():
                    raise BuildFailed(f"COPY {source[:100]}: not in the build context")
                if path.is_dir():
                    target = dest.lstrip("/")
                    for item in [path, *_walk(path)]:
                        rel = item.relative_to(path).as_posix()
                        arc = target if rel == "." else f"{target}/{rel}"
                        _add_owned(tf, item, arc, owner)
                else:
                    arc = f"{dest}/{path.name}" if into_dir else dest
                    _add_owned(tf, path, arc.lstrip("/"), owner)
        buf.seek(0)
        self._log.append(f"$ COPY {args[:200]}")
        if not container.put_archive("/", buf.getvalue()):
            raise BuildFailed(f"COPY {args[:100]} failed", "\n".join(self._log))


def _add_owned(tf: tarfile.TarFile, path: Path, arcname: str, owner: tuple[int, int]) -> None:
    # Parent folders the tar names implicitly are made by the engine.
    info = tf.gettarinfo(str(path), arcname=arcname)
    info.uid, info.gid = owner
    info.uname = info.gname = ""
    if info.isreg():
        with path.open("rb") as fh:
            tf.addfile(info, fh)
    elif info.isdir() or info.issym():
        tf.addfile(info)


def _run_argv(args: str) -> list[str]:
    if args.startswith("["):
        try:
            argv = json.loads(args)
        except ValueError:
            argv = None
        if isinstance(argv, list) and argv and all(isinstance(a, str) for a in argv):
            return argv
    return ["/bin/sh", "-c", args]


def posix_join(base: str, path: str) -> str:
    import posixpath

    return posixpath.normpath(posixpath.join(base, path))


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


# A probe that exits 0 always prints its mark line, so a run with no line lost its output
# rather than found a missing shell (an image without one fails to start, or exits
# non-zero). Podman's followed logs of a container that ends at once came back empty once
# in a CI run on a loaded machine; that image was then refused as lacking /bin/sh.
PROBE_ATTEMPTS = 3


def _probe(client: Any, image: str) -> str:
    for _attempt in range(PROBE_ATTEMPTS):
        missing = _probe_once(client, image)
        if missing is not None:
            return missing
    return "a working /bin/sh (the probe printed nothing)"


def _probe_once(client: Any, image: str) -> str | None:
    """What the image lacks ("" for nothing), or None when the probe's output was lost."""
    import docker.errors

    try:
        output = client.containers.run(
            image,
            ["-c", _CONTRACT_PROBE],
            # Not []: an empty entrypoint does not reset the image's on Podman.
            entrypoint=["/bin/sh"],
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
    return None
